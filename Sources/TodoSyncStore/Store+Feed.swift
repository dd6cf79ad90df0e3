import Deflate
import MariaDB
import TodoSyncCore

/// A difference between a user's change feed and the tables (`checkFeed`).
public struct FeedProblem: Sendable, CustomStringConvertible {
    public let userID: Int64
    public let description: String
}

/// What a `storeUnstoredDays` pass did.
public struct StoredDays: Sendable, CustomStringConvertible {
    /// Dates rebuilt (stored, or found too long to store, or without live todos any more).
    public var rebuilt = 0
    /// Dates of deleted accounts, left for their erase.
    public var skipped = 0
    /// Rows marked not stored when the pass ended: dates marked meanwhile, and deleted accounts'.
    public var unstored: Int64 = 0

    public var description: String { "store-days: \(rebuilt) dates rebuilt, \(skipped) skipped, \(unstored) not stored" }
}

extension Store {
    /// Renders the change feed, the todo list and the day lists of one user afresh from the
    /// tables, replacing what they held, in one transaction under the user's write lock (so it
    /// cannot race a write). Versions are kept; `users.tag_seq` is raised to the tags' highest
    /// version if below it. Returns the number of feed rows written.
    @discardableResult
    public func rebuildFeed(userID: Int64) throws -> Int {
        try write(userID: userID, operations: 0) { transaction in
            try rerender(in: transaction)
        }
    }

    /// Stores again every day list that is not stored (`todo_days.unstored`, Sql/027): the dates
    /// of writes that touched more than `SQL.TodoDays.rebuildLimit` of them, which until then read
    /// `todo_list`'s range. The rows are found a page at a time on their index, in key order, and
    /// rebuilt by the write path's own rebuild (`TodoDayRows.write`), `rebuildLimit` dates per
    /// transaction under the user's write lock: it cannot race a write, and holds no lock long.
    /// A date a write marks again meanwhile waits for the next pass; one found too long to store
    /// is left alone until a write marks it again. Safe to run while responders serve: `todosync
    /// store-days`, every minute from todosync-store-days.timer.
    public func storeUnstoredDays() throws -> StoredDays { try storeUnstoredDays(pageRows: SQL.TodoDays.unstoredPage) }

    /// The same, reading `pageRows` rows per page (fewer in tests).
    func storeUnstoredDays(pageRows: Int) throws -> StoredDays {
        var report = StoredDays()
        var after: (user: Int64, day: String) = (0, Day.minimum.description)
        while true {
            let page = try guarded {
                try db.query(SQL.TodoDays.unstoredAfter, [.int(after.user), .int(after.user), .text(after.day),
                                                            .int(Int64(pageRows))])
                    .map { (user: $0.int64(SQL.TodoDays.UnstoredColumn.userID)!, day: $0.string(SQL.TodoDays.UnstoredColumn.deadline)!) }
            }
            guard let last = page.last else { break }
            after = last
            var start = page.startIndex
            while start < page.endIndex {
                let user = page[start].user
                var end = start
                while end < page.endIndex, page[end].user == user, end - start < SQL.TodoDays.rebuildLimit { end += 1 }
                // A date outside the contract's range cannot be written; none is left behind.
                let days = Set(page[start..<end].compactMap { Day($0.day) })
                precondition(days.count <= SQL.TodoDays.rebuildLimit, "a batch the write would only mark again")
                start = end
                for attempt in 1...3 {
                    do {
                        try write(userID: user, operations: 0) { _ in try TodoDayRows.write(days, userID: user, to: db) }
                        report.rebuilt += days.count
                    } catch DomainError.unauthenticated {
                        report.skipped += days.count // a deleted account: its rows go with its erase
                    } catch DomainError.unavailable where attempt < 3 {
                        continue // a deadlock or a Galera certification failure: this batch again
                    }
                    break
                }
            }
        }
        report.unstored = try guarded { try db.queryOne(SQL.TodoDays.countUnstored)?.int64(OnlyColumn.value) ?? 0 }
        return report
    }

    /// Back-fills the feed of every user queued by migration 007 (`sync_feed_backfill`), one user
    /// per transaction; a user leaves the queue in the transaction that fills their feed. Returns
    /// the number of users done. Safe to run while responders serve (a queued user's pull is 503).
    @discardableResult
    public func backfillQueuedFeeds() throws -> Int {
        var done = 0
        while true {
            let queued = try guarded { try db.query(SQL.Feed.backfillQueue).compactMap { $0.int64(OnlyColumn.value) } }
            if queued.isEmpty { return done }
            for userID in queued {
                try write(userID: userID, operations: 0) { transaction in
                    try rerender(in: transaction)
                    try db.execute(SQL.Feed.backfillDone, [.int(userID)])
                }
                done += 1
            }
        }
    }

