import Credentials
import MariaDB
import TodoSyncCore

/// One session (a valid bearer token) of a user, as `GET /account/sessions` lists it.
public struct AccountSession: Sendable, Equatable {
    /// The public id (Sql/022): neither the token nor its hash.
    public let id: String
    public let createdAt: String
    /// Up to a minute stale (`Store.tokenUseResolutionSeconds`).
    public let lastUsedAt: String
    /// Whether this is the token of the request that lists them.
    public let current: Bool

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("createdAt", createdAt)
        writer.field("lastUsedAt", lastUsedAt)
        writer.field("current", current)
        writer.endObject()
    }
}

/// What one erase of deleted accounts removed.
public struct AccountEraseReport: Sendable {
    public var accounts = 0
    public var rows = 0
    /// The accounts erased.
    public var userIDs: [Int64] = []
}

extension Store {
    /// Changes the signed-in user's password after checking the current one (a wrong one is
    /// `wrongPassword` and counts as a failed login of the account), and revokes every other token
    /// of the user in the same transaction; `token`, the presented one, stays valid.
    public func changePassword(userID: Int64, token: String, _ input: PasswordChangeInput) throws {
        let checkedHash = try verifyAccountPassword(userID: userID, input.currentPassword, field: "currentPassword")
        let newHash = try withHashSlot { try configuration.passwordHasher.hash(input.newPassword) }
        let tokenHash = self.tokenHash(token)
        try guarded {
            try db.inSavepoint {
                guard try db.queryOne(SQL.Account.lockToken, [.blob(tokenHash), .int(userID), .timestamp(Timestamp.now())])
                    != nil else { throw DomainError.unauthenticated }
                // Another change committed since the check: the password given is no longer the current one.
                guard try db.execute(SQL.Account.setPassword, [.text(newHash), .int(userID), .text(checkedHash)])
                    .affectedRows == 1 else { throw DomainError.wrongPassword(field: "currentPassword") }
                try db.execute(SQL.Account.revokeOtherTokens, [.int(userID), .blob(tokenHash)])
            }
        }
    }

