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
        let tokenHash = BearerToken.hash(token)
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
            try db.query(SQL.Account.sessions, [.blob(BearerToken.hash(token)), .int(userID), .timestamp(Timestamp.now())])
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
    /// `eraseDeletedAccounts` (`todosync purge`).
    public func deleteAccount(userID: Int64, token: String, _ input: AccountDeleteInput) throws {
        let checkedHash = try verifyAccountPassword(userID: userID, input.password, field: "password")
        let tokenHash = BearerToken.hash(token)
        try guarded {
            try db.inSavepoint {
                let now = Timestamp.now()
                guard try db.queryOne(SQL.Account.lockToken, [.blob(tokenHash), .int(userID), .timestamp(now)]) != nil
                else { throw DomainError.unauthenticated }
                guard try db.queryOne(SQL.Account.credentials, [.int(userID)])?.string(1) == checkedHash else {
                    throw DomainError.wrongPassword(field: "password")
                }
                guard try db.execute(SQL.Account.markDeleted, [.timestamp(now), .int(userID)]).affectedRows == 1 else {
                    throw DomainError.unauthenticated
                }
                try db.execute(SQL.Account.revokeAllTokens, [.int(userID)])
            }
        }
        configuration.snapshotCache?.erase(userID: userID)
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

    /// The account's export: `{"user", "tags", "todos", "dailyStats"}`, every live record as the
    /// REST routes render it, all from one transaction (InnoDB's REPEATABLE READ: every read
    /// after the first sees the same snapshot). Todos and stats are written straight from the
    /// rows as they stream in; the body is one buffer, since a FastCGI response is one
    /// (`FastCGIResponse.body`), so only `StoreConfiguration.exportSlots` exports are built at
    /// once in a process (`throttled` beyond).
    public func exportAccount(userID: Int64) throws -> [UInt8] {
        guard let body = try configuration.exportSlots.withSlot({ try buildExport(userID: userID) }) else {
            throw DomainError.throttled(message: "The server is busy preparing another export; retry shortly.",
                                        retryAfterSeconds: Self.exportRetryAfterSeconds)
        }
        return body
    }

    /// The `Retry-After` of an export turned away for lack of a slot.
    static let exportRetryAfterSeconds: Int64 = 5

    private func buildExport(userID: Int64) throws -> [UInt8] {
        try guarded {
            try db.inTransaction {
                var out = JSONWriter(reservingCapacity: 64 * 1024)
                guard let user = try db.queryOne(SQL.Account.exportUser, [.int(userID)]) else {
                    throw DomainError.unauthenticated
                }
                out.beginObject()
                out.key("user")
                out.beginObject()
                out.field("id", user.int64(0)!)
                out.field("email", user.string(1)!)
                out.field("createdAt", Timestamp.rfc3339(fromDatabaseText: user.string(2)!))
                out.endObject()
                out.key("tags")
                out.beginArray()
                for row in try db.query(SQL.Tags.listLive, [.int(userID)]) { Tag(row: row).write(to: &out) }
                out.endArray()
                let everyDay: [DatabaseValue] = [.int(userID), .day(Day.minimum), .day(Day.maximum)]
                out.key("todos")
                out.beginArray()
                try db.forEachRow(SQL.TodoList.bodiesInRangeForUser, everyDay) { row throws(DatabaseError) in
                    try RowJSON.write(to: &out) { bytes throws(DatabaseError) in
                        try RowJSON.appendStoredJSON(row, 0, to: &bytes)
                    }
                }
                out.endArray()
                out.key("dailyStats")
                out.beginArray()
                try db.forEachRow(SQL.DailyStats.liveInRangeForUser, everyDay) { row throws(DatabaseError) in
                    try DailyStatRowJSON.write(row, to: &out)
                }
                out.endArray()
                out.endObject()
                return out.bytes
            }
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
