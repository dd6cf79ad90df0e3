import MariaDB
import TodoSyncCore

/// The columns of a table that make a record, described once. Their order (the cases') is the
/// SELECT list (`selectList`) and the positions the record's `init(row:)` decodes; `content` names
/// the columns a create and an update write from the record, with how each value is bound, so the
/// statements (`SQL.Todos.insert`, `.update`, likewise for tags) and their parameters come from one
/// list. A synced field's column is named by the field (`TodoField.column`) and its binding comes
/// from the field's value; a new field is a case here, mapped in `init(_:)`.
protocol RecordColumns: TableColumns {
    associatedtype Record
    /// The record's content: what a create writes from the draft and an update rewrites, with the
    /// value each binds.
    static var content: [(column: Self, value: @Sendable (Record) -> DatabaseValue)] { get }
}

extension RecordColumns {
    /// The SQL name of a bookkeeping column every record table has (the cases `TodoColumn` and
    /// `TagColumn` share, by name); a synced field's column is named by its field instead.
    static func bookkeepingSQLName(of column: Self) -> String {
        switch "\(column)" {
        case "id": return "id"
        case "clientID": return "client_id"
        case "version": return "version"
        case "createdAt": return "created_at"
        case "updatedAt": return "updated_at"
        case "deletedAt": return "deleted_at"
        default: preconditionFailure("\(column) is a synced field's column (\(Self.self).init(_:))")
        }
    }
}

/// The columns of a table, described once, in SELECT-list order (`ColumnsTests` checks that they
/// are every column of the migrated table, but those a table names as not being its record's).
protocol TableColumns: RawRepresentable<Int>, CaseIterable, Sendable where AllCases == [Self] {
    /// The column's name in SQL.
    var sqlName: String { get }
    /// Columns of the table that are not part of what this description reads (the owner, keys).
    static var notDescribed: Set<String> { get }
}

extension TableColumns {
    /// The position of the column in `selectList`.
    var index: Int { rawValue }

    /// Every column, in order, for a SELECT.
    static var selectList: String { allCases.map(\.sqlName).joined(separator: ", ") }
}

extension RecordColumns {

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

/// The columns of `todos` that make a `Todo` (`Todo(row:)`): its bookkeeping, and a column for
/// each synced field (`TodoField`, which names it and whose values `content` binds).
enum TodoColumn: Int, RecordColumns {
    case id, clientID, title, raw, notes, remindAt, isImportant, isLife, tagID, difficulty, estimatedTime, deadline, isCompleted
    case version, createdAt, updatedAt, deletedAt

    /// The column of a synced field (a new field does not compile until it has one).
    init(_ field: TodoField) {
        switch field {
        case .title: self = .title
        case .raw: self = .raw
        case .notes: self = .notes
        case .remindAt: self = .remindAt
        case .isImportant: self = .isImportant
        case .isLife: self = .isLife
        case .tagId: self = .tagID
        case .difficulty: self = .difficulty
        case .estimatedTime: self = .estimatedTime
        case .deadline: self = .deadline
        case .isCompleted: self = .isCompleted
        }
    }

    /// The synced field the column holds (nil: bookkeeping).
    var field: TodoField? { TodoField.allCases.first { TodoColumn($0) == self } }

    var sqlName: String { field?.column ?? Self.bookkeepingSQLName(of: self) }

    static let notDescribed: Set<String> = ["user_id", "client_key", "changed_by_device"]

    /// Every synced field, in `TodoField` order, bound as its value (`FieldValue`).
    static let content: [(column: TodoColumn, value: @Sendable (Todo) -> DatabaseValue)] = TodoField.allCases.map { field in
        (TodoColumn(field), { field.databaseValue(field.value(of: $0)) })
    }
}

/// The columns of `tags` that make a `Tag` (`Tag(row:)`), as `TodoColumn` for todos.
enum TagColumn: Int, RecordColumns {
    case id, clientID, name, color, version, createdAt, updatedAt, deletedAt

    /// The column of a synced field.
    init(_ field: TagField) {
        switch field {
        case .name: self = .name
        case .color: self = .color
        }
    }

    /// The synced field the column holds (nil: bookkeeping).
    var field: TagField? { TagField.allCases.first { TagColumn($0) == self } }

    var sqlName: String { field?.column ?? Self.bookkeepingSQLName(of: self) }

    static let notDescribed: Set<String> = ["user_id", "client_key", "changed_by_device"]

