import Foundation
import GRDB
import TodoSyncCore

// The device's tables as GRDB records: each column is named once, in its record's `Columns`.
// The outbox's records (OutboxOperation, OperationLog, ConflictRecord) are in Outbox/.

/// The columns a tag's and a todo's rows share: identity, what the device last saw of the server's
/// copy, and local visibility.
struct SyncState: Sendable, Equatable {
    enum Columns {
        static let localID = Column("localId")
        static let serverID = Column("id")
        static let clientID = Column("clientId")
        static let clientKey = Column("clientKey")
        static let version = Column("version")
        static let createdAt = Column("createdAt")
        static let updatedAt = Column("updatedAt")
        static let deletedAt = Column("deletedAt")
        static let isDeleted = Column("isDeleted")
        static let seenGeneration = Column("seenGeneration")
        static let shadow = Column("shadow")
    }

    /// This store's handle for the record (nil until inserted).
    var localID: Int64?
    var serverID: Int64?
    /// The id made on a device at creation; `clientKey` is its lower-cased form, for lookups.
    var clientID: String? {
        didSet { clientKey = clientID.map(ClientID.key) }
    }
    private(set) var clientKey: String?
    var version: Int64?
    var createdAt: String?
    var updatedAt: String?
    /// The server's tombstone time.
    var deletedAt: String?
    /// Hidden from the app (a local delete on its way, or a server tombstone with nothing pending).
    var isDeleted = false
    /// The full resync generation that last delivered the record.
    var seenGeneration: Int64 = 0
    /// The server's values of fields a pending operation protects (local terms), kept so that a
    /// rejected operation can show what the server really has.
    var shadow: JSONObject?

    init(clientID: String?, createdAt: String?) {
        self.clientID = clientID
        clientKey = clientID.map(ClientID.key)
        self.createdAt = createdAt
    }

    init(row: Row) {
        localID = row[Columns.localID]
        serverID = row[Columns.serverID]
        clientID = row[Columns.clientID]
        clientKey = row[Columns.clientKey]
        version = row[Columns.version]
        createdAt = row[Columns.createdAt]
        updatedAt = row[Columns.updatedAt]
        deletedAt = row[Columns.deletedAt]
        isDeleted = row[Columns.isDeleted]
        seenGeneration = row[Columns.seenGeneration]
        shadow = (row[Columns.shadow] as String?).map(JSONText.object)
    }

    /// The shared columns and their values, in order.
    func forEachColumn(_ body: (Column, (any DatabaseValueConvertible)?) -> Void) {
        body(Columns.localID, localID)
        body(Columns.serverID, serverID)
        body(Columns.clientID, clientID)
        body(Columns.clientKey, clientKey)
        body(Columns.version, version)
        body(Columns.createdAt, createdAt)
        body(Columns.updatedAt, updatedAt)
        body(Columns.deletedAt, deletedAt)
        body(Columns.isDeleted, isDeleted)
        body(Columns.seenGeneration, seenGeneration)
        body(Columns.shadow, shadow.map(JSONText.encode))
    }

    /// Takes the server's bookkeeping from a record it sent (push result, pull page, tombstone).
    mutating func take(_ record: ServerRecord) {
        serverID = record.id ?? serverID
        if clientID == nil, let sent = record.clientID { clientID = sent }
        version = record.version
        createdAt = record.createdAt ?? createdAt
        updatedAt = record.updatedAt
        deletedAt = record.deletedAt
    }
}

// MARK: - Synced fields (the seam)

