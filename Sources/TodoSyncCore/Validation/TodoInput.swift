/// The fields of a todo create (`POST /todos`, push `create`), defaults applied: the content of
/// the todo to be (`content`, a `Todo` not yet stored), read as `draft.title`, `draft.tagID`….
@dynamicMemberLookup
public struct TodoDraft: Sendable, Equatable {
    public var clientID: String?
    /// The new todo's content fields; its id, version and timestamps are the store's to set.
    public var content: Todo

    /// The defaults of API.md "Todos" for every field not given.
    public init(clientID: String? = nil, title: String, raw: String? = nil, notes: String? = nil, isImportant: Bool = false,
                isLife: Bool = false, tagID: Int64? = nil, difficulty: Int = 0, estimatedTime: Int = 0,
                deadline: Day, isCompleted: Bool = false) {
        self.clientID = clientID
        content = Todo(id: 0, clientID: clientID, title: title, raw: raw ?? title, notes: notes, isImportant: isImportant,
                       isLife: isLife, tagID: tagID, difficulty: difficulty, estimatedTime: estimatedTime,
                       deadline: deadline, isCompleted: isCompleted, version: 0, createdAt: "", updatedAt: "",
                       deletedAt: nil)
    }

    public subscript<Value>(dynamicMember field: KeyPath<Todo, Value>) -> Value { content[keyPath: field] }

    /// Validates a create body: every field by its `TodoField` rule, `title` and `deadline`
    /// required, the rest defaulted. Whether `tagId` names a live tag is the store's check.
    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> TodoDraft {
        let clientID = reader.clientID()
        let patch = TodoPatch.read(&reader)
        for field in [TodoField.title, .deadline] where !reader.has(field.rawValue) {
            reader.report(field.rawValue, "is required")
        }
        try reader.finish()
        var draft = TodoDraft(clientID: clientID, title: patch.title!, deadline: patch.deadline!)
        draft.content = patch.applied(to: draft.content)
        return draft
    }
}

/// The fields of a todo update; nil means "leave as is" (`tagID: .some(nil)` clears the tag).
public struct TodoPatch: Sendable, Equatable {
    public var title: String?
    public var raw: String?
    /// `.some(nil)` clears the notes.
    public var notes: String??
    /// `.some(nil)` clears the reminder.
    public var remindAt: String??
    public var isImportant: Bool?
    public var isLife: Bool?
    public var tagID: Int64??
    public var difficulty: Int?
    public var estimatedTime: Int?
    public var deadline: Day?
    public var isCompleted: Bool?

    public init(title: String? = nil, raw: String? = nil, notes: String?? = nil, remindAt: String?? = nil, isImportant: Bool? = nil, isLife: Bool? = nil,
                tagID: Int64?? = nil, difficulty: Int? = nil, estimatedTime: Int? = nil, deadline: Day? = nil,
                isCompleted: Bool? = nil) {
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
    }

    /// Validates an update body.
    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> TodoPatch {
        let patch = read(&reader)
        try reader.finish()
        return patch
    }

    /// Reads every field by its `TodoField` rule (a `null` where the field is not nullable is a
    /// problem), recording problems in `reader`.
    static func read(_ reader: inout FieldReader) -> TodoPatch {
        reader.rejectNulls(TodoField.allCases.filter { !$0.isNullable }.map(\.rawValue))
        var patch = TodoPatch()
        for field in TodoField.allCases { field.read(&reader, into: &patch) }
        return patch
    }

    /// The patch applied to `todo`.
    public func applied(to todo: Todo) -> Todo {
        var result = todo
        for field in TodoField.allCases { field.apply(self, to: &result) }
        return result
    }

    /// Only the fields named in `fields` (contract names) of this patch.
    public func restricted(to fields: Set<String>) -> TodoPatch {
        var result = self
        for field in TodoField.allCases where !fields.contains(field.rawValue) { field.clear(in: &result) }
        return result
    }
}
