import MariaDB
import TodoSyncCore

extension Store {
    /// One live todo of the user, or nil.
    public func todo(userID: Int64, id: Int64) throws -> Todo? {
        try guarded { try db.queryOne(SQL.Todos.liveByID, [.int(id), .int(userID)]).map(Todo.init(row:)) }
    }

    /// Creates a todo; with a known `clientId`, returns the existing todo (maybe a tombstone) instead.
    public func createTodo(userID: Int64, _ draft: TodoDraft) throws -> Created<Todo> {
        try write(userID: userID, operations: 1) { transaction in try createTodo(draft, in: transaction) }
    }

    package func createTodo(_ draft: TodoDraft, in transaction: WriteTransaction) throws -> Created<Todo> {
        let userID = transaction.userID
        let clientKey = draft.clientID.map(ClientID.key)
        if let clientKey, let existing = try db.queryOne(SQL.Todos.byClientKey, [.int(userID), .text(clientKey)]) {
            return Created(record: Todo(row: existing), isNew: false)
        }
        var todo = try newTodo(draft, in: transaction)
        let now = transaction.now
        let inserted = try db.execute(SQL.Todos.insert, [.int(userID), .optionalText(draft.clientID), .optionalText(clientKey)]
            + TodoColumn.contentValues(of: todo)
            + [.int(todo.version), .timestamp(now), .timestamp(now), .optionalInt(transaction.device)])
        todo.id = Int64(inserted.lastInsertID)
        transaction.todoWritten(from: nil, to: todo)
        transaction.changed(todo, isNew: true)
        return Created(record: todo, isNew: true)
    }

    /// The todo `draft` makes, with its version and times, not yet written (no id yet).
    func newTodo(_ draft: TodoDraft, in transaction: WriteTransaction) throws -> Todo {
        try requireLiveTag(draft.tagID, in: transaction)
        var todo = draft.content
        todo.version = try transaction.nextVersion()
        todo.createdAt = transaction.now.rfc3339
        todo.updatedAt = transaction.now.rfc3339
        try requireStorable(todo)
        return todo
    }

    /// Applies a patch to a live todo. A patch that changes nothing keeps the version.
    public func updateTodo(userID: Int64, id: Int64, _ patch: TodoPatch, ifMatch: IfMatch?) throws -> Todo {
        try write(userID: userID, operations: 1) { transaction in
            let current = try liveTodo(id: id, in: transaction)
            try check(ifMatch, current: current)
            return try updateTodo(current, patch.applied(to: current), in: transaction)
        }
    }

    /// Writes `updated` over `current` (a live todo, or a tombstone being restored).
    func updateTodo(_ current: Todo, _ updated: Todo, in transaction: WriteTransaction) throws -> Todo {
        guard let result = try updatedTodo(current, updated, in: transaction) else { return current }
        try db.execute(SQL.Todos.update, TodoColumn.contentValues(of: result) + [
            .int(result.version), .timestamp(transaction.now), .optionalInt(transaction.device), .int(current.id),
            .int(transaction.userID),
        ])
        transaction.todoWritten(from: current, to: result)
        transaction.changed(result)
        return result
    }

    /// `updated` as it is to be written over `current` (a live todo, or a tombstone being
    /// restored), with its new version, not yet written; nil when it changes nothing (a patch
    /// that changes nothing keeps the version).
    func updatedTodo(_ current: Todo, _ updated: Todo, in transaction: WriteTransaction) throws -> Todo? {
        let restoring = current.deletedAt != nil
        guard restoring || !updated.hasSameContent(as: current) else { return nil }
        if restoring || updated.tagID != current.tagID { try requireLiveTag(updated.tagID, in: transaction) }
        var result = updated
        result.deletedAt = nil
        result.version = try transaction.nextVersion()
        result.updatedAt = transaction.now.rfc3339
        try requireStorable(result)
        return result
    }

    /// Soft-deletes a live todo.
    public func deleteTodo(userID: Int64, id: Int64, ifMatch: IfMatch?) throws {
        try write(userID: userID, operations: 1) { transaction in
            let current = try liveTodo(id: id, in: transaction)
            try check(ifMatch, current: current)
            _ = try deleteTodo(current, in: transaction)
        }
    }

    func deleteTodo(_ current: Todo, in transaction: WriteTransaction) throws -> Todo {
        let result = try deletedTodo(current, in: transaction)
        try db.execute(SQL.Todos.softDelete, [
            .timestamp(transaction.now), .timestamp(transaction.now), .int(result.version),
            .optionalInt(transaction.device), .int(current.id), .int(transaction.userID),
        ])
        transaction.todoWritten(from: current, to: result)
        transaction.changed(result)
        return result
    }

    /// The tombstone of `current` (a live todo), with its new version, not yet written.
    func deletedTodo(_ current: Todo, in transaction: WriteTransaction) throws -> Todo {
        var result = current
        result.version = try transaction.nextVersion()
        result.updatedAt = transaction.now.rfc3339
        result.deletedAt = transaction.now.rfc3339
        return result
    }

    /// A live todo of the transaction's user, or `notFound`.
    func liveTodo(id: Int64, in transaction: WriteTransaction) throws -> Todo {
        guard let row = try db.queryOne(SQL.Todos.liveByID, [.int(id), .int(transaction.userID)]) else {
            throw DomainError.notFound
        }
        return Todo(row: row)
    }

    /// A validation error unless `tagID` is nil or one of the user's live tags.
    func requireLiveTag(_ tagID: Int64?, in transaction: WriteTransaction) throws {
        guard let tagID else { return }
        guard try db.queryOne(SQL.Tags.isLive, [.int(tagID), .int(transaction.userID)]) != nil else {
            throw DomainError.validation(field: "tagId", "must be null or the id of one of your tags")
        }
    }
}

extension Todo {
    /// What the daily-stat formulas need of this todo.
    var statInput: StatInput {
        StatInput(isCompleted: isCompleted, isLife: isLife, difficulty: difficulty, estimatedTime: estimatedTime,
                  tagID: tagID)
    }
}

extension SQL {
    enum Todos {
        /// `TodoColumn`'s columns, in its order (what `Todo(row:)` decodes).
        static let columns = TodoColumn.selectList
        static let liveByID = """
            SELECT \(columns) FROM todos WHERE id = ? AND user_id = ? AND deleted_at IS NULL
            """
        static let byClientKey = """
            SELECT \(columns) FROM todos WHERE user_id = ? AND client_key = ?
            """
        /// Create, update and soft delete (`RecordStatements`: their parameters).
        static let writes = RecordStatements<TodoColumn>(table: "todos")
        static let insert = writes.insert, update = writes.update, softDelete = writes.softDelete
        static let liveWithTag = """
            SELECT \(columns) FROM todos WHERE user_id = ? AND tag_id = ? AND deleted_at IS NULL ORDER BY id
            """
        static let clearTag = """
            UPDATE todos SET tag_id = NULL, version = ?, updated_at = ?, changed_by_device = NULL
             WHERE id = ? AND user_id = ?
            """
        /// Tombstones keep no tag reference either (no version bump: a tombstone's payload has no tagId).
        static let clearTagOnTombstones = """
            UPDATE todos SET tag_id = NULL WHERE user_id = ? AND tag_id = ? AND deleted_at IS NOT NULL
            """
    }
}
