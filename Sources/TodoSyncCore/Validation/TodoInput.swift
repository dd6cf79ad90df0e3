/// The fields of a todo create (`POST /todos`, push `create`), defaults applied.
public struct TodoDraft: Sendable, Equatable {
    public var clientID: String?
    public var title: String
    public var raw: String
    public var isImportant: Bool
    public var isLife: Bool
    public var tagID: Int64?
    public var difficulty: Int
    public var estimatedTime: Int
    public var deadline: Day
    public var isCompleted: Bool

    public init(clientID: String? = nil, title: String, raw: String? = nil, isImportant: Bool = false,
                isLife: Bool = false, tagID: Int64? = nil, difficulty: Int = 0, estimatedTime: Int = 0,
                deadline: Day, isCompleted: Bool = false) {
        self.clientID = clientID
        self.title = title
        self.raw = raw ?? title
        self.isImportant = isImportant
        self.isLife = isLife
        self.tagID = tagID
        self.difficulty = difficulty
        self.estimatedTime = estimatedTime
        self.deadline = deadline
        self.isCompleted = isCompleted
    }

    /// Validates a create body. Whether `tagId` names a live tag is the store's check.
    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> TodoDraft {
        let clientID = reader.clientID()
        let title = reader.string("title", required: true, length: 1...200, notBlank: true)
        let raw = reader.string("raw", required: false, length: 0...2000)
        let isImportant = reader.bool("isImportant")
        let isLife = reader.bool("isLife")
        let tagID = reader.nullableID("tagId")
        let difficulty = reader.int("difficulty", range: 0...5)
        let estimatedTime = reader.int("estimatedTime", range: 0...1440)
        let deadline = reader.day("deadline", required: true)
        let isCompleted = reader.bool("isCompleted")
        try reader.finish()
        return TodoDraft(clientID: clientID, title: title!, raw: raw, isImportant: isImportant ?? false,
                         isLife: isLife ?? false, tagID: tagID ?? nil, difficulty: Int(difficulty ?? 0),
                         estimatedTime: Int(estimatedTime ?? 0), deadline: deadline!, isCompleted: isCompleted ?? false)
    }
}

/// The fields of a todo update; nil means "leave as is" (`tagID: .some(nil)` clears the tag).
public struct TodoPatch: Sendable, Equatable {
    public var title: String?
    public var raw: String?
    public var isImportant: Bool?
    public var isLife: Bool?
    public var tagID: Int64??
    public var difficulty: Int?
    public var estimatedTime: Int?
    public var deadline: Day?
    public var isCompleted: Bool?

    public init(title: String? = nil, raw: String? = nil, isImportant: Bool? = nil, isLife: Bool? = nil,
                tagID: Int64?? = nil, difficulty: Int? = nil, estimatedTime: Int? = nil, deadline: Day? = nil,
                isCompleted: Bool? = nil) {
        self.title = title
        self.raw = raw
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
        let nonNullable = ["title", "raw", "isImportant", "isLife", "difficulty", "estimatedTime", "deadline", "isCompleted"]
        reader.rejectNulls(nonNullable)
        func present(_ key: String) -> Bool { reader.has(key) && reader.value(key) != .null }
        var patch = TodoPatch()
        if present("title") { patch.title = reader.string("title", required: true, length: 1...200, notBlank: true) }
        if present("raw") { patch.raw = reader.string("raw", required: true, length: 0...2000) }
        if present("isImportant") { patch.isImportant = reader.bool("isImportant") }
        if present("isLife") { patch.isLife = reader.bool("isLife") }
        patch.tagID = reader.nullableID("tagId")
        if present("difficulty") { patch.difficulty = reader.int("difficulty", range: 0...5).map(Int.init) }
        if present("estimatedTime") { patch.estimatedTime = reader.int("estimatedTime", range: 0...1440).map(Int.init) }
        if present("deadline") { patch.deadline = reader.day("deadline", required: true) }
        if present("isCompleted") { patch.isCompleted = reader.bool("isCompleted") }
        try reader.finish()
        return patch
    }

    /// The patch applied to `todo`.
    public func applied(to todo: Todo) -> Todo {
        var result = todo
        if let title { result.title = title }
        if let raw { result.raw = raw }
        if let isImportant { result.isImportant = isImportant }
        if let isLife { result.isLife = isLife }
        if let tagID { result.tagID = tagID }
        if let difficulty { result.difficulty = difficulty }
        if let estimatedTime { result.estimatedTime = estimatedTime }
        if let deadline { result.deadline = deadline }
        if let isCompleted { result.isCompleted = isCompleted }
        return result
    }
}

extension Todo {
    /// Whether two versions of a todo differ in any client-visible content field.
    public func hasSameContent(as other: Todo) -> Bool {
        title == other.title && raw == other.raw && isImportant == other.isImportant && isLife == other.isLife
            && tagID == other.tagID && difficulty == other.difficulty && estimatedTime == other.estimatedTime
            && deadline == other.deadline && isCompleted == other.isCompleted
    }
}
