import Credentials
import MariaDB
import TodoSyncCore

/// The MariaDB-backed store of one worker thread. Owns that worker's connection; not shared.
///
/// Every write goes through `write(userID:_:)`, which locks the user's row, hands out versions
/// from the user's change sequence in commit order, and finishes the derived work (daily stats)
/// inside the same transaction.
public final class Store {
    let db: Connection
    let configuration: StoreConfiguration
    /// What an unknown email's password is checked against, so that it costs what a known one's
    /// does. One per process, made at start (`Store.prepareDecoyHash()`): made lazily per worker,
    /// the first unknown-email login on each worker after a restart cost two hashes (69–74 ms
    /// against a known email's 36–41 ms: which emails exist, told by timing).
    var decoyPasswordHash: String { Self.decoy.hash }
    /// The current request's deadline (`RequestDeadline`): set per request by the API layer.
    public var deadline: RequestDeadline?
    /// The newest version the current request's writes handed out (the user's change sequence
    /// after them), nil while none changed anything: what a live-sync poke announces once the
    /// outermost transaction has committed (`Application`). Reset per request by the API layer.
    public var changedVersion: Int64?
    /// The current request is the repeat of an `Idempotency-Key` request whose answer was not kept
    /// (`StoredResponse.replay`): it must rebuild that answer and change nothing; a push finding
    /// an operation without a stored result fails instead of applying it (`PushReplayError`).
    /// Set and reset per request by the API layer.
    public var replayOnly = false
    /// The current request runs under an `Idempotency-Key` (`runIdempotent`): a push keeps the
    /// stored results it replays as long as its own (the key's answer is rebuilt from them).
    var isIdempotentRequest = false
    /// The bearer token this worker hashed last, and its SHA-256 (`tokenHash(_:)`).
    private var lastTokenHash: (token: String, hash: [UInt8])?

    public init(connection: Connection, configuration: StoreConfiguration = StoreConfiguration()) {
        self.db = connection
        self.configuration = configuration
    }

    /// `BearerToken.hash(token)`, computed once for the token's consecutive uses: a request hashes
    /// its token for its account's in-flight count (`owner(ofToken:)`) and again for its route's
    /// token check, and a client sends the same token request after request.
    func tokenHash(_ token: String) -> [UInt8] {
        if let last = lastTokenHash, last.token == token { return last.hash }
        let hash = BearerToken.hash(token)
        lastTokenHash = (token, hash)
        return hash
    }

    /// Whether the database answers.
    public func ping() throws {
        try guarded { _ = try db.query(SQL.Health.ping) }
    }

    /// Runs `body`, turning database outages into `DomainError.unavailable`. Other database
    /// errors stay as they are and become a logged 500.
    @discardableResult
    func guarded<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as DatabaseError where error.isCommitOutcomeUnknown {
            throw DomainError.outcomeUnknown
        } catch let error as DatabaseError where error.isConnectionError || error.isRetryableTransactionError {
            throw DomainError.unavailable
        }
    }

    /// The single write path: one transaction per call, serialised per user. `operations`: what
    /// the request costs against the account's write operations per hour (0 for maintenance);
    /// charged under the user's row lock in the same transaction, so a refused or failed write
    /// costs nothing and the charge needs no commit of its own. When the charge would pass the
    /// quota, the write still runs but its first change (`WriteTransaction.nextVersion`) throws
    /// the 429: a write that changes nothing — a push whose every operation is a replay of a
    /// stored result, a create of an existing clientId — is answered, at no cost (contract:
    /// replaying stored results costs no quota). Nothing is started, and nothing
    /// committed, past the request's deadline (`unavailable`, 503). Inside an `Idempotency-Key`
    /// request's transaction (`runIdempotent`) it is a savepoint of that one.
    package func write<T>(userID: Int64, operations: Int, _ body: (WriteTransaction) throws -> T) throws -> T {
        try guarded {
            try db.inSavepoint {
                try checkDeadline()
                guard let locked = try db.queryOne(SQL.Users.lockForWrite, [
                    .int(Int64(configuration.quotaRecords)), .int(Int64(configuration.quotaOperationsPerHour)),
                    .int(configuration.quotaStoredBytesPerHour),
                    .int(userID),
                ]) else {
                    throw DomainError.unauthenticated
                }
                let now = Timestamp.now()
                typealias C = SQL.Users.LockColumn
                let refusal = try chargeOperations(userID: userID, operations, quota: locked.int64(C.operationsQuota)!,
                                                   at: now)
                let transaction = WriteTransaction(db: db, userID: userID, now: now,
                                                   changeSequence: locked.int64(C.changeSequence)!,
                                                   quotaRefusal: refusal, operationsQuota: locked.int64(C.operationsQuota)!,
                                                   storedBytesQuota: locked.int64(C.storedBytesQuota)!)
                let result = try body(transaction)
                try checkRecordQuota(userID: userID, live: locked.int64(C.liveRecords)!,
                                     adding: transaction.liveRecordsDelta, quota: locked.int64(C.recordsQuota)!)
                // A test build's injected bug (`StoreFaults.skipStatsRebuild`): an edit's stats left as they were.
                try transaction.finish(rebuildingStats: !(configuration.faults.skipStatsRebuild && transaction.liveRecordsDelta == 0))
                try checkDeadline()
                if let advanced = transaction.advancedSequence { changedVersion = advanced }
                return result
            }
        }
    }
}

