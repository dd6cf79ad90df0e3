/// A user's todo, as stored and as sent to clients.
public struct Todo: Sendable, Equatable {
    public var id: Int64
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
    public var version: Int64
    /// RFC 3339 with milliseconds.
    public var createdAt: String
    public var updatedAt: String
    public var deletedAt: String?

    public init(id: Int64, clientID: String?, title: String, raw: String, isImportant: Bool, isLife: Bool,
                tagID: Int64?, difficulty: Int, estimatedTime: Int, deadline: Day, isCompleted: Bool,
                version: Int64, createdAt: String, updatedAt: String, deletedAt: String?) {
        self.id = id
        self.clientID = clientID
        self.title = title
        self.raw = raw
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

    /// Writes the contract's Todo object.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("clientId", clientID)
        writer.field("title", title)
        writer.field("raw", raw)
        writer.field("isImportant", isImportant)
        writer.field("isLife", isLife)
        writer.field("tagId", tagID)
        writer.field("difficulty", difficulty)
        writer.field("estimatedTime", estimatedTime)
        writer.key("deadline")
        writer.day(deadline)
        writer.field("isCompleted", isCompleted)
        writer.syncFields(version: version, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt)
        writer.endObject()
    }
}