    /// Every synced field, in `TagField` order, bound as text.
    static let content: [(column: TagColumn, value: @Sendable (Tag) -> DatabaseValue)] = TagField.allCases.map { field in
        (TagColumn(field), { .text(field.text(of: $0)) })
    }
}

extension SyncedField {
    /// The value bound to the field's column: `FieldValue.databaseValue`, an instant as the
    /// `DATETIME(3)` text MariaDB takes (`Todo(row:)` reads it back with `Timestamp`).
    func databaseValue(_ value: FieldValue) -> DatabaseValue {
        if kind == .instant, case .string(let text) = value, let time = Timestamp(rfc3339Input: text) { return .timestamp(time) }
        return value.databaseValue
    }
}

extension FieldValue {
    /// The value bound to a synced field's column: text, an integer (a boolean as 0 or 1, as
    /// `DatabaseValue.bool`), or NULL. A date is its `YYYY-MM-DD` text, as `DatabaseValue.day`.
    var databaseValue: DatabaseValue {
        switch self {
        case .null: .null
        case .bool(let flag): .bool(flag)
        case .int(let value): .int(value)
        case .string(let text): .text(text)
        }
    }
}

/// The columns of `daily_stats` that make a `DailyStat` (`DailyStat(row:)`, `DailyStatRowJSON`).
enum DailyStatColumn: Int, TableColumns {
    case id, day, todoCount, completedCount, productivityHundredths, balanceNum, centerXHundredths
    case centerYHundredths, tagStats, version, createdAt, updatedAt, deletedAt

    var sqlName: String {
        switch self {
        case .id: "id"
        case .day: "day"
        case .todoCount: "todo_count"
        case .completedCount: "completed_count"
        case .productivityHundredths: "productivity_hundredths"
        case .balanceNum: "balance_num"
        case .centerXHundredths: "center_x_hundredths"
        case .centerYHundredths: "center_y_hundredths"
        case .tagStats: "tag_stats"
        case .version: "version"
        case .createdAt: "created_at"
        case .updatedAt: "updated_at"
        case .deletedAt: "deleted_at"
        }
    }

    /// The owner, and the stat's inputs (`DailyAggregateColumn`), which a `DailyStat` does not show.
    static let notDescribed: Set<String> = Set(["user_id"] + DailyAggregateColumn.allCases.map(\.sqlName))
}

/// The columns of `daily_stats` that hold a date's `DailyAggregate` next to its stat (Sql/023),
/// with `todo_count` and `completed_count`, which the stat and its aggregate share. The write
/// path applies each todo's change to them as a delta (`DailyStatsRecomputer`).
enum DailyAggregateColumn: Int, TableColumns {
    case weightedMinutes, lifeMinutes, workMinutes, tagCounts

    var sqlName: String {
        switch self {
        case .weightedMinutes: "weighted_minutes"
        case .lifeMinutes: "life_minutes"
        case .workMinutes: "work_minutes"
        case .tagCounts: "tag_counts"
        }
    }

    static let notDescribed: Set<String> = Set(["user_id", "todo_count", "completed_count"]
        + DailyStatColumn.allCases.map(\.sqlName))
}

/// The columns of `users`, each with what it holds; the statements in `SQL.Users`, `.Quotas`,
/// `.Pull` and `.Purge` name them.
enum UserColumn: Int, TableColumns {
    /// The account; its email as given, and the key it is found by (Sql/018); the password hash.
    case id, email, emailKey, passwordHash
    /// The last version handed out (the per-user write lock's row, `SQL.Users.lockForWrite`).
    case changeSeq
    case createdAt
    /// The newest purged tombstone's version (pull's `cursor_expired`).
    case purgedThrough
    /// The account's own quotas (NULL: the configured defaults), and its live records (Sql/012, 017, 020).
    case quotaRecords, quotaOperationsPerHour, liveRecords, quotaStoredBytesPerHour
    /// When the account was deleted (Sql/022): unreachable at once, erased by `todosync purge`.
    case deletedAt
    /// At least the version of every tag of the user, live or deleted (Sql/024): a pull page
    /// starting at or above it skips its parent-tag lookup.
    case tagSeq
    /// The account's own ceiling on its Idempotency-Key records (NULL: the configured defaults, Sql/028).
    case quotaIdempotencyKeys, quotaIdempotencyBytes
    /// The name the account shows its friends (Sql/032; NULL until set; `SQL.Friends`).
    case nickname

    var sqlName: String {
        switch self {
        case .id: "id"
        case .email: "email"
        case .emailKey: "email_key"
        case .passwordHash: "password_hash"
        case .changeSeq: "change_seq"
        case .createdAt: "created_at"
        case .purgedThrough: "purged_through"
        case .quotaRecords: "quota_records"
        case .quotaOperationsPerHour: "quota_operations_per_hour"
        case .liveRecords: "live_records"
        case .quotaStoredBytesPerHour: "quota_stored_bytes_per_hour"
        case .deletedAt: "deleted_at"
        case .tagSeq: "tag_seq"
        case .quotaIdempotencyKeys: "quota_idempotency_keys"
        case .quotaIdempotencyBytes: "quota_idempotency_bytes"
        case .nickname: "nickname"
        }
    }

    static let notDescribed: Set<String> = []
}

/// The columns of the change feed, `sync_feed` (Sql/007), in the order `SQL.Feed.insert` writes
/// them (`FeedEntry.values`).
enum FeedColumn: Int, TableColumns {
    case userID, version, kind, recordID, deletedAt, device, parentTags, body, liveDay

    var sqlName: String {
        switch self {
        case .liveDay: "live_day"
        case .userID: "user_id"
        case .version: "version"
        case .kind: "kind"
        case .recordID: "record_id"
        case .deletedAt: "deleted_at"
        case .device: "device"
        case .parentTags: "parent_tags"
        case .body: "body"
        }
    }

    static let notDescribed: Set<String> = []
}