/// A tag or a todo row: its `SyncState` and its synced fields.
///
/// The synced fields are named by the contract (in local terms: a todo's tag is `tag`, a local
/// tag handle, where the contract says `tagId`). The outbox (coalescing, base, push payloads,
/// conflicts, rejections) and `ServerRecords` handle them only as a `JSONObject` through this
/// protocol, so they name no field.
///
/// The names follow the shared list of the synced fields (`TodoField`, `TagField` in
/// TodoSyncCore: the contract name, the schema version that introduced each field, its kind and
/// limits); a new field is still named here (its column, `column(_:)`, and the value members), in
/// `ServerRecord`/`PageDecoder` (the wire), in `Validate`, in the public
/// `NewTodo`/`TodoChanges`/`LocalTodo`, and one migration in `LocalSchema` — each held to the list
/// by `SyncedFieldsTests`. Which fields a client of a given schema version sends is
/// `RecordFields.known(_:_:schemaVersion:)`.
protocol SyncedRecord: FetchableRecord, MutablePersistableRecord, Sendable {
    static var entity: EntityKind { get }
    /// The synced fields, local terms.
    static var syncedFieldNames: [String] { get }
    var state: SyncState { get set }
    /// The synced fields' current values, local terms.
    var syncedFields: JSONObject { get }
    /// Sets the named synced fields (local terms); other names are ignored.
    mutating func setSyncedFields(_ fields: JSONObject)
    /// Takes the synced fields a server record carries, except those in `kept` (`tagLocalID`:
    /// the local handle of the record's tag).
    mutating func takeServerFields(_ record: ServerRecord, tagLocalID: Int64?, except kept: Set<String>)
    /// A new row for a record the server sent.
    static func new(from record: ServerRecord, tagLocalID: Int64?) -> Self
    /// Every column of the row and its value, in order: the one list `encode(to:)`,
    /// `insertSQL` and `insertCached` use.
    func forEachColumn(_ body: (Column, (any DatabaseValueConvertible)?) -> Void)
    /// The INSERT of every column, built once per type (`makeInsertSQL()`).
    static var insertSQL: String { get }
}

extension SyncedRecord {
    mutating func didInsert(_ inserted: InsertionSuccess) { state.localID = inserted.rowID }

    func encode(to container: inout PersistenceContainer) {
        forEachColumn { column, value in container[column] = value }
    }

    static func makeInsertSQL() -> String {
        var columns: [String] = []
        new(from: ServerRecord(), tagLocalID: nil).forEachColumn { column, _ in columns.append(column.name.quotedDatabaseIdentifier) }
        return "INSERT INTO \(databaseTableName.quotedDatabaseIdentifier) (\(columns.joined(separator: ", ")))"
            + " VALUES (\(databaseQuestionMarks(count: columns.count)))"
    }

    /// Inserts the row through one cached statement: a first sync inserts every record it
    /// receives, and GRDB's `insert` builds its statement's SQL anew each time.
    mutating func insertCached(_ db: Database) throws {
        let statement = try db.cachedStatement(sql: Self.insertSQL)
        var values: [(any DatabaseValueConvertible)?] = []
        values.reserveCapacity(24)
        forEachColumn { _, value in values.append(value) }
        statement.setUncheckedArguments(StatementArguments(values))
        try statement.execute()
        state.localID = db.lastInsertedRowID
    }

    /// The synced fields a server record carries, local terms.
    static func serverFields(_ record: ServerRecord, tagLocalID: Int64?) -> JSONObject {
        new(from: record, tagLocalID: tagLocalID).syncedFields.filter { record.carries($0.key) }
    }
}

extension ServerRecord {
    /// Whether the record carries the synced field `name` (local terms). A field the record
    /// lacks is "not known at the version it was sent at": the device keeps its own value.
    func carries(_ name: String) -> Bool {
        switch name {
        case "notes": return notes != nil
        case "name": return self.name != nil
        case "color": return color != nil
        case "title": return title != nil
        case "raw": return raw != nil
        case "isImportant": return isImportant != nil
        case "isLife": return isLife != nil
        case "tag": return hasTagID
        case "difficulty": return difficulty != nil
        case "estimatedTime": return estimatedTime != nil
        case "deadline": return deadline != nil
        case "isCompleted": return isCompleted != nil
        default: return false
        }
    }
}

/// A tag's row (`tag`).
struct TagRecord: SyncedRecord, Equatable {
    static let databaseTableName = "tag"
    static let entity = EntityKind.tag
    static let syncedFieldNames = TagField.allCases.map(\.rawValue)

    enum Columns {
        static let name = Column("name")
        static let color = Column("color")
    }

    /// The local column of each synced field (`SyncedFieldsTests` holds the local schema to it).
    static func column(_ field: TagField) -> Column {
        switch field {
        case .name: Columns.name
        case .color: Columns.color
        }
    }

    var state: SyncState
    var name: String
    var color: String