    /// Compares a user's feed with what the tables say it must hold: the same records, each with
    /// the same version, deletion time, device, parent tags and JSON bytes; and the user's
    /// `tag_seq` at or above every tag's version; the same list rows; and each stored day list
    /// (`todo_days`) equal to its date's list rows joined. Empty when equal.
    public func checkFeed(userID: Int64) throws -> [FeedProblem] {
        try guarded {
            try db.inTransaction(readOnly: true) {
                let fromTables = try renderFromTables(userID: userID)
                var expected: [String: FeedEntry] = [:]
                for entry in fromTables.entries { expected[key(entry.kind, entry.recordID)] = entry }
                var problems: [FeedProblem] = []
                func problem(_ text: String) { problems.append(FeedProblem(userID: userID, description: text)) }
                for row in try db.query(SQL.Feed.ofUser, [.int(userID)]) {
                    typealias C = SQL.Feed.RowColumn
                    guard let kind = row.int64(C.kind).flatMap(FeedKind.init(rawValue:)) else {
                        problem("feed row of unknown kind \(row.int64(C.kind) ?? -1)")
                        continue
                    }
                    let name = key(kind, row.int64(C.recordID)!)
                    guard let want = expected.removeValue(forKey: name) else {
                        problem("\(name): in the feed but not in the tables")
                        continue
                    }
                    let have = FeedEntry(stored: kind, recordID: row.int64(C.recordID)!, version: row.int64(C.version)!,
                                         deletedAt: row.string(C.deletedAt), device: row.int64(C.device),
                                         parentTags: row.string(C.parentTags)!, body: row.bytes(C.body)!,
                                         liveDay: row.string(C.liveDay))
                    if have != want {
                        problem("\(name): feed has version \(have.version) deleted \(have.deletedAt ?? "no") "
                                + "device \(have.device.map(String.init) ?? "none") parents [\(have.parentTags)] "
                                + "day \(have.liveDay ?? "none") \(String(decoding: have.body, as: UTF8.self)); tables say version \(want.version) "
                                + "deleted \(want.deletedAt ?? "no") device \(want.device.map(String.init) ?? "none") "
                                + "parents [\(want.parentTags)] day \(want.liveDay ?? "none") \(String(decoding: want.body, as: UTF8.self))")
                    }
                }
                for name in expected.keys.sorted() { problem("\(name): in the tables but not in the feed") }

                // A pull page skips its parent-tag lookup at or above users.tag_seq (Sql/024).
                let tagSequence = try db.queryOne(SQL.Feed.tagSequence, [.int(userID)])?.int64(OnlyColumn.value) ?? 0
                if let latest = fromTables.entries.filter({ $0.kind == .tag }).max(by: { $0.version < $1.version }),
                   latest.version > tagSequence {
                    problem("users.tag_seq \(tagSequence) is below \(key(.tag, latest.recordID))'s version "
                            + "\(latest.version): a pull page may leave that parent tag out")
                }

                var listed = Dictionary(uniqueKeysWithValues: fromTables.listRows.map { ($0.id, $0) })
                for row in try db.query(SQL.TodoList.ofUser, [.int(userID)]) {
                    typealias C = SQL.TodoList.RowColumn
                    let have = TodoListRow(id: row.int64(C.id)!, deadline: Day(row.string(C.deadline)!)!,
                                           isImportant: row.bool(C.isImportant)!, createdAt: row.string(C.createdAt)!,
                                           titleKey: row.bytes(C.titleKey)!, body: row.bytes(C.body)!)
                    guard let want = listed.removeValue(forKey: have.id) else {
                        problem("todo \(have.id): listed but not a live todo")
                        continue
                    }
                    if have != want {
                        problem("todo \(have.id): list row \(have.deadline) important \(have.isImportant) "
                                + "created \(have.createdAt) \(String(decoding: have.body, as: UTF8.self)); tables say "
                                + "\(want.deadline) important \(want.isImportant) created \(want.createdAt) "
                                + "\(String(decoding: want.body, as: UTF8.self))")
                    }
                }
                for id in listed.keys.sorted() { problem("todo \(id): live but not listed") }

                // GET /todos?date= reads the stored day lists (Sql/025): every date with live todos
                // has a row (no row answers []); a stored body is the date's list rows joined; a
                // NULL one (not stored) is read from the list rows, always right.
                var days = TodoDayRows.expected(fromTables.listRows)
                for row in try db.query(SQL.TodoDays.ofUser, [.int(userID)]) {
                    typealias C = SQL.TodoDays.RowColumn
                    let day = Day(row.string(C.deadline)!)!  // a NOT NULL DATE column
                    let want = days.removeValue(forKey: day)
                    guard let have = row.bytes(C.body) else { continue }
                    switch want {
                    case nil:
                        problem("day \(day): stored list but no live todo that day")
                    case .some(nil):
                        problem("day \(day): stored list of \(have.count) bytes, but the list is longer than "
                                + "\(SQL.TodoDays.maxBodyBytes) bytes and must be read from the list rows")
                    case .some(let want?) where have != want:
                        problem("day \(day): stored list \(String(decoding: have, as: UTF8.self)); the list rows say "
                                + "\(String(decoding: want, as: UTF8.self))")
                    default: break
                    }
                    // Its compressed response (Sql/026), which gzip clients get instead, says the
                    // same. A stored body without one is right: compressed per request.
                    guard let compressed = row.bytes(C.compressed) else { continue }
                    let sent = row.int64(C.crc).flatMap { crc in
                        compressed.withUnsafeBytes { GzipMember.fromCompress($0, crc32: UInt32(truncatingIfNeeded: crc)) }
                    }
                    if sent.flatMap({ gunzip($0) }) != SQL.TodoDays.responsePrefix + have + SQL.TodoDays.responseSuffix {
                        problem("day \(day): the stored list's compressed response is not {\"items\":[the list]}")
                    }
                }
                for day in days.keys.sorted() { problem("day \(day): live todos but no row (it would answer [])") }
                return problems
            }
        }
    }

