import Deflate
import MariaDB
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
        /// With the lock come the account's live-record count and its quotas (its own or the
        /// defaults, parameters 1 to 3), so charging a write costs no extra round trip.
        /// A deleted account has no row here (`DomainError.unauthenticated`): a request that
        /// authenticated just before the delete committed writes nothing after it.
        static let lockForWrite = """
            SELECT change_seq, live_records, COALESCE(quota_records, ?), COALESCE(quota_operations_per_hour, ?),
                   COALESCE(quota_stored_bytes_per_hour, ?)
              FROM users WHERE id = ? AND deleted_at IS NULL FOR UPDATE
            """
        /// Stores the last version the transaction handed out, the change in live records and the
        /// highest version it gave a tag (0: none; `tag_seq` never goes down, Sql/024), while still
        /// holding the lock. Parameters: sequence, live-record delta, tag version, user.
        static let saveChangeSequence = """
            UPDATE users SET change_seq = ?, live_records = live_records + ?, tag_seq = GREATEST(tag_seq, ?) WHERE id = ?
            """
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

    /// Per-account quotas (Sql/012, Sql/017): live records, and write operations per clock hour.
    /// Charged inside the write transaction, under the user's row lock (`Store.write`).
    enum Quotas {
        /// The exact live-record count, to reconcile `users.live_records` when it says the
        /// record quota would be passed (rows written by older responders or by hand).
        static let liveRecords = """
            SELECT (SELECT COUNT(*) FROM todos WHERE user_id = ? AND deleted_at IS NULL)
                 + (SELECT COUNT(*) FROM tags WHERE user_id = ? AND deleted_at IS NULL)
            """
        static let setLiveRecords = "UPDATE users SET live_records = ? WHERE id = ?"
        /// Charges an amount to one of `account_usage`'s per-hour counters unless that would pass
        /// its quota: the affected-row count is 1 (new hour row), 2 (charged) or 0 (quota reached,
        /// unchanged). Parameters: user, hour, amount, amount, quota, amount.
        private static func chargeHour(_ column: String) -> String {
            """
            INSERT INTO account_usage (user_id, hour_start, \(column)) VALUES (?, ?, ?)
                ON DUPLICATE KEY UPDATE \(column) = IF(\(column) + ? <= ?, \(column) + ?, \(column))
            """
        }
        /// Write operations (Sql/012).
        static let chargeOperations = chargeHour("operations")
        /// Bytes of push results and their records (Sql/020).
        static let chargeStoredBytes = chargeHour("stored_bytes")
        static let deletePastHours = "DELETE FROM account_usage WHERE hour_start < ?"
    }

    enum Tokens {
        /// `public_id` comes from the column's default (Sql/022); `last_used_at` stays NULL until
        /// the first use a minute or more later (`lastUsed`).
        static let insert = """
            INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?, ?, ?, ?)
            """
        /// When a token was last used, as stored (NULL means when it was issued); `alias`: the
        /// table's alias in the statement, if any.
        static func lastUsed(_ alias: String? = nil) -> String {
            let prefix = alias.map { "\($0)." } ?? ""
            return "COALESCE(\(prefix)last_used_at, \(prefix)created_at)"
        }
        /// The token's user, and whether its last use is older than the first parameter (so
        /// `touch` is due). Parameters: stale-before, token hash, now.
        static let userForToken = """
            SELECT user_id, \(lastUsed()) < ? FROM auth_tokens WHERE token_hash = ? AND expires_at > ?
            """
        /// Records a use of the token, unless another request of it already did in the last
        /// minute: at most one write per token per minute. Parameters: now, token hash, stale-before.
        static let touch = """
            UPDATE auth_tokens SET last_used_at = ? WHERE token_hash = ? AND \(lastUsed()) < ?
            """
        static let delete = "DELETE FROM auth_tokens WHERE token_hash = ?"
    }

    /// The routes under `/account/` (Store+Account.swift, Sql/022).
    enum Account {
        /// What re-checking a signed-in user's password needs: the email key (its hash keys the
        /// failed-login counter, as at login) and the password hash.
        static let credentials = "SELECT email_key, password_hash FROM users WHERE id = ? AND deleted_at IS NULL"
        /// The presented token, locked for the transaction that changes the account: it must still
        /// be valid when the change commits. Parameters: token hash, user, now.
        static let lockToken = """
            SELECT 1 FROM auth_tokens WHERE token_hash = ? AND user_id = ? AND expires_at > ? FOR UPDATE
            """
        /// Stores a new password hash, only if the one that was checked is still current (a
        /// concurrent change wins; this one is then a wrong password). Parameters: new, user, checked.
        static let setPassword = "UPDATE users SET password_hash = ? WHERE id = ? AND password_hash = ?"
        /// Every token of the user but the presented one. Parameters: user, token hash.
        static let revokeOtherTokens = "DELETE FROM auth_tokens WHERE user_id = ? AND token_hash <> ?"
        static let revokeAllTokens = "DELETE FROM auth_tokens WHERE user_id = ?"
        /// The user's valid tokens, newest first. Parameters: presented token hash, user, now.
        static let sessions = """
            SELECT public_id, created_at, \(Tokens.lastUsed()), token_hash = ? FROM auth_tokens
             WHERE user_id = ? AND expires_at > ? ORDER BY created_at DESC, public_id
            """
        /// Parameters: user, public id.
        static let revokeSession = "DELETE FROM auth_tokens WHERE user_id = ? AND public_id = ?"
        /// Marks the account deleted and frees its email at once: the email key becomes
        /// `deleted:<id>`, which has no `@` and so is no email's key; the email and password
        /// hash are blanked. Parameters: now, user.
        static let markDeleted = """
            UPDATE users SET deleted_at = ?, email = '', email_key = CONCAT('deleted:', id), password_hash = ''
             WHERE id = ? AND deleted_at IS NULL
            """
        /// The deletion's line in the journal (Sql/029) that a restore re-applies, in the
        /// transaction that marked the account: the id, its creation time and the deletion time,
        /// nothing of its data. The purge never erases it. Parameter: user.
        static let journalDeletion = """
            INSERT IGNORE INTO account_deletions (account_id, account_created_at, deleted_at)
            SELECT id, created_at, deleted_at FROM users WHERE id = ? AND deleted_at IS NOT NULL
            """
        /// The export's `user`. Columns: id, email, created_at.
        static let exportUser = "SELECT id, email, created_at FROM users WHERE id = ? AND deleted_at IS NULL"
    }

    /// Erasing deleted accounts (`todosync purge`): every row of the user, table by table in
    /// batches of at most `batch` rows per statement (each its own commit, so no statement holds a
    /// big write set on a Galera cluster), the users row last (until then the account stays marked
    /// and the next purge goes on). Every table with a `user_id` column must be listed here: an
    /// integration test reads the schema and fails for one that keeps rows of an erased account.
    enum Erase {
        static let batch = 1000
        /// Deleted accounts are taken `userBatch` at a time.
        static let userBatch = 1000
        static let deletedUsers = "SELECT id FROM users WHERE deleted_at IS NOT NULL ORDER BY id LIMIT \(userBatch)"
        /// Children first (feed and list copies, then todos before the tags they name).
        static let tables = [
            "auth_tokens", "idempotency_keys", "sync_operations", "sync_feed", "sync_feed_backfill", "todo_list", "todo_days",
            "daily_stats", "todos", "tags", "sync_devices", "account_usage",
        ]
        /// Tables that another branch's migration adds (Sql/019 push result records): erased when
        /// present, skipped when this database does not have them yet.
        static let optionalTables = ["sync_result_records"]
        static let existingTables = """
            SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()
            """
        /// Parameters: user, batch.
        static func deleteBatch(_ table: String) -> String { "DELETE FROM \(table) WHERE user_id = ? LIMIT ?" }
        static let user = "DELETE FROM users WHERE id = ? AND deleted_at IS NOT NULL"
    }

    enum Tags {
        /// `TagColumn`'s columns, in its order (what `Tag(row:)` decodes).
        static let columns = TagColumn.selectList
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
        /// Parameters: user id, clientId, client key, `TagColumn.contentValues`, version, created,
        /// updated, device.
        static let insert = """
            INSERT INTO tags (user_id, client_id, client_key, \(TagColumn.contentNames), version, created_at,
                              updated_at, changed_by_device)
            VALUES (\(TagColumn.placeholders(contentPlus: 7)))
            """
        /// Parameters: `TagColumn.contentValues`, version, updated, device, id, user id.
        static let update = """
            UPDATE tags SET \(TagColumn.contentAssignments),
                            version = ?, updated_at = ?, deleted_at = NULL, changed_by_device = ?
             WHERE id = ? AND user_id = ?
            """
        static let softDelete = """
            UPDATE tags SET deleted_at = ?, updated_at = ?, version = ?, changed_by_device = ? WHERE id = ? AND user_id = ?
            """
    }

    /// `columns` with each name qualified by `alias` (for joins).
    static func qualified(_ columns: String, _ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingWhitespace())" }
            .joined(separator: ", ")
    }

    /// How a hot list read names its user (`Authentication`): by id, or by a bearer token checked
    /// in the same statement, `auth_tokens` read as a constant table (primary-key lookup on the
    /// hash) joined to the user's rows, which saves the separate token round trip. With a token,
    /// no rows means no records *or* a bad token; only then is the token checked on its own.
    ///
    /// With a token, each row also says whether the token's last use is older than the first
    /// parameter (the column before the user id), so the read can keep `last_used_at` (at most
    /// one write a minute, `Tokens.touch`) without a round trip of its own.
    enum ReadOwner {
        /// Parameters start with the user id.
        case user
        /// Parameters start with stale-before, token hash, now.
        case token

        /// The FROM clause over `table` (with its alias and hints), `alias` being its alias.
        func from(_ table: String, alias: String) -> String {
            switch self {
            case .user: table
            case .token: "auth_tokens a JOIN \(table) ON \(alias).user_id = a.user_id"
            }
        }

        /// The owner's user id, selected as each row's last column (the request log names the
        /// user even when the read checked the token).
        func userID(alias: String) -> String {
            switch self {
            case .user: "\(alias).user_id"
            case .token: "\(Tokens.lastUsed("a")) < ?, a.user_id"
            }
        }

        /// The WHERE condition that picks the owner's rows.
        func condition(alias: String) -> String {
            switch self {
            case .user: "\(alias).user_id = ?"
            case .token: "a.token_hash = ? AND a.expires_at > ?"
            }
        }
    }

    enum Todos {
        /// `TodoColumn`'s columns, in its order (what `Todo(row:)` decodes).
        static let columns = TodoColumn.selectList
        static let liveByID = """
            SELECT \(columns) FROM todos WHERE id = ? AND user_id = ? AND deleted_at IS NULL
            """
        static let byClientKey = """
            SELECT \(columns) FROM todos WHERE user_id = ? AND client_key = ?
            """
        /// Parameters: user id, clientId, client key, `TodoColumn.contentValues`, version, created,
        /// updated, device.
        static let insert = """
            INSERT INTO todos (user_id, client_id, client_key, \(TodoColumn.contentNames), version, created_at,
                               updated_at, changed_by_device)
            VALUES (\(TodoColumn.placeholders(contentPlus: 7)))
            """
        /// Parameters: `TodoColumn.contentValues`, version, updated, device, id, user id.
        static let update = """
            UPDATE todos SET \(TodoColumn.contentAssignments),
                             version = ?, updated_at = ?, deleted_at = NULL, changed_by_device = ?
             WHERE id = ? AND user_id = ?
            """
        static let softDelete = """
            UPDATE todos SET deleted_at = ?, updated_at = ?, version = ?, changed_by_device = ? WHERE id = ? AND user_id = ?
            """
        static let liveWithTag = """
            SELECT \(columns) FROM todos WHERE user_id = ? AND tag_id = ? AND deleted_at IS NULL ORDER BY id
            """
        static let clearTag = """
            UPDATE todos SET tag_id = NULL, version = ?, updated_at = ?, changed_by_device = NULL
             WHERE id = ? AND user_id = ?
            """
        /// Tombstones keep no tag reference either (no version bump: a tombstone's payload has no tagId).
        static let clearTagOnTombstones = """
            UPDATE todos SET tag_id = NULL WHERE user_id = ? AND tag_id = ? AND deleted_at IS NOT NULL
            """
    }

    enum DailyStats {
        /// `DailyStatColumn`'s columns, in its order (what `DailyStat(row:)` decodes).
        static let columns = DailyStatColumn.selectList
        /// Recomputation loads `dayBatch` dates per query (unused slots repeat a date).
        static let dayBatch = 16
        private static let daySlots = Array(repeating: "?", count: dayBatch).joined(separator: ", ")
        /// The full recompute's inputs for a batch of dates, with the date first: every live todo.
        static let inputsForDays = """
            SELECT deadline, is_completed, is_life, difficulty, estimated_time, tag_id
              FROM todos FORCE INDEX (todos_user_day)
             WHERE user_id = ? AND deleted_at IS NULL AND deadline IN (\(daySlots))
            """
        /// A batch of dates' stats (live or tombstones), each followed by its aggregate's columns.
        static let byDays = """
            SELECT \(columns), \(DailyAggregateColumn.selectList) FROM daily_stats WHERE user_id = ? AND day IN (\(daySlots))
            """
        /// Rendering looks tags up `tagBatch` at a time (unused slots repeat an id). Tombstones
        /// included, as the stat of a todo whose tag is being deleted in the same write needs.
        static let tagBatch = 32
        static let tagsByIDs = """
            SELECT id, name, color FROM tags WHERE user_id = ? AND id IN (\(Array(repeating: "?", count: tagBatch).joined(separator: ", ")))
            """
        static let liveByDay = """
            SELECT \(columns) FROM daily_stats WHERE user_id = ? AND day = ? AND deleted_at IS NULL
            """
        /// Live stats of the owner's user from `from` to `to`, by day: a range read of the primary
        /// key (user_id, day), no lookup per row, no filesort. Parameters: the owner's, from, to.
        static func liveInRange(_ owner: ReadOwner) -> String {
            """
            SELECT \(qualified(columns, "s")), \(owner.userID(alias: "s"))
              FROM \(owner.from("daily_stats s FORCE INDEX (PRIMARY)", alias: "s"))
             WHERE \(owner.condition(alias: "s")) AND s.day BETWEEN ? AND ? AND s.deleted_at IS NULL
             ORDER BY s.day
            """
        }
        static let liveInRangeForUser = liveInRange(.user)
        static let liveInRangeForToken = liveInRange(.token)
        static let insert = """
            INSERT INTO daily_stats (user_id, day, todo_count, completed_count, productivity_hundredths, balance_num,
                                     center_x_hundredths, center_y_hundredths, tag_stats, version, created_at,
                                     updated_at, \(DailyAggregateColumn.selectList))
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(aggregateSlots))
            """
        /// Writes new content into `dayBatch` existing stats at once (by id; unused rows repeat
        /// one); also brings a tombstone back to life (deleted_at cleared). Each row: id, user id,
        /// day, the content, version, created (never written: the row exists), updated, the
        /// aggregate. One statement instead of one UPDATE per date.
        static let updateBatch = """
            INSERT INTO daily_stats (id, user_id, day, todo_count, completed_count, productivity_hundredths, balance_num,
                                     center_x_hundredths, center_y_hundredths, tag_stats, version, created_at,
                                     updated_at, \(DailyAggregateColumn.selectList))
            VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(aggregateSlots))", count: dayBatch)
                .joined(separator: ", "))
            ON DUPLICATE KEY UPDATE todo_count = VALUES(todo_count), completed_count = VALUES(completed_count),
                productivity_hundredths = VALUES(productivity_hundredths), balance_num = VALUES(balance_num),
                center_x_hundredths = VALUES(center_x_hundredths), center_y_hundredths = VALUES(center_y_hundredths),
                tag_stats = VALUES(tag_stats), version = VALUES(version), updated_at = VALUES(updated_at),
                deleted_at = NULL, \(DailyAggregateColumn.allCases.map { "\($0.sqlName) = VALUES(\($0.sqlName))" }
                .joined(separator: ", "))
            """
        /// A date that lost its last live todo: its aggregate is all zeros again.
        static let softDelete = """
            UPDATE daily_stats SET deleted_at = ?, updated_at = ?, version = ?, \(aggregateAssignments) WHERE id = ?
            """
        /// New inputs whose rendering did not change (no new version): `todo_count` and
        /// `completed_count` are part of the stat, so they cannot have changed either.
        static let saveAggregate = """
            UPDATE daily_stats SET \(aggregateAssignments) WHERE id = ?
            """
        private static let aggregateSlots = DailyAggregateColumn.allCases.map { _ in "?" }.joined(separator: ", ")
        private static let aggregateAssignments = DailyAggregateColumn.allCases.map { "\($0.sqlName) = ?" }
            .joined(separator: ", ")
        /// Dates whose stat lists this tag (completed live todos carry it).
        static let daysWithCompletedTag = """
            SELECT DISTINCT deadline FROM todos
             WHERE user_id = ? AND tag_id = ? AND deleted_at IS NULL AND is_completed = 1
            """
    }

    enum Epoch {
        static let current = "SELECT epoch FROM sync_epoch WHERE id = 1"
        static let renew = "UPDATE sync_epoch SET epoch = ?, renewed_at = ? WHERE id = 1"
    }

    enum Devices {
        /// Registers a device of a user, or finds it: either way LAST_INSERT_ID() is its number.
        static let register = """
            INSERT INTO sync_devices (user_id, device_key, created_at) VALUES (?, ?, ?)
                ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)
            """
    }

    /// The rendered live todos in the contract's list order (Sql/008_todo_list.sql).
    enum TodoList {
        /// Inserts todos' list rows (`FeedBatch.write` deleted their previous ones). Parameters per
        /// row: user, deadline, important, created, title key, id, body.
        static let insert = MultiRowStatement(columns: 7) { rows in
            "INSERT INTO todo_list (user_id, deadline, is_important, created_at, title_key, id, body) VALUES \(rows)"
        }
        /// Removes todos' list rows (deleted todos', and the previous rows of changed ones) and
        /// answers each removed row's date (its stored day list is rebuilt, `TodoDays`).
        /// Parameters: user, then the ids.
        static let delete = InListStatement(size: 128) { ids in
            "DELETE FROM todo_list WHERE user_id = ? AND id IN (\(ids)) RETURNING deadline"
        }
        static let deleteOfUser = "DELETE FROM todo_list WHERE user_id = ?"
        /// The owner's list rows with deadlines from `from` to `to`, in the contract's order: the
        /// primary key's order, one range read. Parameters: the owner's, from, to.
        static func bodiesInRange(_ owner: ReadOwner) -> String {
            """
            SELECT l.body, \(owner.userID(alias: "l")) FROM \(owner.from("todo_list l", alias: "l"))
             WHERE \(owner.condition(alias: "l")) AND l.deadline BETWEEN ? AND ?
             ORDER BY \(order)
            """
        }
        /// The contract's list order, the primary key's (after user_id).
        static let order = "l.deadline, \(dayOrder)"
        /// The same within one date.
        static let dayOrder = "l.is_important DESC, l.created_at DESC, l.title_key, l.id"
        static let bodiesInRangeForUser = bodiesInRange(.user)
        static let bodiesInRangeForToken = bodiesInRange(.token)
        /// Every list row of a user (check-feed). Columns: id, deadline, is_important,
        /// created_at, title_key, body.
        static let ofUser = """
            SELECT id, deadline, is_important, created_at, title_key, body FROM todo_list WHERE user_id = ?
            """
    }

    /// Each date's GET /todos?date= list stored as one row (Sql/025_todo_days.sql): the bodies of
    /// the date's `todo_list` rows in list order joined by commas, so that the read is one
    /// primary-key lookup. Every date with live todos has a row (what lets a date without one
    /// answer `[]` in that lookup); its body is NULL when the list is not stored (longer than
    /// `maxBodyBytes`, touched by a write of many dates, or back-filled), and the read then takes
    /// the range read of `todo_list`.
    enum TodoDays {
        /// The longest body stored: the session's `GROUP_CONCAT` bound, which `rebuild` relies on.
        static let maxBodyBytes = Connection.groupConcatMaxLength
        /// A write that touched at most this many dates rebuilds their rows from `todo_list`
        /// (`rebuild`); one that touched more only marks them not stored (`unstore`), so that no
        /// write rebuilds more lists than this (each costs about a read of its rows).
        static let rebuildLimit = 8
        /// Parameters: user, then the dates. Lists of `rebuildLimit` dates: a write rebuilds at
        /// most that many, so its statements bind no padding (`rebuild-feed`, which rebuilds every
        /// date of a user, takes several).
        static let delete = InListStatement(size: rebuildLimit) { days in
            "DELETE FROM todo_days WHERE user_id = ? AND deadline IN (\(days))"
        }
        static let deleteOfUser = "DELETE FROM todo_days WHERE user_id = ?"
        /// The rows of the given dates (deleted first by `delete`) from `todo_list`: a date
        /// without live todos gets none. A list longer than `maxBodyBytes` gets a NULL body:
        /// GROUP_CONCAT cuts it, which IGNORE makes a warning instead of strict mode's error 1260,
        /// and the IF drops it. Every row is left alone by `store-days` (`unstored` NULL, Sql/027).
        /// (MariaDB computes the row's compressed response from the body: Sql/026.) Parameters:
        /// user, then the dates.
        static let rebuild = InListStatement(size: rebuildLimit) { days in
            """
            INSERT IGNORE INTO todo_days (user_id, deadline, body, unstored)
            SELECT l.user_id, l.deadline,
                   IF(SUM(LENGTH(l.body)) + COUNT(*) - 1 <= \(maxBodyBytes),
                      GROUP_CONCAT(l.body ORDER BY \(TodoList.dayOrder) SEPARATOR ','), NULL),
                   NULL
              FROM todo_list l
             WHERE l.user_id = ? AND l.deadline IN (\(days))
             GROUP BY l.deadline
            """
        }
        /// What a stored body answers GET /todos?date= with, around it: `{"items":[` body `]}`,
        /// the bytes `HTTPResponse.json(_:member:_:)` makes of the list, and that Sql/026's
        /// generated columns compress (check-feed and `TodoDaysTests` hold the three together).
        static let responsePrefix = Array(#"{"items":["#.utf8), responseSuffix = Array("]}".utf8)
        /// Marks dates not stored: a row with a NULL body, whether the date has live todos or not
        /// (either way its read takes the range read), for `store-days` to store again (`unstored`
        /// 1: a new row by the column's default). Parameters per row: user, date.
        static let unstore = MultiRowStatement(columns: 2) { rows in
            "INSERT INTO todo_days (user_id, deadline) VALUES \(rows) ON DUPLICATE KEY UPDATE body = NULL, unstored = 1"
        }
        /// One date of an authenticated user. Columns (`DayColumn`): the list, whether it is the
        /// compressed response, its CRC, not stored (1: read `todo_list`). No row: no live todos
        /// that date. Parameters: user, date. (Built once: the hottest read.)
        static func dayForUser(gzip: Bool) -> String { gzip ? dayForUserGzip : dayForUserPlain }
        private static let dayForUserPlain = dayForUser(dayColumns(gzip: false))
        private static let dayForUserGzip = dayForUser(dayColumns(gzip: true))
        private static func dayForUser(_ columns: String) -> String {
            "SELECT \(columns) FROM todo_days d WHERE d.user_id = ? AND d.deadline = ?"
        }
        /// The same, the token checked in the statement (`ReadOwner.token`): a row whenever the
        /// token is good (a LEFT JOIN), its list NULL when the date has no row. Columns: those of
        /// `dayForUser`, then the owner's (last use stale, user id). Parameters: stale-before,
        /// date, token hash, now.
        static func dayForToken(gzip: Bool) -> String { gzip ? dayForTokenGzip : dayForTokenPlain }
        private static let dayForTokenPlain = dayForToken(dayColumns(gzip: false))
        private static let dayForTokenGzip = dayForToken(dayColumns(gzip: true))
        private static func dayForToken(_ columns: String) -> String {
            """
            SELECT \(columns), \(ReadOwner.token.userID(alias: "d"))
              FROM auth_tokens a LEFT JOIN todo_days d ON d.user_id = a.user_id AND d.deadline = ?
             WHERE \(ReadOwner.token.condition(alias: "d"))
            """
        }
        /// The columns of `dayForUser` and `dayForToken` (the last two `dayForToken`'s alone).
        enum DayColumn: Int { case list, isCompressed, crc, notStored, tokenUseStale, tokenUserID }
        /// With `gzip`, the compressed response instead of the body when it is long enough to be
        /// worth it (`GzipMember.worthwhileLength`). Without, the statement names no other column
        /// of the row, whatever MariaDB does with a column named in a branch it never takes.
        private static func dayColumns(gzip: Bool) -> String {
            let notStored = "d.user_id IS NOT NULL AND d.body IS NULL"
            guard gzip else { return "d.body, FALSE, NULL, \(notStored)" }
            let compressed = "d.compressed IS NOT NULL AND UNCOMPRESSED_LENGTH(d.compressed) >= \(GzipMember.worthwhileLength)"
            return "IF(\(compressed), d.compressed, d.body), \(compressed), d.crc, \(notStored)"
        }
        /// The rows marked for `store-days` (`unstored`, Sql/027: not those too long to store) after
        /// a key, in key order: a page of the `store-days` pass, a range read of
        /// `todo_days_unstored`. Columns: user, date.
        /// Parameters: the last row of the page before, as user, user, date (user 0: from the
        /// start); then the page's rows (`unstoredPage`).
        static let unstoredAfter = """
            SELECT user_id, deadline FROM todo_days FORCE INDEX (todo_days_unstored)
             WHERE unstored = 1 AND (user_id > ? OR (user_id = ? AND deadline > ?))
             ORDER BY user_id, deadline LIMIT ?
            """
        static let unstoredPage = 1000
        static let countUnstored = "SELECT COUNT(*) FROM todo_days FORCE INDEX (todo_days_unstored) WHERE unstored = 1"
        /// Every row of a user (`check-feed`). Columns: deadline, body, compressed, crc.
        static let ofUser = "SELECT deadline, body, compressed, crc FROM todo_days WHERE user_id = ? ORDER BY deadline"
    }

    /// The account export (`Store.exportAccount`): every live record of a user, page by page in
    /// key order, each page starting after the last row of the one before (keyset), all in one
    /// transaction. Each page is a range read of an index in its order: no filesort, no offset.
    enum Export {
        static let pageRows = 1000
        /// Live tags by id. Parameters: user id, the last id of the page before (0: none).
        static let tags = """
            SELECT \(Tags.columns) FROM tags FORCE INDEX (tags_user_live)
             WHERE user_id = ? AND deleted_at IS NULL AND id > ? ORDER BY id LIMIT \(pageRows)
            """
        /// Bodies of the live todos in the list's order (`todo_list`), then each row's list key.
        /// Parameters: user id.
        static let firstTodos = todos(afterKey: false)
        /// The page after a list key. Parameters: user id, then the key of the last row of the
        /// page before (`todoKeyColumns`) in the order `afterListKeyParameters` gives.
        static let nextTodos = todos(afterKey: true)
        /// Where the list key (deadline, is_important, created_at, title_key, id) lies in the rows
        /// of `firstTodos` and `nextTodos`.
        static let todoKeyColumns = 1...5
        /// Which key value each parameter of `afterListKey` takes.
        static let afterListKeyParameters = [0, 0, 1, 1, 2, 2, 3, 3, 4]
        private static func todos(afterKey: Bool) -> String {
            """
            SELECT l.body, l.deadline, l.is_important, l.created_at, l.title_key, l.id
              FROM todo_list l FORCE INDEX (PRIMARY)
             WHERE l.user_id = ?\(afterKey ? " AND \(afterListKey)" : "")
             ORDER BY \(TodoList.order) LIMIT \(pageRows)
            """
        }
        /// Rows after a key in `TodoList.order` (deadline, is_important DESC, created_at DESC,
        /// title_key, id), spelled out as nested conditions, which the range optimizer reads as
        /// ranges of the primary key (a row constructor comparison cannot mix directions).
        private static let afterListKey = """
            (l.deadline > ? OR (l.deadline = ? AND (l.is_important < ? OR (l.is_important = ? AND \
            (l.created_at < ? OR (l.created_at = ? AND (l.title_key > ? OR (l.title_key = ? AND l.id > ?))))))))
            """
        /// Live stats by day. Parameters: user id.
        static let firstStats = stats(afterDay: false)
        /// Parameters: user id, the last day of the page before.
        static let nextStats = stats(afterDay: true)
        /// Where the day lies in the rows of `firstStats` and `nextStats`.
        static let statDayColumn = DailyStatColumn.day.index
        private static func stats(afterDay: Bool) -> String {
            """
            SELECT \(qualified(DailyStats.columns, "s")) FROM daily_stats s FORCE INDEX (PRIMARY)
             WHERE s.user_id = ?\(afterDay ? " AND s.day > ?" : "") AND s.deleted_at IS NULL
             ORDER BY s.day LIMIT \(pageRows)
            """
        }
    }

    /// Pull reads the change feed (`Feed`); this is its per-user state.
    enum Pull {
        /// The user's sync state, the number of the pulling device (NULL: none, or a device that
        /// never pushed), the database's epoch, whether the user's feed still waits for its
        /// back-fill, and the user's latest tag version (a page starting at or above it needs no
        /// parent-tag lookup, Sql/024). Parameters: device key ('' without a deviceId), user id.
        static let syncState = """
            SELECT u.change_seq, u.purged_through, d.id, e.epoch, q.user_id IS NOT NULL, u.tag_seq
              FROM users u JOIN sync_epoch e ON e.id = 1
              LEFT JOIN sync_devices d ON d.user_id = u.id AND d.device_key = ?
              LEFT JOIN sync_feed_backfill q ON q.user_id = u.id
             WHERE u.id = ?
            """

        /// Parent tags are looked up 64 ids per query, so that a page referring to a typical
        /// user's tags (tens) costs one round trip.
        static let parentTagBatch = 64
    }

    /// A snapshot's records (Store+Snapshot.swift): every live record of the user as the change
    /// feed holds it rendered, read in the snapshot's one transaction. Columns: kind, body.
    enum Snapshot {
        static let liveRecords = "SELECT kind, body FROM sync_feed WHERE user_id = ? AND deleted_at IS NULL"
    }

    /// The change feed (`sync_feed`): see Sql/007_sync_feed.sql.
    enum Feed {
        /// Inserts records' rows (`FeedBatch.write` deleted their previous ones). Parameters per
        /// row: `FeedEntry.values`.
        static let insert = MultiRowStatement(columns: FeedColumn.allCases.count) { rows in
            "INSERT INTO sync_feed (\(FeedColumn.selectList)) VALUES \(rows)"
        }
        /// Removes records' rows, by the record key. Parameters: user, kind, then the record ids.
        static let delete = InListStatement(size: 128) { ids in
            "DELETE FROM sync_feed WHERE user_id = ? AND kind = ? AND record_id IN (\(ids))"
        }

        /// A pull page: the next `limit + 1` rows after the cursor's position, by version (one
        /// range read of the clustered index). Tombstones at or below the third parameter are
        /// skipped (a first pull does not send deletions of records the client never had).
        /// Columns: version, kind, record_id, device, deleted_at (read only as NULL or not),
        /// parent_tags, body. Columns as stored, no expression: an expression is evaluated per
        /// row by MariaDB (measured: `deleted_at IS NOT NULL`, or the row's facts packed into one
        /// integer, cost it more than the columns they replace cost both sides).
        static let page = """
            SELECT version, kind, record_id, device, deleted_at, parent_tags, body FROM sync_feed
             WHERE user_id = ? AND version > ? AND (deleted_at IS NULL OR version > ?)
             ORDER BY version LIMIT ?
            """

        /// Live parent tags by id that changed after the page's start and that the pulling device
        /// did not change itself, `Pull.parentTagBatch` ids per query (unused slots repeat an id).
        /// Parameters: user, position, device (0 for none), ids. Columns: version, body. By the
        /// record key: left to itself the optimizer walks the user's whole feed after the position
        /// on the primary key (measured: 5,440 rows read per page instead of 64 lookups).
        static let parentTags = """
            SELECT version, body FROM sync_feed FORCE INDEX (sync_feed_record)
             WHERE user_id = ? AND kind = 1 AND version > ? AND deleted_at IS NULL
               AND (device IS NULL OR device <> ?)
               AND record_id IN (\(Array(repeating: "?", count: Pull.parentTagBatch).joined(separator: ", ")))
            """

        /// Every feed row of a user (check-feed). Columns: kind, record_id, version, deleted_at,
        /// device, parent_tags, body, live_day.
        static let ofUser = """
            SELECT kind, record_id, version, deleted_at, device, parent_tags, body, live_day FROM sync_feed WHERE user_id = ?
            """
        static let deleteOfUser = "DELETE FROM sync_feed WHERE user_id = ?"
        /// The user's latest tag version as the write path keeps it (check-feed, Sql/024).
        static let tagSequence = "SELECT tag_seq FROM users WHERE id = ?"
        static let purgeTombstones = "DELETE FROM sync_feed WHERE deleted_at IS NOT NULL AND deleted_at < ?"

        /// Every record of a user as the tables hold it, for rebuilding and checking the feed.
        static let tagsOfUser = "SELECT \(Tags.columns), changed_by_device FROM tags WHERE user_id = ?"
        static let todosOfUser = "SELECT \(Todos.columns), changed_by_device FROM todos WHERE user_id = ?"
        static let dailyStatsOfUser = "SELECT \(DailyStats.columns) FROM daily_stats WHERE user_id = ?"

        /// Deleted accounts are left to the erase (their writes fail, `Users.lockForWrite`).
        static let backfillQueue = """
            SELECT b.user_id FROM sync_feed_backfill b JOIN users u ON u.id = b.user_id AND u.deleted_at IS NULL
             ORDER BY b.user_id LIMIT 1000
            """
        static let backfillDone = "DELETE FROM sync_feed_backfill WHERE user_id = ?"
    }

    enum Push {
        /// Stored results are looked up 128 opIds per statement: a 100-operation push, with the
        /// lower-cased forms of its opIds, in one.
        static let storedResults = InListStatement(size: 128) { keys in
            """
            SELECT o.op_key, o.result, o.lowercased_key, o.record_offset, r.record
              FROM sync_operations o
              LEFT JOIN sync_result_records r ON r.user_id = ? AND r.digest = o.record_digest
             WHERE o.user_id = ? AND o.op_key IN (\(keys))
            """
        }
        /// Restarts the retention of stored results (and their records) that a keyed push
        /// replays. Parameters: now, now, user, then the opIds as `storedResults` looks them up.
        static let keepResults = InListStatement(size: 128) { keys in
            """
            UPDATE sync_operations o
              LEFT JOIN sync_result_records r ON r.user_id = o.user_id AND r.digest = o.record_digest
               SET o.created_at = ?, r.last_used = ?
             WHERE o.user_id = ? AND o.op_key IN (\(keys))
            """
        }
        /// The records stored results name, each kept once per (user, SHA-256 of its bytes); a
        /// second use refreshes its `last_used`, which purge goes by. Parameters per row: user,
        /// digest, record, now.
        static let storeRecords = MultiRowStatement(columns: 4) { rows in
            "INSERT INTO sync_result_records (user_id, digest, record, last_used) VALUES \(rows)"
                + " ON DUPLICATE KEY UPDATE last_used = VALUES(last_used)"
        }
        /// Parameters per row: user, opId, device, result, now, record digest, record offset.
        static let storeResults = MultiRowStatement(columns: 7) { rows in
            "INSERT INTO sync_operations (user_id, op_key, device_id, result, created_at, record_digest, record_offset) VALUES "
                + rows
        }
        static let tagByID = "SELECT \(Tags.columns) FROM tags WHERE id = ? AND user_id = ?"
        /// The todos a push names, read up front 64 per statement, by id and by client key.
        /// Parameters: user, then the ids or keys.
        static let todosByIDs = InListStatement(size: 64) { ids in
            "SELECT \(Todos.columns) FROM todos WHERE user_id = ? AND id IN (\(ids))"
        }
        static let todosByClientKeys = InListStatement(size: 64) { keys in
            "SELECT \(Todos.columns) FROM todos WHERE user_id = ? AND client_key IN (\(keys))"
        }
        /// The todos a push creates, answering each row's new id in the rows' order. Parameters
        /// per row: user, clientId, client key, `TodoColumn.contentValues`, version, created,
        /// updated, deleted, device.
        static let insertTodos = MultiRowStatement(columns: TodoColumn.content.count + 8) { rows in
            "INSERT INTO todos (user_id, client_id, client_key, \(TodoColumn.contentNames), version, created_at, "
                + "updated_at, deleted_at, changed_by_device) VALUES \(rows) RETURNING id"
        }
        /// The push's changes to existing todos, by id (every row names one of the user's todos,
        /// read in this transaction under the user's lock: each one is a duplicate, updated).
        /// Parameters per row: id, user, `TodoColumn.contentValues`, version, created, updated,
        /// deleted, device.
        static let updateTodos = MultiRowStatement(columns: TodoColumn.content.count + 7) { rows in
            "INSERT INTO todos (id, user_id, \(TodoColumn.contentNames), version, created_at, updated_at, deleted_at, "
                + "changed_by_device) VALUES \(rows) ON DUPLICATE KEY UPDATE "
                + (TodoColumn.content.map(\.column.sqlName) + ["version", "updated_at", "deleted_at", "changed_by_device"])
                    .map { "\($0) = VALUES(\($0))" }.joined(separator: ", ")
        }
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
        /// Records no stored result has named since the horizon (results are purged first).
        static let deleteResultRecords = "DELETE FROM sync_result_records WHERE last_used < ?"
        static let deleteExpiredTokens = "DELETE FROM auth_tokens WHERE expires_at < ?"
    }

    /// Maintenance: full recomputation of derived data.
    enum Maintenance {
        /// Live accounts only: a deleted one waits for its erase, and cannot be written.
        static let allUserIDs = "SELECT id FROM users WHERE deleted_at IS NULL ORDER BY id"
        /// `recompute-stats` rebuilds this many dates per transaction.
        static let rebuildBatch = 512
        /// Every date that has a live todo or a stat row (live or tombstone) for the user.
        static let daysOfUser = """
            SELECT DISTINCT deadline FROM todos FORCE INDEX (todos_user_day)
             WHERE user_id = ? AND deleted_at IS NULL
            UNION
            SELECT day FROM daily_stats WHERE user_id = ?
            """
    }

    /// `Idempotency-Key` records (Store+Idempotency.swift, Sql/013).
    enum Idempotency {
        /// Claims a new key (status 0 = running); 0 rows affected when the key exists.
        static let claim = """
            INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, claim, status, created_at)
            VALUES (?, ?, ?, ?, 0, ?) ON DUPLICATE KEY UPDATE user_id = user_id
            """
        /// An existing key: its request, whether it is still running, the seconds until its run
        /// counts as abandoned (parameter: the instant before which a claim is abandoned; 0 or
        /// less: abandoned now), and the stored answer.
        static let byKey = """
            SELECT fingerprint, status, claim, CEILING(TIMESTAMPDIFF(MICROSECOND, ?, created_at) / 1000000),
                   response_headers, response_body, replay
              FROM idempotency_keys WHERE user_id = ? AND idem_key = ?
            """
        /// Whether this server is a Galera node (its row locks are its own, not the cluster's).
        static let isGaleraNode = "SELECT @@wsrep_on"
        /// The user's row if no transaction holds its lock: a keyed request holds it from the start
        /// of its transaction to its commit (`lockUser`), so a running claim whose user row is
        /// free belongs to a request that is not running (its responder died, and the database
        /// rolled its transaction back when the connection dropped).
        static let userUnlocked = "SELECT id FROM users WHERE id = ? FOR UPDATE SKIP LOCKED"
        /// Takes over an abandoned claim (compare-and-set on the old claim).
        static let takeOver = """
            UPDATE idempotency_keys SET claim = ?, created_at = ?
             WHERE user_id = ? AND idem_key = ? AND claim = ? AND status = 0
            """
        /// Stores the answer, in the transaction of the write; 0 rows when the claim was lost.
        static let complete = """
            UPDATE idempotency_keys SET status = ?, response_headers = ?, response_body = ?, replay = ?, stored_bytes = ?
             WHERE user_id = ? AND idem_key = ? AND claim = ? AND status = 0
            """
        /// The account's records (claims included), the bytes they store, and the seconds until
        /// the oldest passes the retention horizon (the first parameter): a range read of
        /// `idempotency_keys_user_usage` (Sql/028). Parameters: horizon, user.
        static let usage = """
            SELECT COUNT(*), COALESCE(SUM(stored_bytes), 0),
                   CEILING(TIMESTAMPDIFF(MICROSECOND, ?, MIN(created_at)) / 1000000)
              FROM idempotency_keys WHERE user_id = ?
            """
        /// The account's completed records past the retention horizon. Parameters: user, horizon.
        static let purgeUser = "DELETE FROM idempotency_keys WHERE user_id = ? AND created_at < ? AND status <> 0"
        /// Drops a claim whose request applied nothing (the key can be used again).
        static let release = """
            DELETE FROM idempotency_keys WHERE user_id = ? AND idem_key = ? AND claim = ? AND status = 0
            """
        /// The user's row lock, taken first by a keyed request's transaction, so that its reads see
        /// every earlier write of the user (the route's own `write` takes it again, a no-op).
        /// Answers the account's stored bytes per hour quota and its Idempotency-Key ceilings
        /// (Sql/020, Sql/028). Parameters: the defaults of the three, user.
        static let lockUser = """
            SELECT COALESCE(quota_stored_bytes_per_hour, ?), COALESCE(quota_idempotency_keys, ?),
                   COALESCE(quota_idempotency_bytes, ?)
              FROM users WHERE id = ? AND deleted_at IS NULL FOR UPDATE
            """
        static let purge = "DELETE FROM idempotency_keys WHERE created_at < ?"
        /// Records whose answer is rebuilt from stored push results, past the horizon of those
        /// results (the shorter of the two retentions): they must not outlive what rebuilds them.
        static let purgeReplays = "DELETE FROM idempotency_keys WHERE replay = 1 AND created_at < ?"
    }
}