/// The context of one write: the locked user, the transaction's clock, and the version allocator.
package final class WriteTransaction {
    let db: Connection
    let userID: Int64
    /// One timestamp for everything this transaction writes.
    let now: Timestamp
    /// The number of the device whose pushed operations this transaction applies (nil for REST
    /// writes). Records an operation changes carry it; derived changes never do.
    var device: Int64?
    /// Each todo change's effect on its date's daily-stat aggregate, in order (`todoChanged`);
    /// added up per date once, at `finish()`.
    private(set) var statDeltas: [(day: Day, input: StatInput, sign: Int)] = []
    /// Dates whose aggregates are rebuilt from their todos at `finish()` (`recompute-stats`).
    private(set) var rebuiltDays: Set<Day> = []
    /// The user's change sequence as this transaction has advanced it (stored at `finish()`).
    private var changeSequence: Int64
    private let initialChangeSequence: Int64
    /// Live records (tags and todos) this transaction created or restored, minus those it
    /// deleted; added to `users.live_records` at `finish()`.
    private(set) var liveRecordsDelta: Int64 = 0
    /// The operations quota's 429 when this write's charge was refused: raised at its first change.
    private var quotaRefusal: DomainError?
    /// The account's write operations per hour, for a charge made inside the write (`charge`).
    let operationsQuota: Int64
    /// The bytes the account's writes may store per hour (Sql/020).
    let storedBytesQuota: Int64

    init(db: Connection, userID: Int64, now: Timestamp, changeSequence: Int64, quotaRefusal: DomainError? = nil,
         operationsQuota: Int64 = .max, storedBytesQuota: Int64 = .max) {
        self.db = db
        self.userID = userID
        self.now = now
        self.changeSequence = changeSequence
        self.initialChangeSequence = changeSequence
        self.quotaRefusal = quotaRefusal
        self.operationsQuota = operationsQuota
        self.storedBytesQuota = storedBytesQuota
    }

    /// Notes a charge made once the write knows what it costs (a push charges only the operations
    /// that are not replays of stored results): a refused charge stops the write at its first change.
    func refuseChanges(_ refusal: DomainError?) {
        if quotaRefusal == nil { quotaRefusal = refusal }
    }

    /// The next version from the user's change sequence. This transaction holds the user's row
    /// lock from its first statement to its commit, so counting here and storing the sequence
    /// at `finish()` hands out versions in commit order without a round trip per version. (A
    /// version used by a rolled-back savepoint is simply skipped: versions only need to rise.)
    /// Every change of a record takes one, so this is where a write refused by the operations
    /// quota stops (`Store.write`), before it has changed anything.
    func nextVersion() throws -> Int64 {
        if let quotaRefusal { throw quotaRefusal }
        changeSequence += 1
        return changeSequence
    }

    /// The user's change sequence after this transaction, when it handed out any version.
    var advancedSequence: Int64? { changeSequence != initialChangeSequence ? changeSequence : nil }

    /// Notes that a tag or todo came to life (+1: created, or a tombstone restored) or died (-1).
    func liveRecords(_ change: Int64) {
        liveRecordsDelta += change
    }

    /// Notes a todo's change for the daily stats: `before` is the todo as it was while live (nil:
    /// it did not exist, or was a tombstone), `after` as it is now while live (nil: deleted).
    func todoChanged(from before: Todo?, to after: Todo?) {
        if let before { statDeltas.append((before.deadline, before.statInput, -1)) }
        if let after { statDeltas.append((after.deadline, after.statInput, +1)) }
    }

    /// Notes a todo's write for the daily stats and the live-record count: `before` is the todo
    /// as it was (nil: it did not exist), `after` as written (a tombstone when deleted).
    func todoWritten(from before: Todo?, to after: Todo) {
        let wasLive = before.map { $0.deletedAt == nil } ?? false
        let isLive = after.deletedAt == nil
        liveRecords((isLive ? 1 : 0) - (wasLive ? 1 : 0))
        todoChanged(from: wasLive ? before : nil, to: isLive ? after : nil)
    }

    /// Where the daily-stat deltas stand, so that an operation rolled back to its savepoint can
    /// take its deltas back (`rollBackStats(to:)`).
    var statCheckpoint: Int { statDeltas.count }

    func rollBackStats(to checkpoint: Int) {
        statDeltas.removeSubrange(checkpoint...)
    }

    /// Notes that `day`'s aggregate and stat are to be rebuilt from its todos (`recompute-stats`).
    func rebuild(_ day: Day) {
        rebuiltDays.insert(day)
    }

    /// Tags whose name or color changed (their daily-stat entries must be refreshed).
    private(set) var changedTags: Set<Int64> = []

    /// Notes that a tag's name or color changed.
    func tagChanged(_ tagID: Int64) {
        changedTags.insert(tagID)
    }

    /// The change feed rows of the records this transaction wrote (see `FeedEntry`).
    private var feed = FeedBatch()

    /// The highest version this transaction gave a tag or found on one (0: none): raises
    /// `users.tag_seq` at `finish()`, which lets a pull page skip its parent-tag lookup (Sql/024).
    private(set) var latestTagVersion: Int64 = 0

    /// Notes a tag's version for `users.tag_seq`: every write of a tag, live or tombstone.
    func tagVersioned(_ version: Int64) {
        latestTagVersion = max(latestTagVersion, version)
    }

    /// Records a tag's or todo's new state in the change feed. `derived`: the server made this
    /// change on its own (a todo un-tagged by a tag delete), so it carries no device.
    /// `isNew`: this transaction created the record (`FeedBatch.add(_:isNew:)`).
    func changed(_ tag: Tag, isNew: Bool = false) {
        tagVersioned(tag.version)
        feed.add(FeedEntry(tag, device: device), isNew: isNew)
    }

    /// `rendered`: the live todo's JSON when the caller has it (`FeedEntry.init`).
    func changed(_ todo: Todo, derived: Bool = false, rendered: [UInt8]? = nil, isNew: Bool = false) {
        feed.add(todo, device: derived ? nil : device, rendered: rendered, isNew: isNew)
    }

    func changed(_ stat: DailyStat, isNew: Bool = false) {
        feed.add(FeedEntry(stat), isNew: isNew)
    }

    /// Completes derived work before commit: daily stats, then the change feed of everything
    /// written, then the user's change sequence (with the live records and latest tag version).
    func finish(rebuildingStats: Bool = true) throws {
        if rebuildingStats { try DailyStatsRecomputer(transaction: self).run() }
        try feed.write(userID: userID, to: db)
        if changeSequence != initialChangeSequence || liveRecordsDelta != 0 || latestTagVersion != 0 {
            try db.execute(SQL.Users.saveChangeSequence, [
                .int(changeSequence), .int(liveRecordsDelta), .int(latestTagVersion), .int(userID),
            ])
        }
    }
}

