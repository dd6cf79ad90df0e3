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
/// limits); a todo's row, `ServerRecord`, the page decoder and the local schema derive from it,
/// and the public `NewTodo`/`TodoChanges`/`LocalTodo` name each field in a switch the compiler
/// forces — each held to the list by `SyncedFieldsTests`. Which fields a client of a given schema version sends is
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
    func carries(_ name: String) -> Bool { self[contractKey: RecordFields.contractName(name)] != nil }
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

/// A todo's row (`todo`): its synced fields are held, read, written and taken from the server by
/// the list (`TodoField`), so a new field needs no edit here (its local column is named by its
/// key, typed by its kind: `LocalSchema` adds it).
struct TodoRecord: SyncedRecord, Equatable {
    static let databaseTableName = "todo"
    static let entity = EntityKind.todo
    static let syncedFieldNames = TodoField.allCases.map { RecordFields.localName($0.rawValue) }

    /// The columns named outside the list: those the app's queries and the snapshot install use,
    /// and the two derived ones.
    enum Columns {
        static let title = column(.title)
        /// The title's sort key (simple-lowercased code points, compared as bytes): derived.
        static let titleKey = Column("titleKey")
        static let raw = column(.raw)
        static let isImportant = column(.isImportant)
        static let tagLocalID = Column("tagLocalId")
        /// A server tag id the todo names before the device has that tag.
        static let pendingTagID = Column("pendingTagId")
        static let deadline = column(.deadline)
    }

    /// The local column of each synced field: the field's key (its tag is `tagLocalId`, a local
    /// handle). `SyncedFieldsTests` holds the local schema, the row's columns, `syncedFields`
    /// and the decoded server record to it.
    static func column(_ field: TodoField) -> Column { field == .tagId ? Columns.tagLocalID : Column(field.key) }

    var state: SyncState
    /// Every synced field's value, local terms (`tag`: a local tag handle), each of its kind.
    private(set) var syncedFields: JSONObject
    var pendingTagID: Int64?

    var title: String { syncedFields["title"]?.stringValue ?? "" }
    var raw: String { syncedFields["raw"]?.stringValue ?? "" }
    var tagLocalID: Int64? { syncedFields["tag"]?.int64Value }

    static func new(from record: ServerRecord, tagLocalID: Int64?) -> TodoRecord {
        var todo = TodoRecord(state: SyncState(clientID: nil, createdAt: nil), title: "", raw: "", deadline: "2000-01-01")
        todo.takeServerFields(record, tagLocalID: tagLocalID, except: [])
        if record[TodoField.raw] == nil { todo.syncedFields["raw"] = .string(todo.title) }
        return todo
    }

    /// A todo with every other field at its kind's default (`null` where the field is nullable).
    init(state: SyncState, title: String, raw: String, deadline: String) {
        self.state = state
        var fields: JSONObject = [:]
        for field in TodoField.allCases { fields[RecordFields.localName(field.key)] = Self.normalized(.null, field) }
        fields["title"] = .string(title)
        fields["raw"] = .string(raw)
        fields["deadline"] = .string(deadline)
        syncedFields = fields
    }

    init(row: Row) {
        state = SyncState(row: row)
        var fields: JSONObject = [:]
        for field in TodoField.allCases {
            let value: JSONValue
            switch field.kind {
            case .text, .day, .instant: value = (row[Self.column(field)] as String?).map(JSONValue.string) ?? .null
            case .bool: value = (row[Self.column(field)] as Bool?).map(JSONValue.bool) ?? .null
            case .integer, .reference: value = .optionalInt(row[Self.column(field)] as Int64?)
            }
            fields[RecordFields.localName(field.key)] = Self.normalized(value, field)
        }
        syncedFields = fields
        pendingTagID = row[Columns.pendingTagID]
    }

    static let insertSQL = makeInsertSQL()

    func forEachColumn(_ body: (Column, (any DatabaseValueConvertible)?) -> Void) {
        state.forEachColumn(body)
        body(Columns.titleKey, Data(TitleOrder.key(title)))
        for field in TodoField.allCases {
            let value = syncedFields[RecordFields.localName(field.key)] ?? .null
            switch value {
            case .string(let text): body(Self.column(field), text)
            case .bool(let flag): body(Self.column(field), flag)
            case .null: body(Self.column(field), nil)
            default: body(Self.column(field), value.int64Value)
            }
        }
        body(Columns.pendingTagID, pendingTagID)
    }

    /// A value as the field's kind holds it: what is not of the kind is the kind's default (as
    /// when each field was a typed property: text `""`, `false`, `0`), `null` where nullable.
    static func normalized(_ value: JSONValue, _ field: TodoField) -> JSONValue {
        switch field.kind {
        case .text, .day, .instant: value.stringValue.map(JSONValue.string) ?? (field.isNullable ? .null : .string(""))
        case .bool: .bool(value.boolValue ?? false)
        case .integer: .int(value.int64Value ?? 0)
        case .reference: .optionalInt(value.int64Value)
        }
    }

    mutating func setSyncedFields(_ fields: JSONObject) {
        for field in TodoField.allCases {
            let name = RecordFields.localName(field.key)
            if let value = fields[name] { syncedFields[name] = Self.normalized(value, field) }
        }
    }

    mutating func takeServerFields(_ record: ServerRecord, tagLocalID localTag: Int64?, except kept: Set<String>) {
        for field in TodoField.allCases where field != .tagId {
            // Absent (a field newer than the answer's version, or a push result stored before an
            // upgrade): keep ours.
            guard !kept.contains(field.key), let value = record[field] else { continue }
            syncedFields[field.key] = Self.normalized(value, field)
        }
        if record.hasTagID, !kept.contains("tag") {
            syncedFields["tag"] = .optionalInt(localTag)
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
        var local = LocalTodo(
            localID: todo.state.localID ?? 0, serverID: todo.state.serverID, clientID: todo.state.clientID,
            version: todo.state.version, createdAt: todo.state.createdAt ?? "", updatedAt: todo.state.updatedAt,
            deletedAt: todo.state.deletedAt)
        for field in TodoField.allCases where field != .tagId {
            local.set(field, todo.syncedFields[field.key] ?? .null)
        }
        local.tagLocalID = tagIsLive ? todo.tagLocalID : nil
        local.tagServerID = tagIsLive ? tag?.state.serverID : nil
        return local
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

    var value: LocalDailyStat? {
        guard let parsed = try? JSONParser.parse(Array(json.utf8)), let object = parsed.objectValue,
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
