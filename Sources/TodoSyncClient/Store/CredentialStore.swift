import GRDB

/// Where a `LocalStore` keeps the account's login token: the only secret the client holds (the
/// password is never stored). Give `LocalStore(path:credentials:)` another implementation to
/// keep it elsewhere, e.g. the platform's keychain; whatever holds it, the token is never
/// printed (`todosync-client` shows neither it nor the password, `--json` included).
public protocol CredentialStore: Sendable {
    /// The stored token, or nil when logged out.
    func token() throws -> String?
    /// Stores `token`, or removes it (nil: logout).
    func setToken(_ token: String?) throws
}

/// The default on Linux (and the only implementation built here): the token in the store file's
/// `meta` table. `LocalStore` creates that file (and SQLite its `-wal` and `-shm`, which take the
/// file's mode) readable and writable by its owner only (0600).
struct StoreFileCredentials: CredentialStore {
    let pool: DatabasePool

    func token() throws -> String? {
        try pool.read { try Meta.get($0, .token) }
    }

    func setToken(_ token: String?) throws {
        try pool.write { try Meta.set($0, .token, token) }
    }
}