extension Store {
    /// The process's decoy password hash (made once, thread-safely, on first use).
    private static let decoy = Decoy(hash: PasswordHasher().decoyHash())
    private struct Decoy: Sendable { let hash: String }

    /// Makes the decoy hash now, before any request: `todosync serve` calls it at start.
    public static func prepareDecoyHash() {
        _ = decoy
    }
}

extension Store {
    /// `unavailable` (503, nothing applied) once the current request's deadline has passed.
    /// `Store.write` calls it before it starts (each attempt) and right before COMMIT.
    func checkDeadline() throws {
        if let deadline, deadline.hasPassed { throw DomainError.unavailable }
    }
}

extension Store {
    /// `StoreConfiguration.requestBudgetMilliseconds`.
    public var requestBudgetMilliseconds: Int64 { configuration.requestBudgetMilliseconds }
}

/// The namespace of the store's SQL statements. Each lives beside the code that binds it and
/// decodes its rows (`extension SQL { enum … }` at the end of that file), and rows are read
/// through a column enum, never by a literal position. Parameters are always bound (`?`);
/// nothing is ever spliced into the text.
enum SQL {}

extension SQL {
    enum Health {
        static let ping = "SELECT 1"
    }

    enum Users {
        static let insert = """
            INSERT INTO users (email, email_key, password_hash, created_at) VALUES (?, ?, ?, ?)
            """
        static let byEmailKey = """
            SELECT id, email, password_hash FROM users WHERE email_key = ?
            """
        enum CredentialsColumn: Int, ResultColumns { case id, email, passwordHash }
        /// Takes the per-user write lock: every write transaction of a user starts here, so a
        /// user's writes are serialised and their versions are allocated in commit order.
        /// With the lock come the account's live-record count and its quotas (its own or the
        /// defaults, parameters 1 to 3), so charging a write costs no extra round trip.
        /// A deleted account has no row here (`DomainError.unauthenticated`): a request that
        /// authenticated just before the delete committed writes nothing after it.
        static let lockForWrite = """
            SELECT change_seq, live_records, COALESCE(quota_records, ?), COALESCE(quota_operations_per_hour, ?),
                   COALESCE(quota_stored_bytes_per_hour, ?)
              FROM users WHERE id = ? AND deleted_at IS NULL FOR UPDATE
            """
        enum LockColumn: Int, ResultColumns {
            case changeSequence, liveRecords, recordsQuota, operationsQuota, storedBytesQuota
        }
        /// Stores the last version the transaction handed out, the change in live records and the
        /// highest version it gave a tag (0: none; `tag_seq` never goes down, Sql/024), while still
        /// holding the lock. Parameters: sequence, live-record delta, tag version, user.
        static let saveChangeSequence = """
            UPDATE users SET change_seq = ?, live_records = live_records + ?, tag_seq = GREATEST(tag_seq, ?) WHERE id = ?
            """
    }
}
