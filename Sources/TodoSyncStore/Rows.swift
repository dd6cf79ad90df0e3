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
