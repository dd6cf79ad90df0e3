import TodoSyncCore

/// Every SQL statement the application runs, in one place. Parameters are always bound (`?`);
/// nothing is ever spliced into the text. Column lists match the row mappings in `Rows.swift`.
enum SQL {
    enum Health {
        static let ping = "SELECT 1"
    }

    enum Users {
        static let insert = """
            INSERT INTO users (email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?)
            """
        static let byEmailKey = """
            SELECT id, email, password_hash FROM users WHERE email_key = ?
            """
        /// Takes the per-user write lock: every write transaction of a user starts here, so a
        /// user's writes are serialised and their versions are allocated in commit order.
        static let lockForWrite = "SELECT change_seq FROM users WHERE id = ? FOR UPDATE"
        /// Stores the last version the transaction handed out (while still holding the lock).
        static let saveChangeSequence = "UPDATE users SET change_seq = ? WHERE id = ?"
    }

    /// The failed-login throttle, one row per email key (SHA-256 of the NFC lower-cased email),
    /// whether or not an account has that email, so both answer alike (Sql/011).
    enum Logins {
        /// Makes sure the key has a row for `reserveAttempt` to lock and update.
        static let ensureRow = "INSERT IGNORE INTO login_throttle (email_hash, failures, window_start) VALUES (?, 0, NULL)"
        /// Reserves one attempt before the password is checked, unless the key is throttled (then
        /// no row changes): counts it as a failure, restarting the count when the previous window
        /// has passed. Atomic under the row lock, so concurrent guesses cannot all slip past the
        /// limit. A correct password deletes the row afterwards.
        /// Parameters: window start ×2, now, email hash, max failures, window start.
        static let reserveAttempt = """
            UPDATE login_throttle
               SET failures = IF(window_start IS NULL OR window_start < ?, 1, failures + 1),
                   window_start = IF(window_start IS NULL OR window_start < ?, ?, window_start)
             WHERE email_hash = ?
               AND NOT (failures >= ? AND window_start IS NOT NULL AND window_start >= ?)
            """
        /// Seconds from now (parameter 1) to the start of the key's window: minus its age.
        static let windowOffset = "SELECT TIMESTAMPDIFF(SECOND, ?, window_start) FROM login_throttle WHERE email_hash = ?"
        static let clear = "DELETE FROM login_throttle WHERE email_hash = ?"
        /// Purge: rows whose window has passed carry nothing worth keeping.
        static let deleteExpired = "DELETE FROM login_throttle WHERE window_start < ?"
    }

    /// Per-account quotas (Sql/012): live records, and write operations per clock hour.
    enum Quotas {
        /// The account's quotas, its own or the defaults (parameters 1 and 2).
        static let limits = """
            SELECT COALESCE(quota_records, ?), COALESCE(quota_operations_per_hour, ?) FROM users WHERE id = ?
            """
        static let liveRecords = """
            SELECT (SELECT COUNT(*) FROM todos WHERE user_id = ? AND deleted_at IS NULL)
                 + (SELECT COUNT(*) FROM tags WHERE user_id = ? AND deleted_at IS NULL)
            """
        static let ensureUsageRow = """
            INSERT IGNORE INTO account_usage (user_id, hour_start, operations) VALUES (?, ?, 0)
            """
        /// Charges operations to the hour unless that would pass the quota (then no row changes).
        /// Parameters: operations, user, hour, operations, quota.
        static let chargeOperations = """
            UPDATE account_usage SET operations = operations + ?
             WHERE user_id = ? AND hour_start = ? AND operations + ? <= ?
            """
        static let deletePastHours = "DELETE FROM account_usage WHERE hour_start < ?"
    }

    enum Tokens {
        static let insert = """
            INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)
            """
        static let userForToken = """
            SELECT user_id FROM auth_tokens WHERE token_hash = ? AND expires_at > ?
            """
        static let delete = "DELETE FROM auth_tokens WHERE token_hash = ?"
    }

    enum Tags {
        static let columns = "id, client_id, name, color, version, created_at, updated_at, deleted_at"
        static let listLive = """
            SELECT \(columns) FROM tags WHERE user_id = ? AND deleted_at IS NULL ORDER BY id
            """
        static let liveByID = """
            SELECT \(columns) FROM tags WHERE id = ? AND user_id = ? AND deleted_at IS NULL
            """
        static let byClientKey = """
            SELECT \(columns) FROM tags WHERE user_id = ? AND client_key = ?
            """
        static let isLive = "SELECT 1 FROM tags WHERE id = ? AND user_id = ? AND deleted_at IS NULL"
        static let insert = """
            INSERT INTO tags (user_id, client_id, client_key, name, color, version, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """
        static let update = """
            UPDATE tags SET name = ?, color = ?, version = ?, updated_at = ?, deleted_at = NULL
             WHERE id = ? AND user_id = ?
            """
        static let softDelete = """
            UPDATE tags SET deleted_at = ?, updated_at = ?, version = ? WHERE id = ? AND user_id = ?
            """
    }

