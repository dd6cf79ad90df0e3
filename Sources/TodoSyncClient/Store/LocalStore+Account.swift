import GRDB
import TodoSyncCore

/// The account this store belongs to, its token, and the last sync's outcome.
extension LocalStore {
    func token() throws -> String? {
        try credentials.token()
    }

    func setToken(_ token: String?) throws {
        try credentials.setToken(token)
    }

    /// Binds the store to `userID` on first login; another account is refused (one file per account).
    func signIn(userID: Int64, email: String, token: String) throws {
        try pool.write { db in
            if let owner = try Meta.get(db, .userID), owner != String(userID) {
                throw LocalStoreError.otherAccount(try Meta.get(db, .email) ?? "another account")
            }
            try Meta.set(db, .userID, String(userID))
            try Meta.set(db, .email, email)
        }
        try credentials.setToken(token)
    }

    /// Whether a token is stored.
    public var isLoggedIn: Bool {
        get throws { try token() != nil }
    }

    /// The server this store syncs with, as last set (a preference for tools; the client is
    /// always given its base URL explicitly).
    public var serverURL: String? {
        get throws { try pool.read { try Meta.get($0, .server) } }
    }

    public func setServerURL(_ url: String) throws {
        try pool.write { try Meta.set($0, .server, url) }
    }

    /// Remembers (or, nil, forgets) that the server requires a newer schema version.
    func setUpgradeRequired(_ required: UpgradeRequired?) throws {
        try pool.write { db in try Meta.set(db, .upgradeRequired, required.map { "\($0.minimum) \($0.current)" }) }
    }

    func upgradeRequired() throws -> UpgradeRequired? {
        try pool.read { try Meta.upgradeRequired($0) }
    }

    func recordSync(error: String?) throws {
        try pool.write { db in
            if let error {
                try Meta.set(db, .lastSyncError, error)
            } else {
                try Meta.set(db, .lastSyncAt, Timestamp.now().rfc3339)
                try Meta.set(db, .lastSyncError, nil)
            }
        }
    }
}
