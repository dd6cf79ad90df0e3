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
            let clientID = UUID().uuidString.lowercased()
            try db.execute(
                sql: "INSERT INTO tag (clientId, clientKey, name, color, createdAt) VALUES (?, ?, ?, ?, ?)",
                arguments: [clientID, clientID, name, color, Timestamp.now().rfc3339])
            let localID = db.lastInsertedRowID
            var op = OutboxOperation(entity: .tag, action: .create, recordLocalID: localID,
                                     data: ["name": .string(name), "color": .string(color)])
            try op.insert(db)
            return LocalChange(localID: localID, opID: op.opID)
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
    /// non-blank line, `#tag` matched against the local live tags. All lines or none.
    @discardableResult
    public func quickAdd(_ text: String, date: Day) throws -> [LocalChange] {
        try pool.write { db in
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
                let todo = NewTodo(title: line.title, raw: line.raw, deadline: date, isImportant: line.isImportant,
                                   isLife: line.isLife, tag: line.tagID, difficulty: line.difficulty ?? 0,
                                   estimatedTime: line.estimatedTime ?? 0)
                return try Self.insertTodo(db, try Validate.newTodo(todo))
            }
        }
    }

    /// Acknowledges a `rejected` operation: it leaves the outbox (logged as rejected) and its
    /// record returns to what the server has (a rejected create disappears).
    public func acknowledgeRejected(_ opID: String) throws {
        try pool.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE opId = ? AND state = 'rejected'", arguments: [opID])
            else { throw LocalStoreError.notFound }
            let op = OutboxOperation(row: row)
            try Outbox.revert(db, op)
            try op.settle(db, status: .rejected, errorCode: op.errorCode, errorMessage: op.errorMessage)
            try Outbox.refreshVisibility(db, op.entity, op.recordLocalID)
        }
    }

    static func insertTodo(_ db: Database, _ fields: JSONObject) throws -> LocalChange {
        if let tag = fields["tag"]?.int64Value { try Validate.liveTag(db, tag) }
        let clientID = UUID().uuidString.lowercased()
        let title = fields["title"]!.stringValue!
        try db.execute(
            sql: """
                INSERT INTO todo (clientId, clientKey, title, titleKey, raw, isImportant, isLife, tagLocalId, difficulty,
                                  estimatedTime, deadline, isCompleted, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [clientID, clientID, title, Data(TitleOrder.key(title)), fields["raw"]!.stringValue!,
                        fields["isImportant"]!.boolValue!, fields["isLife"]!.boolValue!, fields["tag"]!.int64Value,
                        fields["difficulty"]!.int64Value!, fields["estimatedTime"]!.int64Value!, fields["deadline"]!.stringValue!,
                        fields["isCompleted"]!.boolValue!, Timestamp.now().rfc3339])
        let localID = db.lastInsertedRowID
        var op = OutboxOperation(entity: .todo, action: .create, recordLocalID: localID, data: fields)
        try op.insert(db)
        return LocalChange(localID: localID, opID: op.opID)
    }
}

/// The outbox's coalescing rules (CLIENT-NOTES "The outbox"):
/// - while an operation is only pending, later edits fold into it: create + edits = one create
///   with the latest fields; edits = one update whose `data` holds every changed field and whose
///   `base`/`baseVersion` stay those of the first edit;
/// - a delete replaces what was pending; a delete of a never-sent create removes both;
/// - an operation that is sending is frozen: a new edit becomes a new operation after it, whose
///   base is settled by the frozen one's result.
enum Outbox {
    static func edit(_ db: Database, _ entity: EntityKind, localID: Int64, changes: JSONObject) throws -> LocalChange {
        guard let current = try RecordFields.read(db, entity, localID: localID), try isLive(db, entity, localID) else {
            throw LocalStoreError.notFound
        }
        let changed = changes.filter { current[$0.key] != $0.value }
        guard !changed.isEmpty else {
            return LocalChange(localID: localID, opID: try OutboxOperation.latestUnsettled(db, entity: entity, localID: localID)?.opID)
        }
        try RecordFields.write(db, entity, localID: localID, changed)

        let latest = try OutboxOperation.latestUnsettled(db, entity: entity, localID: localID)
        if var op = latest, op.state == .pending {
            switch op.action {
            case .create:
                op.data.merge(changed) { $1 }
            case .update:
                for (name, value) in changed {
                    if op.data[name] == nil {
                        let (key, baseValue) = try RecordFields.contractTerms(db, name, current[name]!)
                        op.base[key] = baseValue
                    }
                    op.data[name] = value
                }
                // An edit undone before it was sent is no edit.
                if !op.waitsForPredecessor {
                    for (name, value) in op.data {
                        let (key, contractValue) = try RecordFields.contractTerms(db, name, value)
                        if op.base[key] == contractValue {
                            op.data[name] = nil
                            op.base[key] = nil
                        }
                    }
                    if op.data.isEmpty {
                        try op.delete(db)
                        return LocalChange(localID: localID, opID: nil)
                    }
                }
            case .delete:
                throw LocalStoreError.notFound
            }
            try op.update(db)
            return LocalChange(localID: localID, opID: op.opID)
        }
        var base: JSONObject = [:]
        for name in changed.keys {
            let (key, value) = try RecordFields.contractTerms(db, name, current[name]!)
            base[key] = value
        }
        var op = OutboxOperation(
            entity: entity, action: .update, recordLocalID: localID, data: changed, base: base,
            baseVersion: latest == nil ? try version(db, entity, localID) : nil, waitsForPredecessor: latest != nil)
        try op.insert(db)
        return LocalChange(localID: localID, opID: op.opID)
    }

    static func delete(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> LocalChange {
        guard try isLive(db, entity, localID) else { throw LocalStoreError.notFound }
        let latest = try OutboxOperation.latestUnsettled(db, entity: entity, localID: localID)
        if var op = latest, op.state == .pending {
            switch op.action {
            case .create:
                // Never sent: nothing to tell the server.
                try op.delete(db)
                try forget(db, entity, localID: localID)
                return LocalChange(localID: localID, opID: nil)
            case .update:
                op.action = .delete
                op.data = [:]
                op.base = [:]
                try op.update(db)
                try markDeleted(db, entity, localID)
                return LocalChange(localID: localID, opID: op.opID)
            case .delete:
                return LocalChange(localID: localID, opID: op.opID)
            }
        }
        var op = OutboxOperation(
            entity: entity, action: .delete, recordLocalID: localID,
            baseVersion: latest == nil ? try version(db, entity, localID) : nil, waitsForPredecessor: latest != nil)
        try op.insert(db)
        try markDeleted(db, entity, localID)
        return LocalChange(localID: localID, opID: op.opID)
    }

    /// Undoes a rejected operation's effect on the record's fields: each field it changed goes
    /// back to the newest server value the device has seen (the shadow kept while the operation
    /// protected it, else the operation's base), except fields in `keeping`.
    static func undo(_ db: Database, _ op: OutboxOperation, keeping: Set<String>) throws {
        let table = op.entity.rawValue
        switch op.action {
        case .create:
            return  // the record never reached the server; it leaves when the app acknowledges
        case .update:
            let shadow = try String.fetchOne(db, sql: "SELECT shadow FROM \(table) WHERE localId = ?", arguments: [op.recordLocalID])
                .map(JSONText.object) ?? [:]
            var fields: JSONObject = [:]
            for name in op.data.keys where !keeping.contains(name) {
                if let value = shadow[name] {
                    fields[name] = value
                } else if let base = op.base[name == "tag" ? "tagId" : name] {
                    fields[name] = try RecordFields.localTerms(db, name == "tag" ? "tagId" : name, base).1
                }
            }
            try RecordFields.write(db, op.entity, localID: op.recordLocalID, fields)
        case .delete:
            try db.execute(sql: "UPDATE \(table) SET isDeleted = (deletedAt IS NOT NULL) WHERE localId = ?", arguments: [op.recordLocalID])
        }
    }

    /// What acknowledging a rejected operation does to its record: a create the server never
    /// accepted, or a change of a record the server does not have, leaves the device.
    static func revert(_ db: Database, _ op: OutboxOperation) throws {
        if op.action == .create || op.errorCode == "not_found" {
            try forget(db, op.entity, localID: op.recordLocalID)
        }
    }

    /// Removes a record that the server does not have (or no longer has) from the device.
    static func forget(_ db: Database, _ entity: EntityKind, localID: Int64) throws {
        try db.execute(sql: "DELETE FROM \(entity.rawValue) WHERE localId = ?", arguments: [localID])
        guard entity == .tag else { return }
        try db.execute(sql: "UPDATE todo SET tagLocalId = NULL WHERE tagLocalId = ?", arguments: [localID])
        // Pending todo operations naming the vanished tag would name nothing.
        for var op in try OutboxOperation.fetchAll(db) where op.entity == .todo && op.state == .pending
            && op.data["tag"]?.int64Value == localID {
            op.data["tag"] = .null
            try op.update(db)
        }
    }

    /// A record is hidden while a delete of it is on its way, or once the server has deleted it
    /// and no change of this device is still on its way (that change surfaces the conflict).
    static func refreshVisibility(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws {
        try db.execute(sql: """
            UPDATE \(entity.rawValue) SET isDeleted = CASE
                WHEN EXISTS (SELECT 1 FROM outbox WHERE entity = ? AND recordLocalId = ? AND state IN ('pending', 'sending') AND action = 'delete') THEN 1
                WHEN deletedAt IS NOT NULL AND NOT EXISTS (SELECT 1 FROM outbox WHERE entity = ? AND recordLocalId = ? AND state IN ('pending', 'sending')) THEN 1
                ELSE isDeleted END
            WHERE localId = ?
            """, arguments: [entity.rawValue, localID, entity.rawValue, localID, localID])
    }

    static func isLive(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT isDeleted = 0 FROM \(entity.rawValue) WHERE localId = ?", arguments: [localID]) ?? false
    }

    static func version(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT version FROM \(entity.rawValue) WHERE localId = ?", arguments: [localID])
    }

    static func markDeleted(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws {
        try db.execute(sql: "UPDATE \(entity.rawValue) SET isDeleted = 1 WHERE localId = ?", arguments: [localID])
    }
}

/// The contract's field rules, checked before anything is written.
enum Validate {
    static func tagName(_ name: String) throws -> String {
        guard (1...50).contains(name.unicodeScalars.count), !name.trimmingWhitespace().isEmpty else {
            throw LocalStoreError.validation(field: "name", problem: "must be 1 to 50 characters, not all whitespace")
        }
        return name
    }

    static func color(_ color: String) throws -> String {
        guard let normalized = TagColor.normalized(color) else {
            throw LocalStoreError.validation(field: "color", problem: "must be a #RRGGBB hex color")
        }
        return normalized
    }

    static func title(_ title: String) throws -> String {
        guard (1...200).contains(title.unicodeScalars.count), !title.trimmingWhitespace().isEmpty else {
            throw LocalStoreError.validation(field: "title", problem: "must be 1 to 200 characters, not all whitespace")
        }
        return title
    }

    static func raw(_ raw: String) throws -> String {
        guard raw.unicodeScalars.count <= 2000 else {
            throw LocalStoreError.validation(field: "raw", problem: "must be at most 2000 characters")
        }
        return raw
    }

    static func int(_ field: String, _ value: Int, _ range: ClosedRange<Int>) throws -> JSONValue {
        guard range.contains(value) else {
            throw LocalStoreError.validation(field: field, problem: "must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return .int(value)
    }

    static func newTodo(_ todo: NewTodo) throws -> JSONObject {
        [
            "title": .string(try title(todo.title)), "raw": .string(try raw(todo.raw ?? todo.title)),
            "isImportant": .bool(todo.isImportant), "isLife": .bool(todo.isLife), "tag": .optionalInt(todo.tag),
            "difficulty": try int("difficulty", todo.difficulty, 0...5),
            "estimatedTime": try int("estimatedTime", todo.estimatedTime, 0...1440),
            "deadline": .string(todo.deadline.description), "isCompleted": .bool(todo.isCompleted),
        ]
    }

    static func todoChanges(_ changes: TodoChanges) throws -> JSONObject {
        var fields: JSONObject = [:]
        if let title = changes.title { fields["title"] = .string(try self.title(title)) }
        if let raw = changes.raw { fields["raw"] = .string(try self.raw(raw)) }
        if let deadline = changes.deadline { fields["deadline"] = .string(deadline.description) }
        if let isImportant = changes.isImportant { fields["isImportant"] = .bool(isImportant) }
        if let isLife = changes.isLife { fields["isLife"] = .bool(isLife) }
        if let tag = changes.tag { fields["tag"] = .optionalInt(tag) }
        if let difficulty = changes.difficulty { fields["difficulty"] = try int("difficulty", difficulty, 0...5) }
        if let estimatedTime = changes.estimatedTime { fields["estimatedTime"] = try int("estimatedTime", estimatedTime, 0...1440) }
        if let isCompleted = changes.isCompleted { fields["isCompleted"] = .bool(isCompleted) }
        return fields
    }

    static func liveTag(_ db: Database, _ localID: Int64) throws {
        guard try Outbox.isLive(db, .tag, localID) else {
            throw LocalStoreError.validation(field: "tagId", problem: "must be one of your live tags")
        }
    }
}
