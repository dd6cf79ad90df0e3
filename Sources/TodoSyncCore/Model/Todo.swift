/// A user's todo, as stored and as sent to clients.
public struct Todo: Sendable, Equatable {
    public var id: Int64
    public var clientID: String?
    public var title: String
    public var raw: String
    /// Free text, kept exactly as given (schema version 2).
    public var notes: String?
    /// When to remind the user, in the contract's UTC form (schema version 3).
    public var remindAt: String?
    public var isImportant: Bool
    public var isLife: Bool
    public var tagID: Int64?
    public var difficulty: Int
    public var estimatedTime: Int
    public var deadline: Day
    public var isCompleted: Bool
    public var version: Int64
    /// RFC 3339 with milliseconds.
    public var createdAt: String
    public var updatedAt: String
    public var deletedAt: String?

    public init(id: Int64, clientID: String?, title: String, raw: String, notes: String? = nil, remindAt: String? = nil, isImportant: Bool, isLife: Bool,
                tagID: Int64?, difficulty: Int, estimatedTime: Int, deadline: Day, isCompleted: Bool,
                version: Int64, createdAt: String, updatedAt: String, deletedAt: String?) {
        self.id = id
        self.clientID = clientID
        self.title = title
        self.raw = raw
        self.notes = notes
        self.remindAt = remindAt
        self.isImportant = isImportant
        self.isLife = isLife
        self.tagID = tagID
        self.difficulty = difficulty
        self.estimatedTime = estimatedTime
        self.deadline = deadline
        self.isCompleted = isCompleted
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
    }

    /// Writes the contract's Todo object at the current schema version (REST, the change feed).
    public func write(to writer: inout JSONWriter) { write(to: &writer, schemaVersion: SchemaVersion.current) }

    /// Writes the contract's Todo object with the fields of schema version `schema` (`TodoField.since`).
    public func write(to writer: inout JSONWriter, schemaVersion schema: Int) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("clientId", clientID)
        for field in TodoField.allCases where field.since <= schema {
            writer.key(field.rawValue)
            field.writeValue(of: self, to: &writer)
        }
        writer.syncFields(version: version, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt)
        writer.endObject()
    }

    /// Whether two versions of a todo differ in no synced content field.
    public func hasSameContent(as other: Todo) -> Bool {
        TodoField.allCases.allSatisfy { $0.value(of: self) == $0.value(of: other) }
    }
}

/// The synced content fields of a todo (what a client writes), described once (`SyncedField`):
/// the contract name, the schema version that introduced the field, its kind, limits and
/// nullability, its server column and type, and how it is read, written, compared and patched.
/// The order of the cases is the order of the JSON object. The switches are exhaustive, so a new
/// case does not compile until every use knows it; what cannot switch over it is checked against
/// it by `SyncedFieldsTests` and `ColumnsTests`.
public enum TodoField: String, SyncedField {
    case title, raw, notes, remindAt, isImportant, isLife, tagId, difficulty, estimatedTime, deadline, isCompleted

    /// The schema version that introduced the field.
    public var since: Int {
        switch self {
        case .title, .raw, .isImportant, .isLife, .tagId, .difficulty, .estimatedTime, .deadline, .isCompleted: 1
        case .notes: 2
        case .remindAt: 3
        }
    }

    public var kind: FieldKind {
        switch self {
        case .title, .raw, .notes: .text
        case .isImportant, .isLife, .isCompleted: .bool
        case .difficulty, .estimatedTime: .integer
        case .deadline: .day
        case .remindAt: .instant
        case .tagId: .reference
        }
    }

    // The validation limits (API.md "Todos"), the one copy (server and client).
    public static let titleLength = 1...200
    public static let rawLength = 0...2000
    public static let notesLength = 0...10_000
    public static let difficultyRange: ClosedRange<Int64> = 0...5
    public static let estimatedTimeRange: ClosedRange<Int64> = 0...1440

    public var length: ClosedRange<Int>? {
        switch self {
        case .title: Self.titleLength
        case .raw: Self.rawLength
        case .notes: Self.notesLength
        case .remindAt, .isImportant, .isLife, .tagId, .difficulty, .estimatedTime, .deadline, .isCompleted: nil
        }
    }

    public var refusesBlank: Bool { self == .title }

    public var range: ClosedRange<Int64>? {
        switch self {
        case .difficulty: Self.difficultyRange
        case .estimatedTime: Self.estimatedTimeRange
        case .title, .raw, .notes, .remindAt, .isImportant, .isLife, .tagId, .deadline, .isCompleted: nil
        }
    }

    /// Whether `null` is a value of the field (else a `null` in a patch is a validation problem).
    public var isNullable: Bool {
        switch self {
        case .tagId, .notes, .remindAt: true
        case .title, .raw, .isImportant, .isLife, .difficulty, .estimatedTime, .deadline, .isCompleted: false
        }
    }

    /// The column of `todos` (`TodoColumn` takes its name from here).
    public var column: String {
        switch self {
        case .title: "title"
        case .raw: "raw"
        case .notes: "notes"
        case .remindAt: "remind_at"
        case .isImportant: "is_important"
        case .isLife: "is_life"
        case .tagId: "tag_id"
        case .difficulty: "difficulty"
        case .estimatedTime: "estimated_time"
        case .deadline: "deadline"
        case .isCompleted: "is_completed"
        }
    }

