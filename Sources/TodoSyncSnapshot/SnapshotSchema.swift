import TodoSyncCore

/// The tables of a snapshot file (docs/SNAPSHOT.md) at one schema version, derived from the
/// record writers themselves: a sample record of each kind is rendered exactly as pull renders
/// it at that version (`Tag.write(to:schemaVersion:)`, `Todo.write(to:schemaVersion:)`,
/// `DailyStat.write(to:)`), and its members, in order, are the columns (`deletedAt` left out:
/// every row is live). A field added to a record reaches the snapshot with no edit here.
struct SnapshotTable {
    let name: String
    let kind: FeedKind
    /// Column names (the JSON member names) and declared types, `id` first.
    let columns: [(name: String, type: String)]
    /// Whether the table also keeps the whole record as rendered (`daily_stats.json`).
    let keepsJSON: Bool

    /// The `CREATE TABLE` statement.
    var createSQL: String {
        var parts = columns.map { column in
            column.name == "id" ? "\"id\" INTEGER PRIMARY KEY" : "\"\(column.name)\" \(column.type)"
        }
        if keepsJSON { parts.append("\"json\" TEXT NOT NULL") }
        return "CREATE TABLE \(name) (\(parts.joined(separator: ", ")))"
    }

    /// The insert of one row: parameter i is column i (1-based, `columns` order), then the whole
    /// record for `json` when the table keeps it. `SnapshotTableWriter` binds them.
    var insertSQL: String {
        var names = columns.map { "\"\($0.name)\"" }
        if keepsJSON { names.append("\"json\"") }
        let values = (1...names.count).map { "?\($0)" }
        return "INSERT INTO \(name) (\(names.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))"
    }

    /// The tables of `schemaVersion`, parents first.
    static func tables(schemaVersion: Int) -> [SnapshotTable] {
        let time = "2026-01-01T00:00:00.000Z"
        let day = Day("2026-01-01")!
        var tag = JSONWriter()
        Tag(id: 1, clientID: "c", name: "n", color: "#000000", version: 1, createdAt: time, updatedAt: time,
            deletedAt: nil).write(to: &tag, schemaVersion: schemaVersion)
        var todo = JSONWriter()
        var sample = sampleTodo()
        sample.id = 1
        sample.clientID = "c"
        sample.version = 1
        sample.createdAt = time
        sample.updatedAt = time
        sample.write(to: &todo, schemaVersion: schemaVersion)
        var stat = JSONWriter()
        DailyStat(id: 1, date: day,
                  content: DailyStatContent(todoCount: 1, completedCount: 1, productivityHundredths: 150, balanceNum: 1,
                                            tagStatsJSON: "[]", centerXHundredths: 150, centerYHundredths: 150),
                  version: 1, createdAt: time, updatedAt: time, deletedAt: nil).write(to: &stat)
        return [
            SnapshotTable(name: "tags", kind: .tag, sample: tag.bytes, keepsJSON: false),
            SnapshotTable(name: "todos", kind: .todo, sample: todo.bytes, keepsJSON: false),
            SnapshotTable(name: "daily_stats", kind: .dailyStat, sample: stat.bytes, keepsJSON: true),
        ]
    }

    /// A todo with every synced field set (none `null`, so each has a type), from the field list
    /// through the create parsing: a new field needs no edit here.
    private static func sampleTodo() -> Todo {
        var fields: [String: JSONValue] = [:]
        for field in TodoField.allCases {
            fields[field.key] = switch field.kind {
            case .text: .string("t")
            case .bool: .bool(true)
            case .integer, .reference: .number(JSONNumber(literal: "1"))
            case .day: .string("2026-01-01")
            case .instant: .string("2026-01-01T00:00:00.000Z")
            }
        }
        var reader = FieldReader(object: fields)
        // Valid by construction (every limit admits these values).
        return try! TodoDraft.parse(&reader).content
    }

    private init(name: String, kind: FeedKind, sample: [UInt8], keepsJSON: Bool) {
        self.name = name
        self.kind = kind
        self.keepsJSON = keepsJSON
        columns = JSONMemberFilter.members(of: sample).filter { $0.key != "deletedAt" }.map { member in
            (member.key, Self.declaredType(ofSample: member.value))
        }
    }

    /// docs/SNAPSHOT.md's mapping, from a sample value (never `null`: every sample field is set).
    private static func declaredType(ofSample value: [UInt8]) -> String {
        switch value.first {
        case UInt8(ascii: "t"), UInt8(ascii: "f"): "INTEGER"
        case UInt8(ascii: "\""), UInt8(ascii: "{"), UInt8(ascii: "["): "TEXT"
        default: value.contains(UInt8(ascii: ".")) ? "REAL" : "INTEGER"
        }
    }
}