    static func new(from record: ServerRecord, tagLocalID: Int64?) -> TagRecord {
        TagRecord(state: SyncState(clientID: nil, createdAt: nil), name: record.name ?? "", color: record.color ?? "")
    }

    init(state: SyncState, name: String, color: String) {
        self.state = state
        self.name = name
        self.color = color
    }

    init(row: Row) {
        state = SyncState(row: row)
        name = row[Columns.name]
        color = row[Columns.color]
    }

    static let insertSQL = makeInsertSQL()

    func forEachColumn(_ body: (Column, (any DatabaseValueConvertible)?) -> Void) {
        state.forEachColumn(body)
        body(Columns.name, name)
        body(Columns.color, color)
    }

    var syncedFields: JSONObject { ["name": .string(name), "color": .string(color)] }

    mutating func setSyncedFields(_ fields: JSONObject) {
        if let value = fields["name"] { name = value.stringValue ?? "" }
        if let value = fields["color"] { color = value.stringValue ?? "" }
    }

    mutating func takeServerFields(_ record: ServerRecord, tagLocalID: Int64?, except kept: Set<String>) {
        if !kept.contains("name"), let value = record.name { name = value }
        if !kept.contains("color"), let value = record.color { color = value }
    }

    /// Live tags first by server id (tags not on the server yet last, by local id).
    static func live() -> QueryInterfaceRequest<TagRecord> {
        TagRecord.filter(SyncState.Columns.isDeleted == false)
            .order(SyncState.Columns.serverID == nil, SyncState.Columns.serverID, SyncState.Columns.localID)
    }

    var value: LocalTag {
        LocalTag(localID: state.localID ?? 0, serverID: state.serverID, clientID: state.clientID, name: name, color: color,
                 version: state.version, createdAt: state.createdAt, updatedAt: state.updatedAt, deletedAt: state.deletedAt)
    }
}

/// A todo's row (`todo`).
struct TodoRecord: SyncedRecord, Equatable {
    static let databaseTableName = "todo"
    static let entity = EntityKind.todo
    static let syncedFieldNames = TodoField.allCases.map { RecordFields.localName($0.rawValue) }

    enum Columns {
        static let title = Column("title")
        /// The title's sort key (simple-lowercased code points, compared as bytes): derived.
        static let titleKey = Column("titleKey")
        static let raw = Column("raw")
        /// Schema version 2; null in a store only version-1 clients have synced.
        static let notes = Column("notes")
        static let isImportant = Column("isImportant")
        static let isLife = Column("isLife")
        static let tagLocalID = Column("tagLocalId")
        /// A server tag id the todo names before the device has that tag.
        static let pendingTagID = Column("pendingTagId")
        static let difficulty = Column("difficulty")
        static let estimatedTime = Column("estimatedTime")
        static let deadline = Column("deadline")
        static let isCompleted = Column("isCompleted")
    }

    /// The local column of each synced field: a new field does not compile until it has one, and
    /// `SyncedFieldsTests` holds the local schema, the row's columns, `syncedFields` and the
    /// decoded server record to it.
    static func column(_ field: TodoField) -> Column {
        switch field {
        case .title: Columns.title
        case .raw: Columns.raw
        case .notes: Columns.notes
        case .isImportant: Columns.isImportant
        case .isLife: Columns.isLife
        case .tagId: Columns.tagLocalID
        case .difficulty: Columns.difficulty
        case .estimatedTime: Columns.estimatedTime
        case .deadline: Columns.deadline
        case .isCompleted: Columns.isCompleted
        }
    }

    var state: SyncState
    var title: String
    var raw: String
    var notes: String?
    var isImportant = false
    var isLife = false
    var tagLocalID: Int64?
    var pendingTagID: Int64?
    var difficulty: Int64 = 0
    var estimatedTime: Int64 = 0
    var deadline: String
    var isCompleted = false

    static func new(from record: ServerRecord, tagLocalID: Int64?) -> TodoRecord {
        var todo = TodoRecord(state: SyncState(clientID: nil, createdAt: nil), title: "", raw: "", deadline: "2000-01-01")
        todo.takeServerFields(record, tagLocalID: tagLocalID, except: [])
        if record.raw == nil { todo.raw = todo.title }
        return todo
    }

    init(state: SyncState, title: String, raw: String, deadline: String) {
        self.state = state
        self.title = title
        self.raw = raw
        self.deadline = deadline
    }

