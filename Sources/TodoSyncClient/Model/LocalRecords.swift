import TodoSyncCore

/// A tag as this device sees it: the server's state with this device's pending edits applied.
public struct LocalTag: Sendable, Equatable, Identifiable {
    /// This store's handle for the record; stable for the life of the store.
    public var localID: Int64
    /// The server's id; nil until a push result or a pull brings it.
    public var serverID: Int64?
    /// The id made on a device at creation (nil for records created elsewhere without one).
    public var clientID: String?
    public var name: String
    public var color: String
    /// The server version last seen; nil until the server has the record.
    public var version: Int64?
    public var createdAt: String?
    public var updatedAt: String?
    /// The server's deletion time when it sent a tombstone.
    public var deletedAt: String?

    public var id: Int64 { localID }
}

/// A todo as this device sees it: the server's state with this device's pending edits applied.
public struct LocalTodo: Sendable, Equatable, Identifiable {
    public var localID: Int64
    public var serverID: Int64?
    public var clientID: String?
    public var title: String
    public var raw: String
    /// Free text (schema version 2); nil when none, and always nil for a version-1 client.
    public var notes: String?
    /// When to remind the user, `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC; schema version 3); nil when none.
    public var remindAt: String?
    public var isImportant: Bool
    public var isLife: Bool
    /// The tag, by its local handle.
    public var tagLocalID: Int64?
    /// The tag's server id, when the tag has one.
    public var tagServerID: Int64?
    public var difficulty: Int
    public var estimatedTime: Int
    public var deadline: Day
    public var isCompleted: Bool
    public var version: Int64?
    /// The server's creation time; a provisional local time until the server has the record.
    public var createdAt: String
    public var updatedAt: String?
    public var deletedAt: String?

    public var id: Int64 { localID }

    /// A todo with its bookkeeping and every synced field at its default (`set(_:_:)` fills them).
    init(localID: Int64, serverID: Int64?, clientID: String?, version: Int64?, createdAt: String, updatedAt: String?,
         deletedAt: String?) {
        self.localID = localID
        self.serverID = serverID
        self.clientID = clientID
        title = ""
        raw = ""
        isImportant = false
        isLife = false
        difficulty = 0
        estimatedTime = 0
        deadline = Day.minimum
        isCompleted = false
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
    }
}

extension LocalTodo {
    /// The value of `field`, local terms (its tag: the local handle). A new field does not
    /// compile until it has one; what reads a todo by the list (`todosync-client`'s `--json`)
    /// needs no edit.
    public func value(_ field: TodoField) -> JSONValue {
        switch field {
        case .title: .string(title)
        case .raw: .string(raw)
        case .notes: .optionalString(notes)
        case .remindAt: .optionalString(remindAt)
        case .isImportant: .bool(isImportant)
        case .isLife: .bool(isLife)
        case .tagId: .optionalInt(tagLocalID)
        case .difficulty: .int(difficulty)
        case .estimatedTime: .int(estimatedTime)
        case .deadline: .string(deadline.description)
        case .isCompleted: .bool(isCompleted)
        }
    }

    /// Sets `field` from a stored value of its kind (`TodoRecord`); the tag is set with its
    /// server id by the caller.
    mutating func set(_ field: TodoField, _ value: JSONValue) {
        switch field {
        case .title: title = value.stringValue ?? ""
        case .raw: raw = value.stringValue ?? ""
        case .notes: notes = value.stringValue
        case .remindAt: remindAt = value.stringValue
        case .isImportant: isImportant = value.boolValue ?? false
        case .isLife: isLife = value.boolValue ?? false
        case .tagId: tagLocalID = value.int64Value
        case .difficulty: difficulty = Int(value.int64Value ?? 0)
        case .estimatedTime: estimatedTime = Int(value.int64Value ?? 0)
        case .deadline: deadline = value.stringValue.flatMap(Day.init) ?? Day.minimum
        case .isCompleted: isCompleted = value.boolValue ?? false
        }
    }
}

/// A daily statistic exactly as the server last sent it (stats are derived by the server).
public struct LocalDailyStat: Sendable, Equatable {
    public struct TagStat: Sendable, Equatable {
        public var tagID: Int64
        public var name: String
        public var color: String
        public var count: Int
    }

    public var serverID: Int64
    public var date: Day
    public var todoCount: Int
    public var completedCount: Int
    public var productivityNum: Double
    public var balanceNum: Int
    public var balanceTitle: String
    public var balanceMessage: String
    public var tagStats: [TagStat]
    public var centerX: Double
    public var centerY: Double
    public var version: Int64
    public var createdAt: String
    public var updatedAt: String
    /// The record's JSON as the server sent it.
    public var json: String
}

