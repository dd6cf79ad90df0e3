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

    public var description: String {
        switch self {
        case .validation(let field, let problem): return "\(field) \(problem)"
        case .notFound: return "no such record"
        case .otherAccount(let email): return "this local store belongs to \(email); use one store file per account"
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

    /// Opens (creating if needed) the store at `path`.
    public init(path: String) throws {
        self.path = path
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
        pool = try DatabasePool(path: path, configuration: configuration)
        try LocalSchema.migrator.migrate(pool)
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
            try Row.fetchAll(db, sql: Self.todoSelect + " WHERE todo.isDeleted = 0" + Self.todoOrder).map(Self.todo(row:))
        }
    }

    /// One live todo by its local id.
    public func todo(_ localID: Int64) throws -> LocalTodo? {
        try pool.read { db in
            try Row.fetchOne(db, sql: Self.todoSelect + " WHERE todo.localId = ? AND todo.isDeleted = 0", arguments: [localID])
                .map(Self.todo(row:))
        }
    }

    /// Live tags, in server id order (tags not yet on the server last, by local id).
    public func tags() throws -> [LocalTag] {
        try pool.read { try Self.fetchTags($0) }
    }

    /// One live tag by its local id.
    public func tag(_ localID: Int64) throws -> LocalTag? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM tag WHERE localId = ? AND isDeleted = 0", arguments: [localID]).map(Self.tag(row:))
        }
    }

    /// The server's statistic for `day`, if the day has one.
    public func dailyStat(for day: Day) throws -> LocalDailyStat? {
        try pool.read { db in
            try Row.fetchOne(db, sql: "SELECT json FROM dailyStat WHERE date = ? AND deletedAt IS NULL", arguments: [day.description])
                .flatMap { Self.dailyStat(json: $0[0]) }
        }
    }

    /// Every live daily stat, by date.
    public func dailyStats() throws -> [LocalDailyStat] {
        try pool.read { db in
            try Row.fetchAll(db, sql: "SELECT json FROM dailyStat WHERE deletedAt IS NULL ORDER BY date")
                .compactMap { Self.dailyStat(json: $0[0]) }
        }
    }

    /// Operations waiting for the server (pending or sending).
    public func pendingCount() throws -> Int {
        try pool.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')")! }
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
            if let state = try String.fetchOne(db, sql: "SELECT state FROM outbox WHERE opId = ?", arguments: [opID]) {
                return OperationStatus(rawValue: state)
            }
            return try String.fetchOne(db, sql: "SELECT status FROM operationLog WHERE opId = ?", arguments: [opID])
                .flatMap(OperationStatus.init(rawValue:))
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
    }

    public func status() throws -> Status {
        try pool.read { db in
            Status(
                email: try Meta.get(db, .email), deviceID: try Meta.get(db, .deviceID)!,
                pending: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')")!,
                rejected: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM outbox WHERE state = 'rejected'")!,
                conflicts: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM conflict")!,
                lastSyncAt: try Meta.get(db, .lastSyncAt), lastSyncError: try Meta.get(db, .lastSyncError),
                hasCursor: try Meta.get(db, .cursor) != nil)
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
        observe { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM outbox WHERE state IN ('pending', 'sending')")! }
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

    // MARK: Row mapping (one place per table)

    /// A todo whose tag is deleted (locally, or by the server) shows no tag; the link itself stays
    /// until the server sends the todo un-tagged, so a tag delete that conflicts loses nothing.
    static let todoSelect = """
        SELECT todo.*, tag.id AS tagServerId, tag.isDeleted AS tagIsDeleted
        FROM todo LEFT JOIN tag ON tag.localId = todo.tagLocalId
        """
    static let todoOrder = " ORDER BY todo.deadline, todo.isImportant DESC, todo.createdAt DESC, todo.titleKey, todo.id, todo.localId"

    static func fetchTodos(_ db: Database, from: Day, to: Day) throws -> [LocalTodo] {
        try Row.fetchAll(
            db, sql: todoSelect + " WHERE todo.deadline BETWEEN ? AND ? AND todo.isDeleted = 0" + todoOrder,
            arguments: [from.description, to.description]
        ).map(todo(row:))
    }

    static func fetchTags(_ db: Database) throws -> [LocalTag] {
        try Row.fetchAll(db, sql: "SELECT * FROM tag WHERE isDeleted = 0 ORDER BY id IS NULL, id, localId").map(tag(row:))
    }

    static func todo(row: Row) -> LocalTodo {
        let tagIsLive = (row["tagIsDeleted"] as Bool?) == false
        return LocalTodo(
            localID: row["localId"], serverID: row["id"], clientID: row["clientId"], title: row["title"], raw: row["raw"],
            isImportant: row["isImportant"], isLife: row["isLife"], tagLocalID: tagIsLive ? row["tagLocalId"] : nil,
            tagServerID: tagIsLive ? row["tagServerId"] : nil, difficulty: row["difficulty"], estimatedTime: row["estimatedTime"],
            deadline: Day(row["deadline"] as String)!, isCompleted: row["isCompleted"], version: row["version"],
            createdAt: row["createdAt"], updatedAt: row["updatedAt"], deletedAt: row["deletedAt"])
    }

    static func tag(row: Row) -> LocalTag {
        LocalTag(
            localID: row["localId"], serverID: row["id"], clientID: row["clientId"], name: row["name"], color: row["color"],
            version: row["version"], createdAt: row["createdAt"], updatedAt: row["updatedAt"], deletedAt: row["deletedAt"])
    }

    static func dailyStat(json: String) -> LocalDailyStat? {
        guard let value = try? JSONParser.parse(Array(json.utf8)), let object = value.objectValue,
              let id = object["id"]?.int64Value, let date = object["date"]?.stringValue.flatMap(Day.init),
              let balance = object["balance"]?.objectValue, let center = object["center"]?.objectValue else { return nil }
        let tagStats = (object["tagStats"]?.arrayValue ?? []).compactMap { item -> LocalDailyStat.TagStat? in
            guard let stat = item.objectValue, let tagID = stat["tagId"]?.int64Value else { return nil }
            return LocalDailyStat.TagStat(
                tagID: tagID, name: stat["name"]?.stringValue ?? "", color: stat["color"]?.stringValue ?? "",
                count: Int(stat["count"]?.int64Value ?? 0))
        }
        return LocalDailyStat(
            serverID: id, date: date, todoCount: Int(object["todoCount"]?.int64Value ?? 0),
            completedCount: Int(object["completedCount"]?.int64Value ?? 0),
            productivityNum: object["productivityNum"]?.doubleValue ?? 0, balanceNum: Int(balance["num"]?.int64Value ?? 0),
            balanceTitle: balance["title"]?.stringValue ?? "", balanceMessage: balance["message"]?.stringValue ?? "",
            tagStats: tagStats, centerX: center["x"]?.doubleValue ?? 0, centerY: center["y"]?.doubleValue ?? 0,
            version: object["version"]?.int64Value ?? 0, createdAt: object["createdAt"]?.stringValue ?? "",
            updatedAt: object["updatedAt"]?.stringValue ?? "", json: json)
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
    }

    static func get(_ db: Database, _ key: Key) throws -> String? {
        try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key.rawValue])
    }

    static func set(_ db: Database, _ key: Key, _ value: String?) throws {
        if let value {
            try db.execute(sql: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                           arguments: [key.rawValue, value])
        } else {
            try db.execute(sql: "DELETE FROM meta WHERE key = ?", arguments: [key.rawValue])
        }
    }
}