    private func key(_ kind: FeedKind, _ id: Int64) -> String { "\(kind) \(id)" }

    /// Replaces the user's feed and list rows with ones rendered from the tables, and notes the
    /// tags' versions for `users.tag_seq` (written at the transaction's `finish()`).
    @discardableResult
    private func rerender(in transaction: WriteTransaction) throws -> Int {
        let userID = transaction.userID
        try db.execute(SQL.Feed.deleteOfUser, [.int(userID)])
        try db.execute(SQL.TodoList.deleteOfUser, [.int(userID)])
        try db.execute(SQL.TodoDays.deleteOfUser, [.int(userID)])
        let batch = try renderFromTables(userID: userID)
        try batch.write(userID: userID, to: db, rebuilding: true)
        for entry in batch.entries where entry.kind == .tag { transaction.tagVersioned(entry.version) }
        return batch.entries.count
    }

    /// Every record of the user as the tables hold it, rendered as feed (and list) rows.
    private func renderFromTables(userID: Int64) throws -> FeedBatch {
        var batch = FeedBatch()
        for row in try db.query(SQL.Feed.tagsOfUser, [.int(userID)]) {
            batch.add(FeedEntry(Tag(row: row), device: row.int64(TagColumn.allCases.count)))  // changed_by_device follows
        }
        for row in try db.query(SQL.Feed.todosOfUser, [.int(userID)]) {
            batch.add(Todo(row: row), device: row.int64(TodoColumn.allCases.count))  // changed_by_device follows
        }
        for row in try db.query(SQL.Feed.dailyStatsOfUser, [.int(userID)]) {
            batch.add(FeedEntry(DailyStat(row: row)))
        }
        return batch
    }
}

extension SQL {
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
        enum UnstoredColumn: Int, ResultColumns { case userID, deadline }
        static let unstoredPage = 1000
        static let countUnstored = "SELECT COUNT(*) FROM todo_days FORCE INDEX (todo_days_unstored) WHERE unstored = 1"
        /// Every row of a user (`check-feed`).
        static let ofUser = "SELECT deadline, body, compressed, crc FROM todo_days WHERE user_id = ? ORDER BY deadline"
        enum RowColumn: Int, ResultColumns { case deadline, body, compressed, crc }
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
        enum PageColumn: Int, ResultColumns { case version, kind, recordID, device, deletedAt, parentTags, body }

        /// Live parent tags by id that changed after the page's start and that the pulling device
        /// did not change itself, `Pull.parentTagBatch` ids per query (unused slots repeat an id).
        /// Parameters: user, position, device (0 for none), ids. By the
        /// record key: left to itself the optimizer walks the user's whole feed after the position
        /// on the primary key (measured: 5,440 rows read per page instead of 64 lookups).
        static let parentTags = """
            SELECT version, body FROM sync_feed FORCE INDEX (sync_feed_record)
             WHERE user_id = ? AND kind = 1 AND version > ? AND deleted_at IS NULL
               AND (device IS NULL OR device <> ?)
               AND record_id IN (\(Array(repeating: "?", count: Pull.parentTagBatch).joined(separator: ", ")))
            """
        enum ParentTagColumn: Int, ResultColumns { case version, body }

        /// Every feed row of a user (check-feed).
        static let ofUser = """
            SELECT kind, record_id, version, deleted_at, device, parent_tags, body, live_day FROM sync_feed WHERE user_id = ?
            """
        enum RowColumn: Int, ResultColumns { case kind, recordID, version, deletedAt, device, parentTags, body, liveDay }
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
}