/// A multi-row statement (`INSERT … VALUES (…), (…)`) prepared at fixed row counts, the powers
/// of two up to `largest`: any number of rows is written in few statements (one per set bit of
/// the count, plus one per `largest` rows), from at most eight cached prepared statements.
struct MultiRowStatement: Sendable {
    static let sizes = [128, 64, 32, 16, 8, 4, 2, 1]
    /// The statement of each of `sizes`, in its order.
    private let texts: [String]

    /// `make` gets the `VALUES` rows' text: `(?, …, ?)` with `columns` placeholders, `rows` times.
    init(columns: Int, _ make: (String) -> String) {
        let row = "(" + Array(repeating: "?", count: columns).joined(separator: ", ") + ")"
        texts = Self.sizes.map { count in make(Array(repeating: row, count: count).joined(separator: ", ")) }
    }

    /// `count` rows as chunks, in order: each chunk's statement and the range of rows it writes.
    func chunks(_ count: Int) -> [(sql: String, rows: Range<Int>)] {
        var chunks: [(sql: String, rows: Range<Int>)] = []
        var start = 0
        for (size, sql) in zip(Self.sizes, texts) {
            while count - start >= size {
                chunks.append((sql, start..<start + size))
                start += size
            }
        }
        return chunks
    }
}

/// A statement ending in an `IN` list of `size` placeholders, prepared once: any number of values
/// take ⌈count / size⌉ executions, the last list filled up by repeating its last value (a value
/// repeated in `IN` changes nothing).
struct InListStatement: Sendable {
    let size: Int
    let sql: String

    /// `make` gets the list's text: `?, …, ?`, `size` times.
    init(size: Int, _ make: (String) -> String) {
        self.size = size
        sql = make(Array(repeating: "?", count: size).joined(separator: ", "))
    }

    /// `values` as the lists of successive executions, each `size` values long.
    func lists(_ values: [DatabaseValue]) -> [[DatabaseValue]] {
        stride(from: 0, to: values.count, by: size).map { start in
            let chunk = values[start..<min(start + size, values.count)]
            return (0..<size).map { chunk[min(chunk.startIndex + $0, chunk.endIndex - 1)] }
        }
    }
}