/// The fields of a new todo. `tag` is a local tag handle.
public struct NewTodo: Sendable, Equatable {
    public var title: String
    public var raw: String?
    /// Free text, up to 10,000 characters (schema version 2; a version-1 client does not send it).
    public var notes: String?
    /// An RFC 3339 date-time, any offset; sent and kept in UTC (schema version 3).
    public var remindAt: String?
    public var deadline: Day
    public var isImportant: Bool
    public var isLife: Bool
    public var tag: Int64?
    public var difficulty: Int
    public var estimatedTime: Int
    public var isCompleted: Bool

    public init(title: String, raw: String? = nil, notes: String? = nil, remindAt: String? = nil, deadline: Day, isImportant: Bool = false,
                isLife: Bool = false, tag: Int64? = nil, difficulty: Int = 0, estimatedTime: Int = 0, isCompleted: Bool = false) {
        self.title = title
        self.raw = raw
        self.notes = notes
        self.remindAt = remindAt
        self.deadline = deadline
        self.isImportant = isImportant
        self.isLife = isLife
        self.tag = tag
        self.difficulty = difficulty
        self.estimatedTime = estimatedTime
        self.isCompleted = isCompleted
    }
}

/// Changes to a todo; nil leaves a field as it is. `tag: .some(nil)` clears the tag, and
/// `notes: .some(nil)` the notes, `remindAt: .some(nil)` the reminder.
public struct TodoChanges: Sendable, Equatable {
    public var title: String?
    public var raw: String?
    public var notes: String??
    public var remindAt: String??
    public var deadline: Day?
    public var isImportant: Bool?
    public var isLife: Bool?
    public var tag: Int64??
    public var difficulty: Int?
    public var estimatedTime: Int?
    public var isCompleted: Bool?

    public init(title: String? = nil, raw: String? = nil, notes: String?? = nil, remindAt: String?? = nil, deadline: Day? = nil, isImportant: Bool? = nil,
                isLife: Bool? = nil, tag: Int64?? = nil, difficulty: Int? = nil, estimatedTime: Int? = nil,
                isCompleted: Bool? = nil) {
        self.title = title
        self.raw = raw
        self.notes = notes
        self.remindAt = remindAt
        self.deadline = deadline
        self.isImportant = isImportant
        self.isLife = isLife
        self.tag = tag
        self.difficulty = difficulty
        self.estimatedTime = estimatedTime
        self.isCompleted = isCompleted
    }
}

extension NewTodo {
    /// The value a create sends for `field`, in local terms (a tag by its local handle), before
    /// validation; nil: left out (notes and the reminder unless given). A new field does not compile until it has
    /// one, and `Validate.newTodo` checks it by the field's rule.
    func value(_ field: TodoField) -> JSONValue? {
        switch field {
        case .title: .string(title)
        case .raw: .string(raw ?? title)
        case .notes: notes.map { .string($0) }
        case .remindAt: remindAt.map { .string($0) }
        case .isImportant: .bool(isImportant)
        case .isLife: .bool(isLife)
        case .tagId: .optionalInt(tag)
        case .difficulty: .int(difficulty)
        case .estimatedTime: .int(estimatedTime)
        case .deadline: .string(deadline.description)
        case .isCompleted: .bool(isCompleted)
        }
    }
}

extension TodoChanges {
    /// The new value of `field`, in local terms, before validation: nil leaves it as it is,
    /// `null` clears it. A new field does not compile until it has one.
    func value(_ field: TodoField) -> JSONValue? {
        switch field {
        case .title: title.map { .string($0) }
        case .raw: raw.map { .string($0) }
        case .notes: notes.map { .optionalString($0) }
        case .remindAt: remindAt.map { .optionalString($0) }
        case .isImportant: isImportant.map { .bool($0) }
        case .isLife: isLife.map { .bool($0) }
        case .tagId: tag.map { .optionalInt($0) }
        case .difficulty: difficulty.map { .int($0) }
        case .estimatedTime: estimatedTime.map { .int($0) }
        case .deadline: deadline.map { .string($0.description) }
        case .isCompleted: isCompleted.map { .bool($0) }
        }
    }
}

/// What a local write did: the record it touched and the operation that carries it to the server
/// (nil when the write cancelled a change that was never sent, e.g. deleting an unsent create).
public struct LocalChange: Sendable, Equatable {
    public var localID: Int64
    public var opID: String?
}
