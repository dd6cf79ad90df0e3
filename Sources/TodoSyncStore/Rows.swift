import MariaDB
import TodoSyncCore

/// Row → model mappings for the column lists in `SQL`.
extension Tag {
    /// A row of `SQL.Tags.columns`, by `TagColumn` position.
    init(row: Row) {
        typealias C = TagColumn
        self.init(
            id: row.int64(C.id.index)!, clientID: row.string(C.clientID.index), name: row.string(C.name.index)!,
            color: row.string(C.color.index)!, version: row.int64(C.version.index)!,
            createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.createdAt.index)!),
            updatedAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.updatedAt.index)!),
            deletedAt: row.string(C.deletedAt.index).map(Timestamp.rfc3339(fromDatabaseText:)))
    }
}

extension Todo {
    /// A row of `SQL.Todos.columns`, by `TodoColumn` position.
    init(row: Row) {
        typealias C = TodoColumn
        self.init(
            id: row.int64(C.id.index)!, clientID: row.string(C.clientID.index), title: row.string(C.title.index)!,
            raw: row.string(C.raw.index)!, notes: row.string(C.notes.index),
            remindAt: row.string(C.remindAt.index).map(Timestamp.rfc3339(fromDatabaseText:)), isImportant: row.bool(C.isImportant.index)!, isLife: row.bool(C.isLife.index)!,
            tagID: row.int64(C.tagID.index), difficulty: row.int(C.difficulty.index)!,
            estimatedTime: row.int(C.estimatedTime.index)!, deadline: Day(row.string(C.deadline.index)!)!,
            isCompleted: row.bool(C.isCompleted.index)!, version: row.int64(C.version.index)!,
            createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.createdAt.index)!),
            updatedAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.updatedAt.index)!),
            deletedAt: row.string(C.deletedAt.index).map(Timestamp.rfc3339(fromDatabaseText:)))
    }
}

extension DatabaseValue {
    /// A nullable text value.
    static func optionalText(_ text: String?) -> DatabaseValue { text.map { .text($0) } ?? .null }
    /// A nullable integer value.
    static func optionalInt(_ value: Int64?) -> DatabaseValue { value.map { .int($0) } ?? .null }
    static func bool(_ flag: Bool) -> DatabaseValue { .int(flag ? 1 : 0) }
    static func timestamp(_ time: Timestamp) -> DatabaseValue { .text(time.databaseText) }
    static func day(_ day: Day) -> DatabaseValue { .text(day.description) }
}

/// The columns of one statement's result rows, as an enum whose cases are in SELECT order,
/// declared beside the statement (`SQL.Account.SessionColumn`, …): a row is read by a case, never
/// by a literal position, so a column added to or moved in the SELECT list is one edit in one place.
protocol ResultColumns: RawRepresentable<Int> {}

/// The one column of a single-column result (`SELECT id …`, `SELECT COUNT(*) …`).
enum OnlyColumn: Int, ResultColumns {
    case value
}

extension Row {
    func int64(_ column: some ResultColumns) -> Int64? { int64(column.rawValue) }
    func int(_ column: some ResultColumns) -> Int? { int(column.rawValue) }
    func bool(_ column: some ResultColumns) -> Bool? { bool(column.rawValue) }
    func string(_ column: some ResultColumns) -> String? { string(column.rawValue) }
    func bytes(_ column: some ResultColumns) -> [UInt8]? { bytes(column.rawValue) }
}

extension RowCursor {
    func isNull(_ column: some ResultColumns) -> Bool { isNull(column.rawValue) }
    func int64(_ column: some ResultColumns) throws(DatabaseError) -> Int64? { try int64(column.rawValue) }
    func bool(_ column: some ResultColumns) throws(DatabaseError) -> Bool? { try bool(column.rawValue) }
    func withBytes(_ column: some ResultColumns, _ body: (UnsafeRawBufferPointer) -> Void) throws(DatabaseError) -> Bool {
        try withBytes(column.rawValue, body)
    }
    func dateTime(_ column: some ResultColumns) -> DateTimeParts? { dateTime(column.rawValue) }
}
