import Credentials

/// Tunables of the store; defaults follow the contract.
public struct StoreConfiguration: Sendable {
    /// Bearer tokens expire this long after login (contract: 90 days).
    public var tokenLifetimeSeconds: Int64 = 90 * 24 * 3600
    /// Failed logins for one account within `loginLockoutSeconds` before it answers 429.
    public var loginMaxFailures: Int = 10
    /// How long failed logins are remembered and how long an account stays throttled.
    public var loginLockoutSeconds: Int64 = 900
    /// Live records (tags + todos) one account may have (`users.quota_records` overrides it).
    public var quotaRecords: Int = 100_000
    /// Write operations one account may make per clock hour (`users.quota_operations_per_hour`).
    public var quotaOperationsPerHour: Int = 100_000
    /// Password hashing parameters.
    public var passwordHasher = PasswordHasher()
    /// Password hashes allowed at once in this process (shared by every worker's store); a login
    /// or register beyond it answers 429 with `Retry-After: 1` at once.
    public var hashSlots = HashSlots(limit: 2)

    /// The number of `hashSlots` (setting it makes a new, empty set of slots).
    public var hashConcurrency: Int {
        get { hashSlots.limit }
        set { hashSlots = HashSlots(limit: newValue) }
    }

    public init() {}
}