    init(row: Row) {
        state = SyncState(row: row)
        title = row[Columns.title]
        raw = row[Columns.raw]
        notes = row[Columns.notes]
        isImportant = row[Columns.isImportant]
        isLife = row[Columns.isLife]
        tagLocalID = row[Columns.tagLocalID]
        pendingTagID = row[Columns.pendingTagID]
        difficulty = row[Columns.difficulty]
        estimatedTime = row[Columns.estimatedTime]
        deadline = row[Columns.deadline]
        isCompleted = row[Columns.isCompleted]
    }

    static let insertSQL = makeInsertSQL()

    func forEachColumn(_ body: (Column, (any DatabaseValueConvertible)?) -> Void) {
        state.forEachColumn(body)
        body(Columns.title, title)
        body(Columns.titleKey, Data(TitleOrder.key(title)))
        body(Columns.raw, raw)
        body(Columns.notes, notes)
        body(Columns.isImportant, isImportant)
        body(Columns.isLife, isLife)
        body(Columns.tagLocalID, tagLocalID)
        body(Columns.pendingTagID, pendingTagID)
        body(Columns.difficulty, difficulty)
        body(Columns.estimatedTime, estimatedTime)
        body(Columns.deadline, deadline)
        body(Columns.isCompleted, isCompleted)
    }

    var syncedFields: JSONObject {
        [
            "title": .string(title), "raw": .string(raw), "notes": .optionalString(notes), "isImportant": .bool(isImportant), "isLife": .bool(isLife),
            "tag": .optionalInt(tagLocalID), "difficulty": .int(difficulty), "estimatedTime": .int(estimatedTime),
            "deadline": .string(deadline), "isCompleted": .bool(isCompleted),
        ]
    }

    mutating func setSyncedFields(_ fields: JSONObject) {
        for (name, value) in fields {
            switch name {
            case "title": title = value.stringValue ?? ""
            case "raw": raw = value.stringValue ?? ""
            case "notes": notes = value.stringValue
            case "isImportant": isImportant = value.boolValue ?? false
            case "isLife": isLife = value.boolValue ?? false
            case "tag": tagLocalID = value.int64Value
            case "difficulty": difficulty = value.int64Value ?? 0
            case "estimatedTime": estimatedTime = value.int64Value ?? 0
            case "deadline": deadline = value.stringValue ?? ""
            case "isCompleted": isCompleted = value.boolValue ?? false
            default: continue
            }
        }
    }

    mutating func takeServerFields(_ record: ServerRecord, tagLocalID localTag: Int64?, except kept: Set<String>) {
        func take<T>(_ name: String, _ value: T?, _ field: inout T) {
            if !kept.contains(name), let value { field = value }
        }
        take("title", record.title, &title)
        take("raw", record.raw, &raw)
        // Absent (a version-1 answer, or a push result stored before an upgrade): keep ours.
        take("notes", record.notes, &notes)
        take("isImportant", record.isImportant, &isImportant)
        take("isLife", record.isLife, &isLife)
        take("difficulty", record.difficulty, &difficulty)
        take("estimatedTime", record.estimatedTime, &estimatedTime)
        take("deadline", record.deadline, &deadline)
        take("isCompleted", record.isCompleted, &isCompleted)
        if record.hasTagID, !kept.contains("tag") {
            tagLocalID = localTag
            // A tag the device does not have yet: linked when it arrives.
            pendingTagID = localTag == nil ? record.tagID : nil
        }
    }

    /// The todo's tag (a todo whose tag is deleted shows no tag, but keeps the link until the
    /// server sends it un-tagged, so a tag delete that conflicts loses nothing).
    static let tag = belongsTo(TagRecord.self, key: "tag", using: ForeignKey([Columns.tagLocalID], to: [SyncState.Columns.localID]))

