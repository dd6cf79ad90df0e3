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
                    AccountSession(
                        id: row.string(0)!, createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(1)!),
                        lastUsedAt: Timestamp.rfc3339(fromDatabaseText: row.string(2)!), current: row.int64(3) == 1)
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
                      credentials.string(1) == checkedHash else {
                    throw DomainError.wrongPassword(field: "password")
                }
                let told = try endFriendsOfDeletedAccount(userID: userID, emailKey: credentials.string(0)!)
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
        let emailHash = BearerToken.sha256(Array(row.string(0)!.utf8))
        let passwordHash = row.string(1)!
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
                out.field("id", user.int64(0)!)
                out.field("email", user.string(1)!)
                out.field("createdAt", Timestamp.rfc3339(fromDatabaseText: user.string(2)!))
                out.field("nickname", user.string(3))
                out.endObject()
                try writeFriendsExport(userID: userID, to: &out)

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
            let present = Set(try db.query(SQL.Erase.existingTables).compactMap { $0.string(0) })
            let tables = SQL.Erase.tables + SQL.Erase.optionalTables.filter(present.contains)
            while true {
                let users = try db.query(SQL.Erase.deletedUsers).compactMap { $0.int64(0) }
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
