import Foundation
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

    /// Whether the store has been signed in to an account (it keeps it after logout and after
    /// the server refused its token).
    var hasAccount: Bool {
        get throws { try pool.read { try Meta.get($0, .userID) } != nil }
    }

    /// The server refused `token` for good (revoked by a password change or by `revokeSession`
    /// on another device, the account deleted elsewhere, expired): forget it, so the store says
    /// "signed out: log in again" (`Status.signedOut`). Records and the outbox stay; logging in
    /// to the same account sends the queue. A token stored meanwhile (a login) is kept.
    func signOut(refused token: String) throws {
        if try self.token() == token { try setToken(nil) }
    }

    /// After the server deleted the account (`TodoSyncClient.deleteAccount`): forgets the token,
    /// closes the database and removes the store file, its `-wal`, `-shm` and sync lock. The
    /// store cannot be used afterwards.
    func closeAndRemoveFiles() throws {
        try? setToken(nil)  // a token kept outside the file (CredentialStore) goes too
        try pool.close()
        for file in [path, path + "-wal", path + "-shm", path + ".sync-lock"] {
            if unlink(file) != 0 && errno != ENOENT { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        }
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
