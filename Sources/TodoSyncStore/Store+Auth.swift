import Credentials
import MariaDB
import TodoSyncCore

extension Store {
    /// Creates an account and its first session. `emailTaken` when the email is taken (case-insensitively).
    /// `client` names who asks (the client's address), for the hash slots' fair turn.
    public func register(_ input: CredentialsInput, client: String = "") throws -> Session {
        // Hash outside the transaction: Argon2 deliberately takes tens of milliseconds.
        let passwordHash = try withHashSlot(client: client) { try configuration.passwordHasher.hash(input.password) }
        let token = try BearerToken.generate()
        let now = Timestamp.now()
        return try guarded {
            try db.inTransaction {
                let inserted: ExecutionResult
                do {
                    inserted = try db.execute(SQL.Users.insert, [
                        .text(input.email), .text(CredentialsInput.emailKey(input.email)), .text(passwordHash),
                        .timestamp(now),
                    ])
                } catch let error as DatabaseError where error.isDuplicateKey {
                    throw DomainError.emailTaken
                }
                let userID = Int64(inserted.lastInsertID)
                try insertToken(token, userID: userID, now: now)
                return Session(user: User(id: userID, email: input.email), token: token)
            }
        }
    }

    /// Checks credentials and opens a session. The same `badCredentials` whether or not the email exists;
    /// `throttled` with the seconds left while the email is throttled after too many failures, again whether
    /// or not it exists (the throttle is keyed by the email, not the account).
    public func login(_ input: CredentialsInput, client: String = "") throws -> Session {
        let now = Timestamp.now()
        let emailKey = CredentialsInput.emailKey(input.email)
        let emailHash = BearerToken.sha256(Array(emailKey.utf8))
        // The slot is taken first, so an attempt turned away for lack of one is not counted.
        // A failed one weighs on its client's next turn for a slot (`HashSlots.recordFailure`):
        // a flood of guesses waits behind the logins of addresses that do not fail.
        let row = try withHashSlot(client: client) {
            do {
                try reserveLoginAttempt(emailHash: emailHash, now: now)
                let row = try guarded { try db.queryOne(SQL.Users.byEmailKey, [.text(emailKey)]) }
                guard let row else {
                    _ = configuration.passwordHasher.verify(input.password, against: decoyPasswordHash)
                    throw DomainError.badCredentials
                }
                guard configuration.passwordHasher.verify(input.password, against: row.string(SQL.Users.CredentialsColumn.passwordHash)!) else {
                    throw DomainError.badCredentials
                }
                return row
            } catch let error as DomainError {
                // A wrong password or unknown email, or an email locked out by its failures.
                switch error {
                case .badCredentials, .throttled: configuration.hashSlots.recordFailure(client: client)
                default: break
                }
                throw error
            }
        }
        let userID = row.int64(SQL.Users.CredentialsColumn.id)!
        let token = try BearerToken.generate()
        try guarded {
            try db.inTransaction {
                try db.execute(SQL.Logins.clear, [.blob(emailHash)])
                try insertToken(token, userID: userID, now: now)
            }
        }
        return Session(user: User(id: userID, email: row.string(SQL.Users.CredentialsColumn.email)!), token: token)
    }

    /// Runs a password hash in one of the process's hash slots, after a short fair wait when they
    /// are all taken; `throttled` (retry after 1 s) when none came free (`StoreConfiguration.hashSlots`).
    func withHashSlot<T>(client: String = "", _ body: () throws -> T) throws -> T {
        guard let result = try configuration.hashSlots.withSlot(client: client, body) else {
            throw DomainError.throttled(message: "The server is busy checking passwords; retry shortly.", retryAfterSeconds: 1)
        }
        return result
    }

    /// Counts one login attempt against the email before its password is checked; `throttled` with the
    /// seconds left in the window when the email already has `loginMaxFailures` in it.
    func reserveLoginAttempt(emailHash: [UInt8], now: Timestamp) throws {
        let windowStart = DatabaseValue.timestamp(now.adding(seconds: -configuration.loginLockoutSeconds))
        let reserved = try guarded {
            try db.execute(SQL.Logins.ensureRow, [.blob(emailHash)])
            return try db.execute(SQL.Logins.reserveAttempt, [
                windowStart, windowStart, .timestamp(now), .blob(emailHash),
                .int(Int64(configuration.loginMaxFailures)), windowStart,
            ])
        }
        guard reserved.affectedRows == 0 else { return }
        let offset = try guarded {
            try db.queryOne(SQL.Logins.windowOffset, [.timestamp(now), .blob(emailHash)])?.int64(OnlyColumn.value)
        }
        // offset is minus the window's age: what is left of it is lockout + offset (+1 for the
        // milliseconds that TIMESTAMPDIFF truncated).
        let left = configuration.loginLockoutSeconds + (offset ?? 0) + 1
        throw DomainError.tooManyLoginFailures(retryAfterSeconds: min(max(left, 1), configuration.loginLockoutSeconds))
    }

    /// Revokes a token at once.
    public func logout(token: String) throws {
        try guarded { try db.execute(SQL.Tokens.delete, [.blob(tokenHash(token))]) }
    }

    /// The user a bearer token belongs to, or nil when it is unknown, revoked or expired. Records
    /// the use (`lastUsedAt`) when the stored one is over a minute old.
    public func authenticate(token: String) throws -> Int64? {
        let now = Timestamp.now()
        let tokenHash = self.tokenHash(token)
        return try guarded {
            guard let row = try db.queryOne(SQL.Tokens.userForToken, [
                Self.tokenUseStaleBefore(now), .blob(tokenHash), .timestamp(now),
            ]) else { return nil }
            if row.int64(SQL.Tokens.UserColumn.useIsStale) == 1 { touchToken(hash: tokenHash, now: now) }
            return row.int64(SQL.Tokens.UserColumn.userID)
        }
    }

    /// How stale a session's `lastUsedAt` may get (contract: up to a minute): a token's use is
    /// written only when the stored one is older, so reads cost no write.
    static let tokenUseResolutionSeconds: Int64 = 60

    /// The stale-before bound of a token's last use, as `SQL.Tokens.userForToken` and the hot
    /// reads (`SQL.ReadOwner.token`) take it.
    static func tokenUseStaleBefore(_ now: Timestamp) -> DatabaseValue {
        .timestamp(now.adding(seconds: -tokenUseResolutionSeconds))
    }

    /// Records a use of a token whose last one is over a minute old. Best effort: bookkeeping
    /// must not fail the request it rides on (the next use tries again).
    func touchToken(hash: [UInt8], now: Timestamp) {
        _ = try? db.execute(SQL.Tokens.touch, [.timestamp(now), .blob(hash), Self.tokenUseStaleBefore(now)])
    }

    private func insertToken(_ token: String, userID: Int64, now: Timestamp) throws {
        try db.execute(SQL.Tokens.insert, [
            .blob(tokenHash(token)), .int(userID), .timestamp(now),
            .timestamp(now.adding(seconds: configuration.tokenLifetimeSeconds)),
        ])
    }
}

extension SQL {
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
        enum UserColumn: Int, ResultColumns { case userID, useIsStale }
        /// Records a use of the token, unless another request of it already did in the last
        /// minute: at most one write per token per minute. Parameters: now, token hash, stale-before.
        static let touch = """
            UPDATE auth_tokens SET last_used_at = ? WHERE token_hash = ? AND \(lastUsed()) < ?
            """
        static let delete = "DELETE FROM auth_tokens WHERE token_hash = ?"
    }
}
