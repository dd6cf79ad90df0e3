import MariaDB
import TodoSyncCore

/// The kinds of synced records as `sync_feed.kind` stores them; also the order of a pull page.
enum FeedKind: Int64, CaseIterable, Sendable {
    case tag = 1, todo = 2, dailyStat = 3
}

/// One record's row of the change feed (`sync_feed`): its latest state, rendered once, at write
/// time, by the same writers the REST responses and push results use.
struct FeedEntry: Equatable {
    let kind: FeedKind
    let recordID: Int64
    let version: Int64
    /// When the record was deleted (database text); nil for a live record.
    let deletedAt: String?
    /// The device whose pushed operation made this version; nil for REST and derived changes.
    let device: Int64?
    /// The tags a live record refers to, comma-separated ("" for none).
    let parentTags: String
    /// The record's JSON, or its tombstone's.
    let body: [UInt8]

    init(_ tag: Tag, device: Int64?) {
        self.init(kind: .tag, id: tag.id, clientID: tag.clientID, version: tag.version, deletedAt: tag.deletedAt,
                  device: device, parents: []) { tag.write(to: &$0) }
    }

    init(_ todo: Todo, device: Int64?) {
        self.init(kind: .todo, id: todo.id, clientID: todo.clientID, version: todo.version, deletedAt: todo.deletedAt,
                  device: device, parents: todo.tagID.map { [$0] } ?? []) { todo.write(to: &$0) }
    }

    /// Daily stats are always derived: they never carry a device.
    init(_ stat: DailyStat) {
        self.init(kind: .dailyStat, id: stat.id, clientID: nil, version: stat.version, deletedAt: stat.deletedAt,
                  device: nil, parents: stat.content.tagIDs) { stat.write(to: &$0) }
    }

    private init(kind: FeedKind, id: Int64, clientID: String?, version: Int64, deletedAt: String?, device: Int64?,
                 parents: [Int64], live: (inout JSONWriter) -> Void) {
        self.kind = kind
        recordID = id
        self.version = version
        self.device = device
        var writer = JSONWriter(reservingCapacity: 400)
        if let deletedAt {
            self.deletedAt = Timestamp.databaseText(fromRFC3339: deletedAt)
            parentTags = ""
            // The contract's Tombstone.
            writer.beginObject()
            writer.field("id", id)
            writer.field("clientId", clientID)
            writer.field("version", version)
            writer.field("deletedAt", deletedAt)
            writer.endObject()
        } else {
            self.deletedAt = nil
            parentTags = parents.map(String.init).joined(separator: ",")
            live(&writer)
        }
        body = writer.bytes
    }

    /// A row as `sync_feed` holds it.
    init(stored kind: FeedKind, recordID: Int64, version: Int64, deletedAt: String?, device: Int64?,
         parentTags: String, body: [UInt8]) {
        self.kind = kind
        self.recordID = recordID
        self.version = version
        self.deletedAt = deletedAt
        self.device = device
        self.parentTags = parentTags
        self.body = body
    }

    /// The bound values of one row of `SQL.Feed.upsert`.
    func values(userID: Int64) -> [DatabaseValue] {
        [.int(userID), .int(version), .int(kind.rawValue), .int(recordID), .optionalText(deletedAt),
         .optionalInt(device), .text(parentTags), .blob(body)]
    }
}

/// The feed rows a write transaction has produced, one per record (a record changed twice keeps
/// its last state), written together before commit; with them, the todos' list rows
/// (`todo_list`, GET /todos), which hold the same rendered JSON.
struct FeedBatch {
    private(set) var entries: [FeedEntry] = []
    private var positions: [Key: Int] = [:]
    /// The final state of every todo written, by id, in order of first write.
    private var todos: [Int64: Todo] = [:]
    private var todoOrder: [Int64] = []

    private struct Key: Hashable {
        let kind: FeedKind
        let id: Int64
    }

    var isEmpty: Bool { entries.isEmpty }

    /// A todo's new state: its feed row and its list row.
    mutating func add(_ todo: Todo, device: Int64?) {
        add(FeedEntry(todo, device: device))
        if todos.updateValue(todo, forKey: todo.id) == nil { todoOrder.append(todo.id) }
    }

