import Foundation
import GRDB
import TodoSyncCore

/// Errors of local reads and writes.
public enum LocalStoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A field fails the contract's rules; nothing was written.
    case validation(field: String, problem: String)
    /// No live record with that local id.
    case notFound
    /// The store belongs to another account.
    case otherAccount(String)
    /// No store file at this path, and the caller did not ask to create one.
    case noStore(path: String)
    /// The file is not a store this client can read (not SQLite, damaged, or from a newer
    /// client); `reason` is SQLite's word for it.
    case unreadable(path: String, reason: String)

    public var description: String {
        switch self {
        case .validation(let field, let problem): return "\(field) \(problem)"
        case .notFound: return "no such record"
        case .otherAccount(let email): return "this local store belongs to \(email); use one store file per account"
        case .noStore(let path): return "no local store at \(path)"
        case .unreadable(let path, let reason): return "\(path) is not a readable TodoSync store (\(reason))"
        }
    }
}

/// The device's database: records, the pull cursor, the outbox of pending operations, the
/// operation log and the conflict inbox, in one SQLite file per account (WAL mode, so the app
/// reads while a sync writes). Every local write is one short transaction that needs no network.
public final class LocalStore: Sendable {
    let pool: DatabasePool
    /// The store file, as opened.
    public let path: String
    /// One sync at a time on this file in this process, whichever `LocalStore` opened it.
    let syncRunner: SyncRunner
    /// Where the login token is kept (by default, this file).
    let credentials: any CredentialStore

