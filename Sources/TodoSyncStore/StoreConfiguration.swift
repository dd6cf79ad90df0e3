import TodoSyncCore
import Credentials
import TodoSyncSnapshot

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
    /// Bytes of push results (and the records they keep) an account may store per clock hour
    /// (`users.quota_stored_bytes_per_hour` overrides it); a push past it is 429, nothing applied.
    public var quotaStoredBytesPerHour: Int64 = 64 << 20
    /// Time a request may take, counted from when nginx handed it over: no work is started and
    /// no transaction committed past it (503). Keep it well inside nginx's
    /// `fastcgi_read_timeout` (30 s) minus a lock wait (`TODOSYNC_DB_LOCK_WAIT_TIMEOUT`).
    public var requestBudgetMilliseconds: Int64 = 20_000
    /// `Idempotency-Key` records are kept this long at least (contract: 24 hours), then purged.
    public var idempotencyRetentionSeconds: Int64 = 24 * 3600
    /// The most `Idempotency-Key` records one account keeps at once, and the most bytes they may
    /// store (`users.quota_idempotency_keys`, `quota_idempotency_bytes` override them, Sql/028):
    /// a keyed request past either is 429, nothing applied, until the oldest record expires.
    public var idempotencyKeysPerAccount: Int64 = 10_000
    public var idempotencyBytesPerAccount: Int64 = 32 << 20
    /// The bytes a todo's JSON may take: the least capacity of the columns that keep it
    /// (`StorageCapacity.todoRendering`). Only tests lower it: to see a todo too long to store
    /// rejected alone (`Store.requireStorable`).
    public var todoRenderingCapacity: Int = StorageCapacity.todoRendering
    /// The oldest schema version a sync request may speak; older is 426 `upgrade_required`
    /// (`TODOSYNC_MIN_SCHEMA_VERSION`, 1 to `SchemaVersion.current`).
    public var minimumSchemaVersion = SchemaVersion.first
    /// Bugs on purpose (`StoreFaults`): all off, and set only by the test build's hooks.
    public var faults = StoreFaults()
    /// Password hashing parameters.
    public var passwordHasher = PasswordHasher()
    /// Password hashes allowed at once in this process (shared by every worker's store), with a
    /// short fair queue in front (`HashSlots`); a login or register that gets no slot in time
    /// answers 429 with `Retry-After: 1`.
    public var hashSlots = HashSlots(limit: 2, queueLimit: 4, maximumWait: 2)
    /// Which account recent bearer tokens belong to (shared by every worker's store), for
    /// counting requests per account before a route checks its token (`Store.owner(ofToken:)`).
    public var tokenOwners = TokenOwners()

    /// Sets the slots, the queue and its longest wait (a new, empty set of slots).
    public mutating func configureHashing(concurrency: Int, queue: Int, maximumWaitMilliseconds: Int) {
        hashSlots = HashSlots(limit: concurrency, queueLimit: queue, maximumWait: Double(maximumWaitMilliseconds) / 1000)
    }

    /// Account exports run at once in this process (shared by every worker's store). An export is
    /// streamed page by page (about 1 MB of memory whatever the account's size), but it holds a
    /// worker and a long read transaction for as long as it runs (seconds for 1,000,000 todos).
    /// Shared by account (`HashSlots.perClientLimit`): one export of an account at a time, its
    /// next one turned away at once (429, `Retry-After`); another account's waits up to
    /// `exportWaitSeconds` in a fair queue of `exportQueue` (the account that exported least
    /// lately goes first), then 429.
    public var exportSlots = Self.makeExportSlots(limit: 1)

    /// The longest wait for the export slot, and how many accounts may wait.
    public static let exportWaitSeconds = 10.0
    public static let exportQueue = 2

    /// Export slots shared by account: `limit` at once, one per account.
    public static func makeExportSlots(limit: Int) -> HashSlots {
        HashSlots(limit: limit, queueLimit: exportQueue, maximumWait: exportWaitSeconds, perClientLimit: 1)
    }

    /// Where snapshot files are built and kept (nil: the snapshot route is 404).
    public var snapshotCache: SnapshotCache?
    /// Snapshot builds at once in this process (shared by every worker's store): each holds a
    /// worker and about a core for up to the request budget. Shared by account
    /// (`HashSlots.perClientLimit`): one build of an account at a time, its next one answered at
    /// once with 503 and `Retry-After: 1` (the client retries, or syncs by paged pull); another
    /// account's waits up to `snapshotBuildWaitSeconds` in a fair queue as long as the slots (the
    /// account that built least lately goes first), then 503.
    public var snapshotBuildSlots = Self.makeSnapshotBuildSlots(limit: 2)

    /// The longest wait for a snapshot build slot.
    public static let snapshotBuildWaitSeconds = 5.0

    /// Snapshot build slots shared by account: `limit` at once, one per account, as many waiting.
    public static func makeSnapshotBuildSlots(limit: Int) -> HashSlots {
        HashSlots(limit: limit, queueLimit: limit, maximumWait: snapshotBuildWaitSeconds, perClientLimit: 1)
    }

    public init() {}
}

extension Store {
    /// `StoreConfiguration.minimumSchemaVersion`.
    public var minimumSchemaVersion: Int { configuration.minimumSchemaVersion }
}
