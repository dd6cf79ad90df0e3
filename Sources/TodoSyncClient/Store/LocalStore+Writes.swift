import Foundation
import GRDB
import TodoSyncCore

/// Local writes: each is one transaction that changes the record and queues (or folds into) the
/// operation that will carry it to the server. No network, ever.
extension LocalStore {
    // MARK: Tags

    @discardableResult
    public func addTag(name: String, color: String) throws -> LocalChange {
        let name = try Validate.tagName(name)
        let color = try Validate.color(color)
        return try pool.write { db in
            var tag = TagRecord(state: SyncState(clientID: UUID().uuidString.lowercased(), createdAt: Timestamp.now().rfc3339),
                                name: name, color: color)
            try tag.insert(db)
            return try Outbox.create(db, .tag, localID: tag.state.localID!, data: tag.syncedFields)
        }
    }

    @discardableResult
    public func updateTag(_ localID: Int64, name: String? = nil, color: String? = nil) throws -> LocalChange {
        var changes: JSONObject = [:]
        if let name { changes["name"] = .string(try Validate.tagName(name)) }
        if let color { changes["color"] = .string(try Validate.color(color)) }
        return try pool.write { db in try Outbox.edit(db, .tag, localID: localID, changes: changes) }
    }

    /// Deletes a tag. Its todos show no tag at once; the server un-tags them when the delete
    /// arrives and sends them back as its own change (if the delete conflicts, they keep it).
    @discardableResult
    public func deleteTag(_ localID: Int64) throws -> LocalChange {
        try pool.write { db in try Outbox.delete(db, .tag, localID: localID) }
    }

    // MARK: Todos

    @discardableResult
    public func addTodo(_ todo: NewTodo) throws -> LocalChange {
        let fields = try Validate.newTodo(todo)
        return try pool.write { db in try Self.insertTodo(db, fields) }
    }

    @discardableResult
    public func updateTodo(_ localID: Int64, _ changes: TodoChanges) throws -> LocalChange {
        let fields = try Validate.todoChanges(changes)
        return try pool.write { db in
            if let tag = fields["tag"]?.int64Value { try Validate.liveTag(db, tag) }
            return try Outbox.edit(db, .todo, localID: localID, changes: fields)
        }
    }

    @discardableResult
    public func deleteTodo(_ localID: Int64) throws -> LocalChange {
        try pool.write { db in try Outbox.delete(db, .todo, localID: localID) }
    }

    /// The contract's quick-add, parsed on the device with the server's own parser: one todo per
    /// non-blank line, `#tag` matched against the local live tags, each with `notes` when given
    /// and the fields `extra` gives (what the syntax has no token for). All lines or none.
    @discardableResult
    public func quickAdd(_ text: String, date: Day, notes: String? = nil, with extra: TodoChanges = TodoChanges()) throws -> [LocalChange] {
        let extraFields = try Validate.todoChanges(extra)
        return try pool.write { db in
            var tagsByName: [String: Int64] = [:]
            for tag in try Self.fetchTags(db) where tagsByName[tag.name.lowercased()] == nil {
                tagsByName[tag.name.lowercased()] = tag.localID
            }
            let lines: [QuickAddLine]
            do {
                lines = try QuickAddParser.parse(text) { tagsByName[$0] }
            } catch let error as DomainError {
                let problem = error.details.first
                throw LocalStoreError.validation(field: problem?.field ?? "text", problem: problem?.problem ?? error.message)
            }
            return try lines.map { line in
                let todo = NewTodo(title: line.title, raw: line.raw, notes: notes, deadline: date, isImportant: line.isImportant,
                                   isLife: line.isLife, tag: line.tagID, difficulty: line.difficulty ?? 0,
                                   estimatedTime: line.estimatedTime ?? 0)
                return try Self.insertTodo(db, try Validate.newTodo(todo).merging(extraFields) { $1 })
            }
        }
    }