    /// Opens the store at `path`. With `create` (the default) a missing file is created, readable
    /// by its owner only (0600, and so are SQLite's `-wal` and `-shm` next to it); without it a
    /// missing file throws `LocalStoreError.noStore` (a mistyped path never becomes an empty
    /// store). A file that is not a readable store throws `LocalStoreError.unreadable`.
    /// `credentials` keeps the token elsewhere than in the file (`CredentialStore`).
    public init(path: String, create: Bool = true, credentials: (any CredentialStore)? = nil) throws {
        self.path = path
        if !FileManager.default.fileExists(atPath: path) {
            guard create else { throw LocalStoreError.noStore(path: path) }
            let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY, 0o600)
            if descriptor >= 0 { close(descriptor) }
        }
        syncRunner = SyncRunner.forStore(atPath: path)
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            // A first sync writes tens of thousands of rows: keep the pages it touches in memory
            // (32 MiB at most), read the file through a map instead of a copy per page, and
            // checkpoint the WAL every ~32 MiB instead of every 4 MiB (hot index pages are then
            // copied back once, not once per pull page).
            try db.execute(sql: "PRAGMA cache_size = -32768; PRAGMA mmap_size = 268435456; PRAGMA wal_autocheckpoint = 8000")
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            try LocalSchema.migrator.migrate(pool)
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode)
                    || error.message?.contains("unknown migration") == true {
            throw LocalStoreError.unreadable(path: path, reason: error.message ?? "\(error.resultCode)")
        }
        self.credentials = credentials ?? StoreFileCredentials(pool: pool)
        try pool.write { db in
            if try Meta.get(db, .deviceID) == nil {
                // One deviceId per local store: a reset store is a new device for echo suppression.
                try Meta.set(db, .deviceID, UUID().uuidString.lowercased())
            }
        }
    }

    /// The device id sent with every push and pull.
    public var deviceID: String {
        get throws { try pool.read { try Meta.get($0, .deviceID)! } }
    }

    // MARK: Reads

    /// Live todos due on `day`, in the contract's order.
    public func todos(on day: Day) throws -> [LocalTodo] {
        try pool.read { try Self.fetchTodos($0, from: day, to: day) }
    }

    /// Live todos due from `from` through `to`, by deadline, then in the contract's order.
    public func todos(from: Day, to: Day) throws -> [LocalTodo] {
        try pool.read { try Self.fetchTodos($0, from: from, to: to) }
    }

    /// Every live todo (for tools and tests), by deadline then in the contract's order.
    public func allTodos() throws -> [LocalTodo] {
        try pool.read { db in
            try TodoRecord.live().fetchAll(db).map(\.value)
        }
    }

    /// One live todo by its local id.
    public func todo(_ localID: Int64) throws -> LocalTodo? {
        try pool.read { db in
            try TodoRecord.live(localID: localID).fetchOne(db)?.value
        }
    }

    /// Live tags, in server id order (tags not yet on the server last, by local id).
    public func tags() throws -> [LocalTag] {
        try pool.read { try Self.fetchTags($0) }
    }

    /// One live tag by its local id.
    public func tag(_ localID: Int64) throws -> LocalTag? {
        try pool.read { db in
            try TagRecord.live().filter(key: localID).fetchOne(db)?.value
        }
    }

    /// The server's statistic for `day`, if the day has one.
    public func dailyStat(for day: Day) throws -> LocalDailyStat? {
        try pool.read { db in
            try DailyStatRecord.live().filter(DailyStatRecord.Columns.date == day.description).fetchOne(db)?.value
        }
    }

    /// Every live daily stat, by date.
    public func dailyStats() throws -> [LocalDailyStat] {
        try pool.read { db in
            try DailyStatRecord.live().fetchAll(db).compactMap(\.value)
        }
    }

    /// Operations waiting for the server (pending or sending).
    public func pendingCount() throws -> Int {
        try pool.read { try OutboxOperation.onTheirWay().fetchCount($0) }
    }

    /// The outbox (pending, sending, rejected) in queue order, then the most recent final
    /// results (newest first, at most `historyLimit`).
    public func operations(historyLimit: Int = 100) throws -> [OperationInfo] {
        try pool.read { db in
            let queued = try OutboxOperation.fetchAll(db).map(\.info)
            let done = try OperationLog.newest(db, limit: historyLimit)
            return queued + done
        }
    }

    /// Where operation `opID` is in its life; nil when unknown (or dropped from the bounded log).
    public func status(ofOperation opID: String) throws -> OperationStatus? {
        try pool.read { db in
            if let op = try OutboxOperation.filter(OutboxOperation.Columns.opID == opID).fetchOne(db) { return op.state }
            return try OperationLog.fetchOne(db, key: opID)?.info.status
        }
    }

    /// Conflicts waiting for the app, oldest first.
    public func conflicts() throws -> [SyncConflict] {
        try pool.read { db in
            try ConflictRecord.inbox(db)
        }
    }

    /// Facts for a status line.
    public struct Status: Sendable, Equatable {
        public var email: String?
        public var deviceID: String
        public var pending: Int
        public var rejected: Int
        public var conflicts: Int
        public var lastSyncAt: String?
        public var lastSyncError: String?
        public var hasCursor: Bool
        /// Set when the server answered 426 `upgrade_required`: this app's schema version is too
        /// old, sync has stopped until the app is upgraded (local data and the queue are kept).
        public var upgradeRequired: UpgradeRequired?
        /// The store has an account but no token: the server refused it (password changed or
        /// session revoked elsewhere, account deleted elsewhere) or the user logged out. Log in
        /// again: records and the queue were kept and the next sync sends them.
        public var signedOut: Bool
    }

    public func status() throws -> Status {
        let signedOut = try token() == nil && hasAccount
        return try pool.read { db in
            Status(
                email: try Meta.get(db, .email), deviceID: try Meta.get(db, .deviceID)!,
                pending: try OutboxOperation.onTheirWay().fetchCount(db),
                rejected: try OutboxOperation.filter(OutboxOperation.Columns.state == OperationStatus.rejected.rawValue).fetchCount(db),
                conflicts: try ConflictRecord.fetchCount(db),
                lastSyncAt: try Meta.get(db, .lastSyncAt), lastSyncError: try Meta.get(db, .lastSyncError),
                hasCursor: try Meta.get(db, .cursor) != nil, upgradeRequired: try Meta.upgradeRequired(db),
                signedOut: signedOut)
        }
    }

    // MARK: Observation

    /// The todos of `day`, now and after every local write or sync that changes them.
    public func observeTodos(on day: Day) -> AsyncThrowingStream<[LocalTodo], Error> {
        observe { try Self.fetchTodos($0, from: day, to: day) }
    }

    /// The live tags, now and after every change.
    public func observeTags() -> AsyncThrowingStream<[LocalTag], Error> {
        observe { try Self.fetchTags($0) }
    }

    /// The number of operations waiting for the server, now and after every change.
    public func observePendingCount() -> AsyncThrowingStream<Int, Error> {
        observe { try OutboxOperation.onTheirWay().fetchCount($0) }
    }

    /// Any query of the store as an async sequence of fresh values (GRDB ValueObservation).
    public func observe<Value: Sendable & Equatable>(
        _ fetch: @escaping @Sendable (Database) throws -> Value
    ) -> AsyncThrowingStream<Value, Error> {
        let values = ValueObservation.tracking(fetch).removeDuplicates().values(in: pool)
        return AsyncThrowingStream { continuation in
            let task = Task {
                do {
                    for try await value in values { continuation.yield(value) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }

    // MARK: Requests shared by reads and observations

    static func fetchTodos(_ db: Database, from: Day, to: Day) throws -> [LocalTodo] {
        try TodoRecord.live(from: from, to: to).fetchAll(db).map(\.value)
    }

    static func fetchTags(_ db: Database) throws -> [LocalTag] {
        try TagRecord.live().fetchAll(db).map(\.value)
    }
}

/// Small facts kept in the `meta` table.
enum Meta {
    enum Key: String {
        case deviceID = "deviceId", cursor, token, userID = "userId", email, server, lastSyncAt, lastSyncError
        /// A full resync (first sync or after 410) is under way with this generation.
        case resyncGeneration
        case resyncActive
        case generation
        /// The oldest schema version any record in the store may have been pulled at (absent:
        /// 1, a store older than versions); a newer client pulls everything again, once.
        case schemaVersion
        /// "MINIMUM CURRENT" from a 426 answer (see `UpgradeRequired`).
        case upgradeRequired
        /// The window the user asked for (`WindowSetting.stored`; absent: the whole account).
        case windowSetting
        /// A purge's date: the window starts no earlier until the setting changes.
        case purgedBefore
        /// The window (`SyncWindow.stored`) the cursor, or the full pull under way, belongs to.
        case pullWindow
        /// The window the device holds completely (after its last complete pull).
        case heldWindow
    }

    static func upgradeRequired(_ db: Database) throws -> UpgradeRequired? {
        guard let parts = try get(db, .upgradeRequired)?.split(separator: " ").compactMap({ Int($0) }), parts.count == 2 else {
            return nil
        }
        return UpgradeRequired(minimum: parts[0], current: parts[1])
    }

    static func get(_ db: Database, _ key: Key) throws -> String? {
        try MetaEntry.fetchOne(db, key: key.rawValue)?.value
    }

    static func set(_ db: Database, _ key: Key, _ value: String?) throws {
        if let value {
            try MetaEntry(key: key.rawValue, value: value).save(db)
        } else {
            try MetaEntry.deleteOne(db, key: key.rawValue)
        }
    }
}