    /// As Sql/001, Sql/021 and Sql/030 declare it (`ColumnsTests` compares it with the migrated table).
    public var columnType: String {
        switch self {
        case .title: "VARCHAR(200)"
        case .raw: "VARCHAR(2000)"
        case .notes: "TEXT"
        case .remindAt: "DATETIME(3)"
        case .isImportant, .isLife, .isCompleted: "TINYINT(1)"
        case .tagId: "BIGINT UNSIGNED"
        case .difficulty: "TINYINT UNSIGNED"
        case .estimatedTime: "SMALLINT UNSIGNED"
        case .deadline: "DATE"
        }
    }

    /// The field's value in `todo`, comparable across the record, `data` and `base` (merge).
    public func value(of todo: Todo) -> FieldValue {
        switch self {
        case .title: .string(todo.title)
        case .raw: .string(todo.raw)
        case .notes: todo.notes.map(FieldValue.string) ?? .null
        case .remindAt: todo.remindAt.map(FieldValue.string) ?? .null
        case .isImportant: .bool(todo.isImportant)
        case .isLife: .bool(todo.isLife)
        case .tagId: todo.tagID.map(FieldValue.int) ?? .null
        case .difficulty: .int(Int64(todo.difficulty))
        case .estimatedTime: .int(Int64(todo.estimatedTime))
        case .deadline: .string(todo.deadline.description)
        case .isCompleted: .bool(todo.isCompleted)
        }
    }

    /// Writes the field's JSON value (its key is written by the caller).
    func writeValue(of todo: Todo, to writer: inout JSONWriter) {
        switch self {
        case .title: writer.string(todo.title)
        case .raw: writer.string(todo.raw)
        case .notes: writer.optionalString(todo.notes)
        case .remindAt: writer.optionalString(todo.remindAt)
        case .isImportant: writer.bool(todo.isImportant)
        case .isLife: writer.bool(todo.isLife)
        case .tagId: writer.optionalInt(todo.tagID)
        case .difficulty: writer.int(Int64(todo.difficulty))
        case .estimatedTime: writer.int(Int64(todo.estimatedTime))
        case .deadline: writer.day(todo.deadline)
        case .isCompleted: writer.bool(todo.isCompleted)
        }
    }

    /// Reads the field, when present and not `null` (nullable fields: also when `null`), into
    /// `patch`, checking its rule; a problem is recorded in `reader`.
    public func read(_ reader: inout FieldReader, into patch: inout TodoPatch) {
        guard let value = reader.value(rawValue), value != .null || isNullable else { return }
        switch self {
        case .title: patch.title = reader.string(rawValue, required: true, length: Self.titleLength, notBlank: true)
        case .raw: patch.raw = reader.string(rawValue, required: true, length: Self.rawLength)
        case .notes:
            patch.notes = value == .null ? .some(nil)
                : reader.string(rawValue, required: true, length: Self.notesLength).map { .some($0) }
        case .remindAt: patch.remindAt = reader.nullableInstant(rawValue)
        case .isImportant: patch.isImportant = reader.bool(rawValue)
        case .isLife: patch.isLife = reader.bool(rawValue)
        case .tagId: patch.tagID = reader.nullableID(rawValue)
        case .difficulty: patch.difficulty = reader.int(rawValue, range: Self.difficultyRange).map(Int.init)
        case .estimatedTime: patch.estimatedTime = reader.int(rawValue, range: Self.estimatedTimeRange).map(Int.init)
        case .deadline: patch.deadline = reader.day(rawValue, required: true)
        case .isCompleted: patch.isCompleted = reader.bool(rawValue)
        }
    }

    /// Writes the field's value from `patch` into `todo`, when the patch has one.
    public func apply(_ patch: TodoPatch, to todo: inout Todo) {
        switch self {
        case .title: if let value = patch.title { todo.title = value }
        case .raw: if let value = patch.raw { todo.raw = value }
        case .notes: if let value = patch.notes { todo.notes = value }
        case .remindAt: if let value = patch.remindAt { todo.remindAt = value }
        case .isImportant: if let value = patch.isImportant { todo.isImportant = value }
        case .isLife: if let value = patch.isLife { todo.isLife = value }
        case .tagId: if let value = patch.tagID { todo.tagID = value }
        case .difficulty: if let value = patch.difficulty { todo.difficulty = value }
        case .estimatedTime: if let value = patch.estimatedTime { todo.estimatedTime = value }
        case .deadline: if let value = patch.deadline { todo.deadline = value }
        case .isCompleted: if let value = patch.isCompleted { todo.isCompleted = value }
        }
    }

    /// Leaves the field out of `patch` ("leave as is").
    public func clear(in patch: inout TodoPatch) {
        switch self {
        case .title: patch.title = nil
        case .raw: patch.raw = nil
        case .notes: patch.notes = nil
        case .remindAt: patch.remindAt = nil
        case .isImportant: patch.isImportant = nil
        case .isLife: patch.isLife = nil
        case .tagId: patch.tagID = nil
        case .difficulty: patch.difficulty = nil
        case .estimatedTime: patch.estimatedTime = nil
        case .deadline: patch.deadline = nil
        case .isCompleted: patch.isCompleted = nil
        }
    }
}
