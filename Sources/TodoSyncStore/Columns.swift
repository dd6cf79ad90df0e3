import MariaDB
import TodoSyncCore

/// The columns of a table that make a record, described once. Their order (the cases') is the
/// SELECT list (`selectList`) and the positions the record's `init(row:)` decodes; `content` names
/// the columns a create and an update write from the record, with how each value is bound, so the
/// statements (`SQL.Todos.insert`, `.update`, likewise for tags) and their parameters come from one
/// list. A new field is a case, a line in `content` (if clients write it), the model and its JSON
/// writer.
protocol RecordColumns: RawRepresentable<Int>, CaseIterable, Sendable where AllCases == [Self] {
    associatedtype Record
    /// The column's name in SQL.
    var sqlName: String { get }
    /// The record's content: what a create writes from the draft and an update rewrites, with the
    /// value each binds.
    static var content: [(column: Self, value: @Sendable (Record) -> DatabaseValue)] { get }
}

extension RecordColumns {
    /// The position of the column in `selectList`.
    var index: Int { rawValue }

    /// Every column, in order, for a SELECT.
    static var selectList: String { allCases.map(\.sqlName).joined(separator: ", ") }

    /// The names of the `content` columns, comma-separated (an INSERT's column list).
    static var contentNames: String { content.map(\.column.sqlName).joined(separator: ", ") }

    /// `name = ?` for each `content` column, comma-separated (an UPDATE's SET list).
    static var contentAssignments: String { content.map { "\($0.column.sqlName) = ?" }.joined(separator: ", ") }

    /// `count` placeholders more than the `content` columns (an INSERT's VALUES list).
    static func placeholders(contentPlus count: Int) -> String {
        Array(repeating: "?", count: content.count + count).joined(separator: ", ")
    }

    /// The `content` columns' values of `record`, in `contentNames` order.
    static func contentValues(of record: Record) -> [DatabaseValue] {
        content.map { $0.value(record) }
    }
}

/// The columns of `todos` that make a `Todo` (`Todo(row:)`).
enum TodoColumn: Int, RecordColumns {
    case id, clientID, title, raw, isImportant, isLife, tagID, difficulty, estimatedTime, deadline, isCompleted
    case version, createdAt, updatedAt, deletedAt

    var sqlName: String {
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
}

/// The columns of `tags` that make a `Tag` (`Tag(row:)`).
enum TagColumn: Int, RecordColumns {
    case id, clientID, name, color, version, createdAt, updatedAt, deletedAt

    var sqlName: String {
        switch self {
        case .id: "id"
        case .clientID: "client_id"
        case .name: "name"
        case .color: "color"
        case .version: "version"
        case .createdAt: "created_at"
        case .updatedAt: "updated_at"
        case .deletedAt: "deleted_at"
        }
    }

    static let content: [(column: TagColumn, value: @Sendable (Tag) -> DatabaseValue)] = [
        (.name, { .text($0.name) }),
        (.color, { .text($0.color) }),
    ]
}