    /// Live todos due from `from` through `to` (all when nil; only `localID` when given), in the
    /// contract's order.
    static func live(from: Day? = nil, to: Day? = nil, localID: Int64? = nil) -> QueryInterfaceRequest<TodoWithTag> {
        var request = TodoRecord.filter(SyncState.Columns.isDeleted == false)
        if let from, let to { request = request.filter((from.description...to.description).contains(Columns.deadline)) }
        if let localID { request = request.filter(key: localID) }
        return request
            .including(optional: tag)
            .order(Columns.deadline, Columns.isImportant.desc, SyncState.Columns.createdAt.desc, Columns.titleKey,
                   SyncState.Columns.serverID, SyncState.Columns.localID)
            .asRequest(of: TodoWithTag.self)
    }
}

/// A todo with its tag, as the app sees it.
struct TodoWithTag: FetchableRecord {
    var todo: TodoRecord
    var tag: TagRecord?

    init(row: Row) {
        todo = TodoRecord(row: row)
        tag = row["tag"]
    }

    var value: LocalTodo {
        let tagIsLive = tag?.state.isDeleted == false
        return LocalTodo(
            localID: todo.state.localID ?? 0, serverID: todo.state.serverID, clientID: todo.state.clientID, title: todo.title,
            raw: todo.raw, notes: todo.notes, isImportant: todo.isImportant, isLife: todo.isLife, tagLocalID: tagIsLive ? todo.tagLocalID : nil,
            tagServerID: tagIsLive ? tag?.state.serverID : nil, difficulty: Int(todo.difficulty), estimatedTime: Int(todo.estimatedTime),
            deadline: Day(todo.deadline)!, isCompleted: todo.isCompleted, version: todo.state.version,
            createdAt: todo.state.createdAt ?? "", updatedAt: todo.state.updatedAt, deletedAt: todo.state.deletedAt)
    }
}

/// The row of a tag or a todo, whichever `entity` says.
enum SyncedRecords {
    static func type(_ entity: EntityKind) -> any SyncedRecord.Type {
        entity == .tag ? TagRecord.self : TodoRecord.self
    }

    static func fetch(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> (any SyncedRecord)? {
        switch entity {
        case .tag: return try TagRecord.fetchOne(db, key: localID)
        case .todo: return try TodoRecord.fetchOne(db, key: localID)
        }
    }

    /// The rows of `entity`, for requests that need no record type.
    static func table(_ entity: EntityKind) -> Table<Row> { Table(entity.rawValue) }
}

/// A daily statistic's row (`dailyStat`): the server's JSON, as sent.
struct DailyStatRecord: FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "dailyStat"

    enum Columns {
        static let id = Column("id")
        static let date = Column("date")
        static let version = Column("version")
        static let deletedAt = Column("deletedAt")
        static let json = Column("json")
        static let seenGeneration = Column("seenGeneration")
    }

    var id: Int64
    var date: String
    var version: Int64?
    var deletedAt: String?
    var json: String
    var seenGeneration: Int64

    init(id: Int64, date: String, version: Int64?, json: String, seenGeneration: Int64) {
        self.id = id
        self.date = date
        self.version = version
        self.json = json
        self.seenGeneration = seenGeneration
    }

    init(row: Row) {
        id = row[Columns.id]
        date = row[Columns.date]
        version = row[Columns.version]
        deletedAt = row[Columns.deletedAt]
        json = row[Columns.json]
        seenGeneration = row[Columns.seenGeneration]
    }

    func encode(to container: inout PersistenceContainer) {
        container[Columns.id] = id
        container[Columns.date] = date
        container[Columns.version] = version
        container[Columns.deletedAt] = deletedAt
        container[Columns.json] = json
        container[Columns.seenGeneration] = seenGeneration
    }

    /// Live stats, by date.
    static func live() -> QueryInterfaceRequest<DailyStatRecord> {
        DailyStatRecord.filter(Columns.deletedAt == nil).order(Columns.date)
    }

    var value: LocalDailyStat? { LocalDailyStat(json: json) }
}

/// One small fact of the `meta` table (see `Meta`).
struct MetaEntry: FetchableRecord, PersistableRecord, Sendable {
    static let databaseTableName = "meta"

    enum Columns {
        static let key = Column("key")
        static let value = Column("value")
    }

    var key: String
    var value: String?

    init(key: String, value: String?) {
        self.key = key
        self.value = value
    }

    init(row: Row) {
        key = row[Columns.key]
        value = row[Columns.value]
    }

    func encode(to container: inout PersistenceContainer) {
        container[Columns.key] = key
        container[Columns.value] = value
    }
}
