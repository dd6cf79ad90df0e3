import MariaDB
import TodoSyncCore

/// Row → model mappings for the column lists in `SQL`.
extension Tag {
    init(row: Row) {
        self.init(
            id: row.int64(0)!, clientID: row.string(1), name: row.string(2)!, color: row.string(3)!,
            version: row.int64(4)!,
            createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(5)!),
            updatedAt: Timestamp.rfc3339(fromDatabaseText: row.string(6)!),
            deletedAt: row.string(7).map(Timestamp.rfc3339(fromDatabaseText:)))
    }
}

extension Todo {
    init(row: Row) {
        self.init(
            id: row.int64(0)!, clientID: row.string(1), title: row.string(2)!, raw: row.string(3)!,
            isImportant: row.bool(4)!, isLife: row.bool(5)!, tagID: row.int64(6), difficulty: row.int(7)!,
            estimatedTime: row.int(8)!, deadline: Day(row.string(9)!)!, isCompleted: row.bool(10)!,
            version: row.int64(11)!,
            createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(12)!),
            updatedAt: Timestamp.rfc3339(fromDatabaseText: row.string(13)!),
            deletedAt: row.string(14).map(Timestamp.rfc3339(fromDatabaseText:)))
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