    mutating func add(_ entry: FeedEntry) {
        let key = Key(kind: entry.kind, id: entry.recordID)
        if let index = positions[key] {
            entries[index] = entry
        } else {
            positions[key] = entries.count
            entries.append(entry)
        }
    }

    /// Writes the entries, replacing each record's previous row, `SQL.Feed.batch` rows per
    /// statement; then the todos' list rows (deleted todos leave the list).
    /// `rebuilding`: the user's list was emptied first, so deleted todos have no row to remove.
    func write(userID: Int64, to db: Connection, rebuilding: Bool = false) throws {
        try writeFeed(userID: userID, to: db)
        for id in todoOrder where todos[id]!.deletedAt != nil && !rebuilding {
            try db.execute(SQL.TodoList.delete, [.int(userID), .int(id)])
        }
        try TodoListRow.write(listRows, userID: userID, to: db)
    }

    /// The list rows of the live todos written.
    var listRows: [TodoListRow] {
        todoOrder.compactMap { id in
            let todo = todos[id]!
            guard todo.deletedAt == nil else { return nil }
            return TodoListRow(todo, body: entries[positions[Key(kind: .todo, id: id)]!].body)
        }
    }

    private func writeFeed(userID: Int64, to db: Connection) throws {
        var remaining = entries[...]
        while !remaining.isEmpty {
            let (size, sql) = remaining.count >= SQL.Feed.batch ? (SQL.Feed.batch, SQL.Feed.upsertBatch)
                : remaining.count >= 8 ? (8, SQL.Feed.upsertEight) : (1, SQL.Feed.upsertOne)
            var values: [DatabaseValue] = []
            values.reserveCapacity(size * 8)
            for entry in remaining.prefix(size) { values += entry.values(userID: userID) }
            try db.execute(sql, values)
            remaining = remaining.dropFirst(size)
        }
    }
}

/// A live todo's row of `todo_list`: its list-order key and its rendered JSON.
struct TodoListRow: Equatable {
    let id: Int64
    let deadline: Day
    let isImportant: Bool
    /// Database text.
    let createdAt: String
    let titleKey: [UInt8]
    let body: [UInt8]

    init(_ todo: Todo, body: [UInt8]) {
        id = todo.id
        deadline = todo.deadline
        isImportant = todo.isImportant
        createdAt = Timestamp.databaseText(fromRFC3339: todo.createdAt)
        titleKey = TitleOrder.key(todo.title)
        self.body = body
    }

    init(id: Int64, deadline: Day, isImportant: Bool, createdAt: String, titleKey: [UInt8], body: [UInt8]) {
        self.id = id
        self.deadline = deadline
        self.isImportant = isImportant
        self.createdAt = createdAt
        self.titleKey = titleKey
        self.body = body
    }

    /// Inserts or moves the rows, `SQL.TodoList.batch` per statement.
    static func write(_ rows: [TodoListRow], userID: Int64, to db: Connection) throws {
        var remaining = rows[...]
        while !remaining.isEmpty {
            let (size, sql) = remaining.count >= SQL.TodoList.batch ? (SQL.TodoList.batch, SQL.TodoList.replaceBatch)
                : remaining.count >= 8 ? (8, SQL.TodoList.replaceEight) : (1, SQL.TodoList.replaceOne)
            var values: [DatabaseValue] = []
            values.reserveCapacity(size * 7)
            for row in remaining.prefix(size) {
                values += [.int(userID), .day(row.deadline), .bool(row.isImportant), .text(row.createdAt),
                           .blob(row.titleKey), .int(row.id), .blob(row.body)]
            }
            try db.execute(sql, values)
            remaining = remaining.dropFirst(size)
        }
    }
}

extension Timestamp {
    /// `2026-11-21T10:00:00.000Z` → `2026-11-21 10:00:00.000` (the DATETIME(3) text form).
    static func databaseText(fromRFC3339 text: String) -> String {
        String(text.dropLast(text.hasSuffix("Z") ? 1 : 0).map { $0 == "T" ? " " : $0 })
    }
}
