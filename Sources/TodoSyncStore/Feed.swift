import MariaDB
import TodoSyncCore

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
    /// `sync_feed.live_day` (Sql/031), database text: a live todo's deadline, a live daily
    /// stat's date, `FeedEntry.tagDay` for a live tag, nil for a tombstone. A window's first pull
    /// reads by it.
    let liveDay: String?

    /// The `live_day` of every live tag: before every date a window can have, so that a window's
    /// first pull, reading by `live_day`, reads the tags first.
    static let tagDay = "1000-01-01"

    init(_ tag: Tag, device: Int64?) {
        self.init(kind: .tag, id: tag.id, clientID: tag.clientID, version: tag.version, deletedAt: tag.deletedAt,
                  device: device, parents: [], day: FeedEntry.tagDay) { tag.write(to: &$0) }
    }

    /// `rendered`: the live todo's JSON (`Todo.write(to:)`) when the caller has it already.
    init(_ todo: Todo, device: Int64?, rendered: [UInt8]? = nil) {
        self.init(kind: .todo, id: todo.id, clientID: todo.clientID, version: todo.version, deletedAt: todo.deletedAt,
                  device: device, parents: todo.tagID.map { [$0] } ?? [], day: todo.deadline.description,
                  rendered: rendered) { todo.write(to: &$0) }
    }

    /// Daily stats are always derived: they never carry a device.
    init(_ stat: DailyStat) {
        self.init(kind: .dailyStat, id: stat.id, clientID: nil, version: stat.version, deletedAt: stat.deletedAt,
                  device: nil, parents: stat.content.tagIDs, day: stat.date.description) { stat.write(to: &$0) }
    }

    private init(kind: FeedKind, id: Int64, clientID: String?, version: Int64, deletedAt: String?, device: Int64?,
                 parents: [Int64], day: String, rendered: [UInt8]? = nil, live: (inout JSONWriter) -> Void) {
        self.kind = kind
        liveDay = deletedAt == nil ? day : nil
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
            if let rendered {
                body = rendered
                return
            }
            live(&writer)
        }
        body = writer.bytes
    }

    /// A row as `sync_feed` holds it.
    init(stored kind: FeedKind, recordID: Int64, version: Int64, deletedAt: String?, device: Int64?,
         parentTags: String, body: [UInt8], liveDay: String?) {
        self.kind = kind
        self.liveDay = liveDay
        self.recordID = recordID
        self.version = version
        self.deletedAt = deletedAt
        self.device = device
        self.parentTags = parentTags
        self.body = body
    }

    /// The bound values of one row of `SQL.Feed.insert`.
    func values(userID: Int64) -> [DatabaseValue] {
        [.int(userID), .int(version), .int(kind.rawValue), .int(recordID), .optionalText(deletedAt),
         .optionalInt(device), .text(parentTags), .blob(body), .optionalText(liveDay)]
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
    /// Records created by this transaction: they have no feed or list row to remove.
    private var created: Set<Key> = []

    private struct Key: Hashable {
        let kind: FeedKind
        let id: Int64
    }

    var isEmpty: Bool { entries.isEmpty }

    /// A todo's new state: its feed row and its list row. `rendered`: as `FeedEntry.init`;
    /// `isNew`: as `add(_:isNew:)`.
    mutating func add(_ todo: Todo, device: Int64?, rendered: [UInt8]? = nil, isNew: Bool = false) {
        add(FeedEntry(todo, device: device, rendered: rendered), isNew: isNew)
        if todos.updateValue(todo, forKey: todo.id) == nil { todoOrder.append(todo.id) }
    }

    /// A record's new state. `isNew`: this transaction created the record (its first state), so
    /// it has no row yet; any other record's row is removed before its new one is inserted.
    mutating func add(_ entry: FeedEntry, isNew: Bool = false) {
        let key = Key(kind: entry.kind, id: entry.recordID)
        if let index = positions[key] {
            entries[index] = entry
        } else {
            positions[key] = entries.count
            entries.append(entry)
            if isNew { created.insert(key) }
        }
    }

    /// Writes the entries, replacing each record's previous row, then the todos' list rows
    /// (deleted todos leave the list), in multi-row statements (`MultiRowStatement`: a
    /// 100-record push in three). The previous rows of records this transaction did not create
    /// are deleted first and the new ones inserted: both tables are ordered by other columns
    /// than the record's unique key, so an upsert meeting that key inserted into the clustered
    /// index, undid it and then moved the row (measured 1.6× the time of the delete and insert for
    /// feed rows, 1.2× for list rows). Then the stored day lists (`todo_days`) of every date whose
    /// list rows were deleted or inserted (`TodoDayRows.write`). `rebuilding`: the user's feed,
    /// list and day lists were emptied first.
    func write(userID: Int64, to db: Connection, rebuilding: Bool = false) throws {
        let listRows = listRows
        var days = Set(listRows.map(\.deadline))
        if !rebuilding {
            for kind in FeedKind.allCases {
                let ids = entries.filter { $0.kind == kind && !created.contains(Key(kind: kind, id: $0.recordID)) }
                    .map { DatabaseValue.int($0.recordID) }
                for list in SQL.Feed.delete.lists(ids) {
                    try db.execute(SQL.Feed.delete.sql, [.int(userID), .int(kind.rawValue)] + list)
                }
            }
            let replaced = todoOrder.filter { !created.contains(Key(kind: .todo, id: $0)) }.map(DatabaseValue.int)
            for list in SQL.TodoList.delete.lists(replaced) {
                for row in try db.query(SQL.TodoList.delete.sql, [.int(userID)] + list) {
                    days.insert(Day(row.string(OnlyColumn.value)!)!)  // `RETURNING deadline`, a NOT NULL DATE
                }
            }
        }
        for chunk in SQL.Feed.insert.chunks(entries.count) {
            var values: [DatabaseValue] = []
            values.reserveCapacity(chunk.rows.count * FeedColumn.allCases.count)
            for entry in entries[chunk.rows] { values += entry.values(userID: userID) }
            try db.execute(chunk.sql, values)
        }
        try TodoListRow.write(listRows, userID: userID, to: db)
        try TodoDayRows.write(days, userID: userID, to: db, emptied: rebuilding)
    }

    /// The list rows of the live todos written.
    var listRows: [TodoListRow] {
        todoOrder.compactMap { id in
            let todo = todos[id]!
            guard todo.deletedAt == nil else { return nil }
            return TodoListRow(todo, body: entries[positions[Key(kind: .todo, id: id)]!].body)
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

    /// Inserts the rows (a todo's previous row was deleted first), in multi-row statements.
    static func write(_ rows: [TodoListRow], userID: Int64, to db: Connection) throws {
        for chunk in SQL.TodoList.insert.chunks(rows.count) {
            var values: [DatabaseValue] = []
            values.reserveCapacity(chunk.rows.count * 7)
            for row in rows[chunk.rows] {
                values += [.int(userID), .day(row.deadline), .bool(row.isImportant), .text(row.createdAt),
                           .blob(row.titleKey), .int(row.id), .blob(row.body)]
            }
            try db.execute(chunk.sql, values)
        }
    }
}

/// The stored day lists (`todo_days`, GET /todos?date=): what a write does to the dates it
/// touched, and what they must hold (`check-feed`).
enum TodoDayRows {
    /// Rebuilds the rows of `days` from the user's list rows when they are at most
    /// `SQL.TodoDays.rebuildLimit` (one delete and one rebuild statement) or `emptied`
    /// (`rebuild-feed`: the user's rows were deleted first, and every date is rebuilt, that many
    /// dates per statement); marks them not stored otherwise.
    static func write(_ days: Set<Day>, userID: Int64, to db: Connection, emptied: Bool = false) throws {
        let dates = days.sorted()
        guard emptied || dates.count <= SQL.TodoDays.rebuildLimit else {
            for chunk in SQL.TodoDays.unstore.chunks(dates.count) {
                try db.execute(chunk.sql, dates[chunk.rows].flatMap { [.int(userID), .day($0)] })
            }
            return
        }
        for list in SQL.TodoDays.delete.lists(dates.map(DatabaseValue.day)) {
            if !emptied { try db.execute(SQL.TodoDays.delete.sql, [.int(userID)] + list) }
            try db.execute(SQL.TodoDays.rebuild.sql, [.int(userID)] + list)
        }
    }

    /// The body each date with live todos stores, given the user's live list rows: its rows'
    /// bodies in list order joined by commas; nil for a list longer than
    /// `SQL.TodoDays.maxBodyBytes` (never stored).
    static func expected(_ rows: [TodoListRow]) -> [Day: [UInt8]?] {
        var byDay: [Day: [TodoListRow]] = [:]
        for row in rows { byDay[row.deadline, default: []].append(row) }
        return byDay.mapValues { rows in
            let body = Array(rows.sorted(by: TodoListRow.precedes).map(\.body).joined(separator: [UInt8(ascii: ",")]))
            return body.count <= SQL.TodoDays.maxBodyBytes ? body : nil
        }
    }
}

extension TodoListRow {
    /// The contract's list order within a date (`SQL.TodoList.dayOrder`): important first, then
    /// created newest first, then the title key bytewise, then the id.
    static func precedes(_ a: TodoListRow, _ b: TodoListRow) -> Bool {
        if a.isImportant != b.isImportant { return a.isImportant }
        if a.createdAt != b.createdAt { return a.createdAt > b.createdAt }
        if a.titleKey != b.titleKey { return a.titleKey.lexicographicallyPrecedes(b.titleKey) }
        return a.id < b.id
    }
}

extension Timestamp {
    /// `2026-11-21T10:00:00.000Z` → `2026-11-21 10:00:00.000` (the DATETIME(3) text form).
    static func databaseText(fromRFC3339 text: String) -> String {
        String(text.dropLast(text.hasSuffix("Z") ? 1 : 0).map { $0 == "T" ? " " : $0 })
    }
}

extension SQL {
    /// The rendered live todos in the contract's list order (Sql/008_todo_list.sql).
    enum TodoList {
        /// Inserts todos' list rows (`FeedBatch.write` deleted their previous ones). Parameters per
        /// row: user, deadline, important, created, title key, id, body.
        static let insert = MultiRowStatement(columns: 7) { rows in
            "INSERT INTO todo_list (user_id, deadline, is_important, created_at, title_key, id, body) VALUES \(rows)"
        }
        /// Removes todos' list rows (deleted todos', and the previous rows of changed ones) and
        /// answers each removed row's date (its stored day list is rebuilt, `TodoDays`).
        /// Parameters: user, then the ids.
        static let delete = InListStatement(size: 128) { ids in
            "DELETE FROM todo_list WHERE user_id = ? AND id IN (\(ids)) RETURNING deadline"
        }
        static let deleteOfUser = "DELETE FROM todo_list WHERE user_id = ?"
        /// The owner's list rows with deadlines from `from` to `to`, in the contract's order: the
        /// primary key's order, one range read. Parameters: the owner's, from, to.
        static func bodiesInRange(_ owner: ReadOwner) -> String {
            """
            SELECT l.body, \(owner.userID(alias: "l")) FROM \(owner.from("todo_list l", alias: "l"))
             WHERE \(owner.condition(alias: "l")) AND l.deadline BETWEEN ? AND ?
             ORDER BY \(order)
            """
        }
        /// The contract's list order, the primary key's (after user_id).
        static let order = "l.deadline, \(dayOrder)"
        /// The same within one date.
        static let dayOrder = "l.is_important DESC, l.created_at DESC, l.title_key, l.id"
        static let bodiesInRangeForUser = bodiesInRange(.user)
        static let bodiesInRangeForToken = bodiesInRange(.token)
        /// Every list row of a user (check-feed). Columns: id, deadline, is_important,
        /// created_at, title_key, body.
        static let ofUser = """
            SELECT id, deadline, is_important, created_at, title_key, body FROM todo_list WHERE user_id = ?
            """
        enum RowColumn: Int, ResultColumns { case id, deadline, isImportant, createdAt, titleKey, body }
    }
}