    /// The user's valid sessions, newest first; `current` marks the presented token's.
    public func sessions(userID: Int64, token: String) throws -> [AccountSession] {
        try guarded {
            try db.query(SQL.Account.sessions, [.blob(tokenHash(token)), .int(userID), .timestamp(Timestamp.now())])
                .map { row in
                    typealias C = SQL.Account.SessionColumn
                    return AccountSession(
                        id: row.string(C.publicID)!, createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.createdAt)!),
                        lastUsedAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.lastUsed)!),
                        current: row.int64(C.isCurrent) == 1)
                }
        }
    }

    /// Revokes one session of the user at once; `notFound` when the user has none with that id.
    public func revokeSession(userID: Int64, id: String) throws {
        guard SessionID.isValid(id) else { throw DomainError.notFound }
        let deleted = try guarded { try db.execute(SQL.Account.revokeSession, [.int(userID), .text(id)]) }
        guard deleted.affectedRows == 1 else { throw DomainError.notFound }
    }

    /// Deletes the account after checking its password (a wrong one counts as a failed login):
    /// when this returns, every token of it is gone, its email is free to register again, and no
    /// write of it can commit (`SQL.Users.lockForWrite`). Its rows are erased by
    /// `eraseDeletedAccounts` (`todosync purge`); the deletion is journaled (Sql/029) for restores.
    /// Its friendships and the requests it sent end at once (`endFriendsOfDeletedAccount`):
    /// returns whose friends lists or requests changed.
    @discardableResult
    public func deleteAccount(userID: Int64, token: String, _ input: AccountDeleteInput) throws -> [Int64] {
        let checkedHash = try verifyAccountPassword(userID: userID, input.password, field: "password")
        let tokenHash = self.tokenHash(token)
        let told = try guarded {
            try db.inSavepoint {
                let now = Timestamp.now()
                guard try db.queryOne(SQL.Account.lockToken, [.blob(tokenHash), .int(userID), .timestamp(now)]) != nil
                else { throw DomainError.unauthenticated }
                guard let credentials = try db.queryOne(SQL.Account.credentials, [.int(userID)]),
                      credentials.string(SQL.Account.CredentialsColumn.passwordHash) == checkedHash else {
                    throw DomainError.wrongPassword(field: "password")
                }
                let told = try endFriendsOfDeletedAccount(
                    userID: userID, emailKey: credentials.string(SQL.Account.CredentialsColumn.emailKey)!)
                guard try db.execute(SQL.Account.markDeleted, [.timestamp(now), .int(userID)]).affectedRows == 1 else {
                    throw DomainError.unauthenticated
                }
                // Outlives the erase: a restore of a backup taken before now deletes it again.
                try db.execute(SQL.Account.journalDeletion, [.int(userID)])
                try db.execute(SQL.Account.revokeAllTokens, [.int(userID)])
                return told
            }
        }
        configuration.snapshotCache?.erase(userID: userID)
        return told
    }

    /// Checks a signed-in user's password exactly as a login of the account would be checked: in
    /// a hash slot, counted against the account's email key (`reserveLoginAttempt`, so the
    /// lockout after repeated failures applies, and a throttled account is 429 before any check),
    /// the counter cleared on success. Returns the hash that matched.
    private func verifyAccountPassword(userID: Int64, _ password: String, field: String) throws -> String {
        guard let row = try guarded({ try db.queryOne(SQL.Account.credentials, [.int(userID)]) }) else {
            throw DomainError.unauthenticated
        }
        let emailHash = BearerToken.sha256(Array(row.string(SQL.Account.CredentialsColumn.emailKey)!.utf8))
        let passwordHash = row.string(SQL.Account.CredentialsColumn.passwordHash)!
        try withHashSlot {
            try reserveLoginAttempt(emailHash: emailHash, now: Timestamp.now())
            guard configuration.passwordHasher.verify(password, against: passwordHash) else {
                throw DomainError.wrongPassword(field: field)
            }
        }
        try guarded { try db.execute(SQL.Logins.clear, [.blob(emailHash)]) }
        return passwordHash
    }

    /// The account's export, `{"user", "tags", "todos", "dailyStats"}`: every live record as the
    /// REST routes render it, written to `write` page by page (`SQL.Export`: at most
    /// `SQL.Export.pageRows` records a page), so the body never sits in memory whole. All pages
    /// come from one transaction (InnoDB's REPEATABLE READ: every read after the first sees the
    /// same snapshot). Returns false when `write` refused a page (the reader is gone): nothing
    /// more is read, and the connection is left between statements, ready for the next request.
    ///
    /// Errors are thrown before the first page is written (the caller can still answer them) or
    /// midway (the body is then cut off); nothing is retried, since pages already written cannot
    /// be taken back. Only `StoreConfiguration.exportSlots` exports run at once in a process
    /// (`throttled` beyond): each holds a worker and a long read transaction.
    public func exportAccount(userID: Int64, write: (UnsafeRawBufferPointer) -> Bool) throws -> Bool {
        guard let finished = try configuration.exportSlots.withSlot(client: "\(userID)", { try writeExport(userID: userID, write: write) })
        else {
            throw DomainError.throttled(message: "The server is busy preparing another export; retry shortly.",
                                        retryAfterSeconds: Self.exportRetryAfterSeconds)
        }
        return finished
    }

    /// The `Retry-After` of an export turned away for lack of a slot.
    static let exportRetryAfterSeconds: Int64 = 5

    private func writeExport(userID: Int64, write: (UnsafeRawBufferPointer) -> Bool) throws -> Bool {
        try checkDeadline()  // the request's budget covers its start; a started export runs to its end
        return try guarded {
            try db.inTransaction(maxAttempts: 1) {
                // The first read fixes the snapshot that every page below sees.
                guard let user = try db.queryOne(SQL.Account.exportUser, [.int(userID)]) else {
                    throw DomainError.unauthenticated
                }
                var out = JSONWriter(reservingCapacity: 256 * 1024)
                out.beginObject()
                out.key("user")
                out.beginObject()
                typealias U = SQL.Account.ExportUserColumn
                out.field("id", user.int64(U.id)!)
                out.field("email", user.string(U.email)!)
                out.field("createdAt", Timestamp.rfc3339(fromDatabaseText: user.string(U.createdAt)!))
                out.field("nickname", user.string(U.nickname))
                out.endObject()

                out.key("tags")
                out.beginArray()
                var lastTag: Int64 = 0
                guard try writePages(&out, write, { out in
                    let rows = try db.query(SQL.Export.tags, [.int(userID), .int(lastTag)])
                    for row in rows {
                        let tag = Tag(row: row)
                        tag.write(to: &out)
                        lastTag = tag.id
                    }
                    return rows.count
                }) else { return false }
                out.endArray()

                out.key("todos")
                out.beginArray()
                var lastKey: [DatabaseValue]?
                guard try writePages(&out, write, { out in
                    let parameters = [.int(userID)] + (lastKey.map { key in
                        SQL.Export.afterListKeyParameters.map { key[$0] }
                    } ?? [])
                    var rows = 0
                    try db.forEachRow(lastKey == nil ? SQL.Export.firstTodos : SQL.Export.nextTodos, parameters) {
                        row throws(DatabaseError) in
                        try RowJSON.write(to: &out) { bytes throws(DatabaseError) in
                            try RowJSON.appendStoredJSON(row, 0, to: &bytes)
                        }
                        rows += 1
                        if rows == SQL.Export.pageRows {
                            var key: [DatabaseValue] = []
                            for column in SQL.Export.todoKeyColumns { key.append(try row.value(column)) }
                            lastKey = key
                        }
                    }
                    return rows
                }) else { return false }
                out.endArray()

                out.key("dailyStats")
                out.beginArray()
                var lastDay: DatabaseValue?
                guard try writePages(&out, write, { out in
                    var rows = 0
                    try db.forEachRow(lastDay == nil ? SQL.Export.firstStats : SQL.Export.nextStats,
                                      [.int(userID)] + (lastDay.map { [$0] } ?? [])) { row throws(DatabaseError) in
                        try DailyStatRowJSON.write(row, to: &out)
                        rows += 1
                        if rows == SQL.Export.pageRows { lastDay = try row.value(SQL.Export.statDayColumn) }
                    }
                    return rows
                }) else { return false }
                out.endArray()
                // After the records, so the export's first members keep their order (Sql/032).
                try writeFriendsExport(userID: userID, to: &out)
                out.endObject()
                return out.drain(write)
            }
        }
    }

    /// Runs `page` (which renders one page of records into `out` and returns how many it read)
    /// until a page comes back short, handing `out`'s bytes to `write` after each. False when
    /// `write` refused them.
    private func writePages(
        _ out: inout JSONWriter, _ write: (UnsafeRawBufferPointer) -> Bool, _ page: (inout JSONWriter) throws -> Int
    ) throws -> Bool {
        while true {
            let rows = try page(&out)
            guard out.drain(write) else { return false }
            if rows < SQL.Export.pageRows { return true }
        }
    }

    /// Erases accounts deleted by `deleteAccount`: every row of each in every table that has one
    /// (`SQL.Erase`), in batches of `SQL.Erase.batch` rows per statement, the users row last. An
    /// interrupted erase is finished by the next.
    public func eraseDeletedAccounts() throws -> AccountEraseReport {
        var report = AccountEraseReport()
        try guarded {
            let present = Set(try db.query(SQL.Erase.existingTables).compactMap { $0.string(OnlyColumn.value) })
            let tables = SQL.Erase.tables + SQL.Erase.optionalTables.filter(present.contains)
            while true {
                let users = try db.query(SQL.Erase.deletedUsers).compactMap { $0.int64(OnlyColumn.value) }
                for userID in users {
                    for table in tables {
                        while true {
                            let deleted = Int(try db.execute(SQL.Erase.deleteBatch(table), [
                                .int(userID), .int(Int64(SQL.Erase.batch)),
                            ]).affectedRows)
                            report.rows += deleted
                            if deleted < SQL.Erase.batch { break }
                        }
                    }
                    report.accounts += Int(try db.execute(SQL.Erase.user, [.int(userID)]).affectedRows)
                    report.userIDs.append(userID)
                    configuration.snapshotCache?.erase(userID: userID)
                }
                if users.count < SQL.Erase.userBatch { break }
            }
        }
        return report
    }
}

extension SQL {
    /// The routes under `/account/` (Store+Account.swift, Sql/022).
    enum Account {
        /// What re-checking a signed-in user's password needs: the email key (its hash keys the
        /// failed-login counter, as at login) and the password hash.
        static let credentials = "SELECT email_key, password_hash FROM users WHERE id = ? AND deleted_at IS NULL"
        enum CredentialsColumn: Int, ResultColumns { case emailKey, passwordHash }
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
        enum SessionColumn: Int, ResultColumns { case publicID, createdAt, lastUsed, isCurrent }
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
        /// The export's `user`. Columns: id, email, created_at, nickname (Sql/032).
        static let exportUser = "SELECT id, email, created_at, nickname FROM users WHERE id = ? AND deleted_at IS NULL"
        enum ExportUserColumn: Int, ResultColumns { case id, email, createdAt, nickname }
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
            "friend_requests", "friend_request_sends", "friendships",
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
}