    /// `columns` with each name qualified by `alias` (for joins).
    static func qualified(_ columns: String, _ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingWhitespace())" }
            .joined(separator: ", ")
    }

    /// The hot list reads check the bearer token in the same statement: `auth_tokens` is read as
    /// a constant table (primary-key lookup on the hash) joined to the user's rows, saving the
    /// separate token round trip. No rows means no records *or* a bad token; only then is the
    /// token checked on its own. Parameters start with token hash, now.
    static let tokenJoin = "auth_tokens a JOIN"
    static let tokenCondition = "a.token_hash = ? AND a.expires_at > ?"

    enum Todos {
        static let columns = """
            id, client_id, title, raw, is_important, is_life, tag_id, difficulty, estimated_time, deadline, \
            is_completed, version, created_at, updated_at, deleted_at
            """
        /// Live todos with deadlines in [from, to] of the token's user, in the contract's order;
        /// the order is exactly the index `todos_user_day_order`, so no filesort.
        /// Parameters: token hash, now, from, to.
        static let listLiveInRangeForToken = """
            SELECT \(qualified(columns, "t")) FROM \(tokenJoin) todos t FORCE INDEX (todos_user_day_order)
                ON t.user_id = a.user_id
             WHERE \(tokenCondition) AND t.deleted_at IS NULL AND t.deadline BETWEEN ? AND ?
             ORDER BY t.deadline, t.is_important DESC, t.created_at DESC, t.title, t.id
            """
        static let liveByID = """
            SELECT \(columns) FROM todos WHERE id = ? AND user_id = ? AND deleted_at IS NULL
            """
        static let byClientKey = """
            SELECT \(columns) FROM todos WHERE user_id = ? AND client_key = ?
            """
        static let insert = """
            INSERT INTO todos (user_id, client_id, client_key, title, raw, is_important, is_life, tag_id, difficulty,
                               estimated_time, deadline, is_completed, version, created_at, updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        static let update = """
            UPDATE todos SET title = ?, raw = ?, is_important = ?, is_life = ?, tag_id = ?, difficulty = ?,
                             estimated_time = ?, deadline = ?, is_completed = ?, version = ?, updated_at = ?,
                             deleted_at = NULL
             WHERE id = ? AND user_id = ?
            """
        static let softDelete = """
            UPDATE todos SET deleted_at = ?, updated_at = ?, version = ? WHERE id = ? AND user_id = ?
            """
        static let liveWithTag = """
            SELECT id, deadline FROM todos WHERE user_id = ? AND tag_id = ? AND deleted_at IS NULL ORDER BY id
            """
        static let clearTag = """
            UPDATE todos SET tag_id = NULL, version = ?, updated_at = ? WHERE id = ? AND user_id = ?
            """
        /// Tombstones keep no tag reference either (no version bump: a tombstone's payload has no tagId).
        static let clearTagOnTombstones = """
            UPDATE todos SET tag_id = NULL WHERE user_id = ? AND tag_id = ? AND deleted_at IS NOT NULL
            """
    }

    enum DailyStats {
        static let columns = """
            id, day, todo_count, completed_count, productivity_hundredths, balance_num, center_x_hundredths, \
            center_y_hundredths, tag_stats, version, created_at, updated_at, deleted_at
            """
        /// Recomputation loads `dayBatch` dates per query (unused slots repeat a date).
        static let dayBatch = 16
        private static let daySlots = Array(repeating: "?", count: dayBatch).joined(separator: ", ")
        /// `inputsForDay` for a batch of dates, with the date first.
        static let inputsForDays = """
            SELECT t.deadline, t.is_completed, t.is_life, t.difficulty, t.estimated_time, t.tag_id, g.name, g.color
              FROM todos t FORCE INDEX (todos_user_day_order)
              LEFT JOIN tags g ON g.id = t.tag_id AND g.user_id = t.user_id
             WHERE t.user_id = ? AND t.deleted_at IS NULL AND t.deadline IN (\(daySlots))
            """
        static let byDays = """
            SELECT \(columns) FROM daily_stats WHERE user_id = ? AND day IN (\(daySlots))
            """
        static let liveByDay = """
            SELECT \(columns) FROM daily_stats WHERE user_id = ? AND day = ? AND deleted_at IS NULL
            """
        /// Live stats of the token's user from `from` to `to`, by day (index order, no filesort).
        /// Parameters: token hash, now, from, to.
        static let liveInRangeForToken = """
            SELECT \(qualified(columns, "s")) FROM \(tokenJoin) daily_stats s FORCE INDEX (daily_stats_user_day)
                ON s.user_id = a.user_id
             WHERE \(tokenCondition) AND s.day BETWEEN ? AND ? AND s.deleted_at IS NULL
             ORDER BY s.day
            """
        static let insert = """
            INSERT INTO daily_stats (user_id, day, todo_count, completed_count, productivity_hundredths, balance_num,
                                     center_x_hundredths, center_y_hundredths, tag_stats, version, created_at,
                                     updated_at)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """
        /// Writes new content; also brings a tombstone back to life (deleted_at cleared).
        static let update = """
            UPDATE daily_stats SET todo_count = ?, completed_count = ?, productivity_hundredths = ?, balance_num = ?,
                                   center_x_hundredths = ?, center_y_hundredths = ?, tag_stats = ?, version = ?,
                                   updated_at = ?, deleted_at = NULL
             WHERE id = ?
            """
        static let softDelete = """
            UPDATE daily_stats SET deleted_at = ?, updated_at = ?, version = ? WHERE id = ?
            """
        /// Dates whose stat lists this tag (completed live todos carry it).
        static let daysWithCompletedTag = """
            SELECT DISTINCT deadline FROM todos
             WHERE user_id = ? AND tag_id = ? AND deleted_at IS NULL AND is_completed = 1
            """
    }

    /// Pull, in two steps per kind: the versions of the next `limit + 1` changes (an index-only
    /// scan of (user_id, version, deleted_at)), then the full rows of the page's version range.
    /// Tombstones with versions up to the third parameter are skipped (a first pull does not send
    /// deletions of records the client never received).
    enum Pull {
        static let syncState = "SELECT change_seq, purged_through FROM users WHERE id = ?"

        static func nextVersions(_ table: String) -> String {
            """
            SELECT version FROM \(table) FORCE INDEX (\(table)_user_version_deleted)
             WHERE user_id = ? AND version > ? AND (deleted_at IS NULL OR version > ?) ORDER BY version LIMIT ?
            """
        }
        static let tagVersions = nextVersions("tags")
        static let todoVersions = nextVersions("todos")
        static let dailyStatVersions = nextVersions("daily_stats")

        static func page(_ table: String, _ columns: String) -> String {
            """
            SELECT \(columns) FROM \(table) FORCE INDEX (\(table)_user_version_deleted)
             WHERE user_id = ? AND version > ? AND version <= ? AND (deleted_at IS NULL OR version > ?)
             ORDER BY version
            """
        }
        static let tagPage = page("tags", Tags.columns)
        static let todoPage = page("todos", Todos.columns)
        static let dailyStatPage = page("daily_stats", DailyStats.columns)

        /// Parent tags by id, `parentTagBatch` ids per query (unused slots repeat an id): 64, so
        /// that a page referring to a typical user's tags (tens) costs one round trip.
        static let parentTagBatch = 64
        static let parentTags = """
            SELECT \(Tags.columns) FROM tags
             WHERE user_id = ? AND deleted_at IS NULL AND version > ?
               AND id IN (\(Array(repeating: "?", count: parentTagBatch).joined(separator: ", ")))
            """
    }

    enum Push {
        /// Stored results are looked up and written `batch` operations per statement (unused
        /// lookup slots repeat a key; a short tail is written by the smaller statements).
        static let batch = 32
        static let storedResults = """
            SELECT op_key, result FROM sync_operations
             WHERE user_id = ? AND op_key IN (\(Array(repeating: "?", count: batch).joined(separator: ", ")))
            """
        static func storeResults(rows: Int) -> String {
            "INSERT INTO sync_operations (user_id, op_key, device_id, result, created_at) VALUES "
                + Array(repeating: "(?, ?, ?, ?, ?)", count: rows).joined(separator: ", ")
        }
        static let storeResultsBatch = storeResults(rows: batch)
        static let storeResultsEight = storeResults(rows: 8)
        static let storeResultOne = storeResults(rows: 1)
        static let tagByID = "SELECT \(Tags.columns) FROM tags WHERE id = ? AND user_id = ?"
        static let todoByID = "SELECT \(Todos.columns) FROM todos WHERE id = ? AND user_id = ?"
    }

    /// Retention: tombstones, push results and expired tokens older than the horizon.
    enum Purge {
        static func recordPurgedThrough(_ table: String) -> String {
            """
            UPDATE users u JOIN (SELECT user_id, MAX(version) AS purged FROM \(table)
                                  WHERE deleted_at IS NOT NULL AND deleted_at < ? GROUP BY user_id) p
                ON p.user_id = u.id
               SET u.purged_through = GREATEST(u.purged_through, p.purged)
            """
        }
        static func deleteTombstones(_ table: String) -> String {
            "DELETE FROM \(table) WHERE deleted_at IS NOT NULL AND deleted_at < ?"
        }
        static let tables = ["tags", "todos", "daily_stats"]
        static let deleteOperations = "DELETE FROM sync_operations WHERE created_at < ?"
        static let deleteExpiredTokens = "DELETE FROM auth_tokens WHERE expires_at < ?"
    }

    /// Maintenance: full recomputation of derived data.
    enum Maintenance {
        static let allUserIDs = "SELECT id FROM users ORDER BY id"
        /// Every date that has a live todo or a stat row (live or tombstone) for the user.
        static let daysOfUser = """
            SELECT DISTINCT deadline FROM todos FORCE INDEX (todos_user_day_order)
             WHERE user_id = ? AND deleted_at IS NULL
            UNION
            SELECT day FROM daily_stats WHERE user_id = ?
            """
    }
}