    /// Acknowledges a `rejected` operation: it leaves the outbox (logged as rejected) and its
    /// record returns to what the server has (a rejected create disappears).
    public func acknowledgeRejected(_ opID: String) throws {
        try pool.write { db in try Outbox.acknowledgeRejected(db, opID: opID) }
    }

    static func insertTodo(_ db: Database, _ fields: JSONObject) throws -> LocalChange {
        if let tag = fields["tag"]?.int64Value { try Validate.liveTag(db, tag) }
        var todo = TodoRecord(state: SyncState(clientID: UUID().uuidString.lowercased(), createdAt: Timestamp.now().rfc3339),
                              title: "", raw: "", deadline: "")
        todo.setSyncedFields(fields)
        try todo.insert(db)
        return try Outbox.create(db, .todo, localID: todo.state.localID!, data: fields)
    }
}

/// The contract's field rules, checked before anything is written: the limits of the shared
/// list of synced fields (`TodoField`, `TagField`), stated there once for server and client.
enum Validate {
    static func tagName(_ name: String) throws -> String { try text(TagField.name, name) }

    static func color(_ color: String) throws -> String {
        guard let normalized = TagColor.normalized(color) else {
            throw LocalStoreError.validation(field: "color", problem: "must be a #RRGGBB hex color")
        }
        return normalized
    }

    /// Text within the field's length (Unicode scalars), and not all whitespace where it must not be.
    static func text(_ field: some SyncedField, _ value: String) throws -> String {
        guard let length = field.length else { return value }
        guard length.contains(value.unicodeScalars.count), !field.refusesBlank || !value.trimmingWhitespace().isEmpty else {
            let problem = length.lowerBound > 0 ? "must be \(length.lowerBound) to \(length.upperBound) characters"
                : "must be at most \(length.upperBound) characters"
            throw LocalStoreError.validation(field: field.key, problem: problem + (field.refusesBlank ? ", not all whitespace" : ""))
        }
        return value
    }

    /// An integer within the field's range.
    static func int(_ field: TodoField, _ value: Int) throws -> JSONValue {
        if let range = field.range, !range.contains(Int64(value)) {
            throw LocalStoreError.validation(field: field.key, problem: "must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return .int(value)
    }

    /// An instant as the server stores it (UTC, milliseconds), from any RFC 3339 form it takes.
    static func instant(_ field: TodoField, _ text: String) throws -> String {
        guard let instant = Timestamp(rfc3339Input: text) else {
            throw LocalStoreError.validation(
                field: field.key, problem: "must be an RFC 3339 date-time with Z or an offset, its UTC year 2000 to 2999")
        }
        return instant.rfc3339
    }

    /// A create's fields (local terms), each checked by its rule.
    static func newTodo(_ todo: NewTodo) throws -> JSONObject { try fields(todo.value) }

    /// An update's fields (local terms), each checked by its rule.
    static func todoChanges(_ changes: TodoChanges) throws -> JSONObject { try fields(changes.value) }

    /// The fields `value` gives (nil: left out), in `TodoField` order, each checked by its rule:
    /// text by its length, integers by their range (`null` and other kinds as they are).
    private static func fields(_ value: (TodoField) -> JSONValue?) throws -> JSONObject {
        var fields: JSONObject = [:]
        for field in TodoField.allCases {
            guard var checked = value(field) else { continue }
            switch (field.kind, checked) {
            case (.text, .string(let text)): checked = .string(try self.text(field, text))
            case (.integer, _): if let number = checked.int64Value { checked = try int(field, Int(number)) }
            case (.instant, .string(let text)): checked = .string(try instant(field, text))
            default: break
            }
            fields[RecordFields.localName(field.key)] = checked
        }
        return fields
    }

    static func liveTag(_ db: Database, _ localID: Int64) throws {
        guard try Outbox.isLive(db, .tag, localID) else {
            throw LocalStoreError.validation(field: "tagId", problem: "must be one of your live tags")
        }
    }
}
