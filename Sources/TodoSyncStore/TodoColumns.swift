import MariaDB
import TodoSyncCore

/// The columns of `todos` that make a `Todo`, described once. Their order is the SELECT list
/// (`SQL.Todos.columns`) and the positions `Todo(row:)` decodes; `content` names the columns a
/// create and an update write from the record, with how each value is bound, so the statements
/// (`SQL.Todos.insert`, `.update`) and their parameters come from one list. A new todo field is a
/// case here, a line in `content` (if clients write it), the model and its JSON writer.
enum TodoColumn: Int, CaseIterable, Sendable {
    case id, clientID, title, raw, isImportant, isLife, tagID, difficulty, estimatedTime, deadline, isCompleted
    case version, createdAt, updatedAt, deletedAt

    var name: String {
        switch self {
        case .id: "id"
        case .clientID: "client_id"
        case .title: "title"
        case .raw: "raw"
        case .isImportant: "is_important"
        case .isLife: "is_life"
        case .tagID: "tag_id"
        case .difficulty: "difficulty"
        case .estimatedTime: "estimated_time"
        case .deadline: "deadline"
        case .isCompleted: "is_completed"
        case .version: "version"
        case .createdAt: "created_at"
        case .updatedAt: "updated_at"
        case .deletedAt: "deleted_at"
        }
    }

    /// The position of the column in `selectList`.
    var index: Int { rawValue }

    /// Every column, in order, for a SELECT.
    static let selectList = allCases.map(\.name).joined(separator: ", ")

    /// The record's content: what a create writes from the draft and an update rewrites, with the
    /// value each binds.
    static let content: [(column: TodoColumn, value: @Sendable (Todo) -> DatabaseValue)] = [
        (.title, { .text($0.title) }),
        (.raw, { .text($0.raw) }),
        (.isImportant, { .bool($0.isImportant) }),
        (.isLife, { .bool($0.isLife) }),
        (.tagID, { .optionalInt($0.tagID) }),
        (.difficulty, { .int(Int64($0.difficulty)) }),
        (.estimatedTime, { .int(Int64($0.estimatedTime)) }),
        (.deadline, { .day($0.deadline) }),
        (.isCompleted, { .bool($0.isCompleted) }),
    ]

    /// The names of the `content` columns, comma-separated.
    static let contentNames = content.map(\.column.name).joined(separator: ", ")

    /// The `content` columns' values of `todo`, in `contentNames` order.
    static func contentValues(of todo: Todo) -> [DatabaseValue] {
        content.map { $0.value(todo) }
    }
}
