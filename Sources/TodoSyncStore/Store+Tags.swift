import MariaDB
import TodoSyncCore

extension Store {
    /// The user's live tags, by id.
    public func listTags(userID: Int64) throws -> [Tag] {
        try guarded { try db.query(SQL.Tags.listLive, [.int(userID)]).map(Tag.init(row:)) }
    }

    /// One live tag of the user, or nil (deleted and other users' tags are invisible).
    public func tag(userID: Int64, id: Int64) throws -> Tag? {
        try guarded { try db.queryOne(SQL.Tags.liveByID, [.int(id), .int(userID)]).map(Tag.init(row:)) }
    }

    /// Creates a tag; with a known `clientId`, returns the existing tag (maybe a tombstone) instead.
    public func createTag(userID: Int64, _ draft: TagDraft) throws -> Created<Tag> {
        try write(userID: userID, operations: 1) { transaction in try createTag(draft, in: transaction) }
    }

    func createTag(_ draft: TagDraft, in transaction: WriteTransaction) throws -> Created<Tag> {
        let clientKey = draft.clientID.map(ClientID.key)
        if let clientKey,
           let existing = try db.queryOne(SQL.Tags.byClientKey, [.int(transaction.userID), .text(clientKey)]) {
            return Created(record: Tag(row: existing), isNew: false)
        }
        let version = try transaction.nextVersion()
        let now = transaction.now
        var tag = Tag(id: 0, clientID: draft.clientID, name: draft.name, color: draft.color,
                      version: version, createdAt: now.rfc3339, updatedAt: now.rfc3339, deletedAt: nil)
        let inserted = try db.execute(SQL.Tags.insert, [.int(transaction.userID), .optionalText(draft.clientID), .optionalText(clientKey)]
            + TagColumn.contentValues(of: tag)
            + [.int(version), .timestamp(now), .timestamp(now), .optionalInt(transaction.device)])
        tag.id = Int64(inserted.lastInsertID)
        transaction.liveRecords(+1)
        transaction.changed(tag, isNew: true)
        return Created(record: tag, isNew: true)
    }

    /// Applies a patch to a live tag. A patch that changes nothing keeps the version.
    public func updateTag(userID: Int64, id: Int64, _ patch: TagPatch, ifMatch: IfMatch?) throws -> Tag {
        try write(userID: userID, operations: 1) { transaction in
            let current = try liveTag(id: id, in: transaction)
            try check(ifMatch, current: current)
            return try updateTag(current, patch.applied(to: current), in: transaction)
        }
    }

    /// Writes `updated` over `current` (a live tag, or a tombstone being restored).
    func updateTag(_ current: Tag, _ updated: Tag, in transaction: WriteTransaction) throws -> Tag {
        let restoring = current.deletedAt != nil
        guard restoring || updated.name != current.name || updated.color != current.color else { return current }
        var result = updated
        result.deletedAt = nil
        result.version = try transaction.nextVersion()
        result.updatedAt = transaction.now.rfc3339
        try db.execute(SQL.Tags.update, TagColumn.contentValues(of: result) + [
            .int(result.version), .timestamp(transaction.now), .optionalInt(transaction.device), .int(current.id),
            .int(transaction.userID),
        ])
        if restoring { transaction.liveRecords(+1) }
        transaction.tagChanged(current.id)
        transaction.changed(result)
        return result
    }

    /// Soft-deletes a live tag; its todos lose the tag (and get new versions).
    public func deleteTag(userID: Int64, id: Int64, ifMatch: IfMatch?) throws {
        try write(userID: userID, operations: 1) { transaction in
            let current = try liveTag(id: id, in: transaction)
            try check(ifMatch, current: current)
            _ = try deleteTag(current, in: transaction)
        }
    }

    /// Un-tags the tag's todos, then writes its tombstone. The order matters for sync: the todos'
    /// new versions come before the tombstone's, so a pull never hands a client a deleted tag
    /// while todos in its store still point at it.
    func deleteTag(_ current: Tag, in transaction: WriteTransaction) throws -> Tag {
        let userID = transaction.userID
        let now = transaction.now
        for row in try db.query(SQL.Todos.liveWithTag, [.int(userID), .int(current.id)]) {
            let tagged = Todo(row: row)
            var todo = tagged
            todo.tagID = nil
            todo.version = try transaction.nextVersion()
            todo.updatedAt = now.rfc3339
            try db.execute(SQL.Todos.clearTag, [.int(todo.version), .timestamp(now), .int(todo.id), .int(userID)])
            transaction.todoChanged(from: tagged, to: todo)
            transaction.changed(todo, derived: true)
        }
        try db.execute(SQL.Todos.clearTagOnTombstones, [.int(userID), .int(current.id)])
        var result = current
        result.version = try transaction.nextVersion()
        result.updatedAt = now.rfc3339
        result.deletedAt = now.rfc3339
        try db.execute(SQL.Tags.softDelete, [
            .timestamp(now), .timestamp(now), .int(result.version), .optionalInt(transaction.device), .int(current.id),
            .int(userID),
        ])
        transaction.liveRecords(-1)
        transaction.changed(result)
        return result
    }

    /// A live tag of the transaction's user, or `notFound`.
    func liveTag(id: Int64, in transaction: WriteTransaction) throws -> Tag {
        guard let row = try db.queryOne(SQL.Tags.liveByID, [.int(id), .int(transaction.userID)]) else {
            throw DomainError.notFound
        }
        return Tag(row: row)
    }

    /// `versionMismatch` with the current record unless `ifMatch` is absent or matches its version
    /// (or a test build's injected bug ignores it: `StoreFaults.ignoreVersionCheck`).
    func check<Record: PushRecord>(_ ifMatch: IfMatch?, current: Record) throws {
        guard let ifMatch, !ifMatch.matches(current.version), !configuration.faults.ignoreVersionCheck else { return }
        var writer = JSONWriter()
        current.write(to: &writer)
        throw DomainError.versionMismatch(current: writer.bytes, version: current.version)
    }
}

/// The result of an idempotent create: the record, and whether this call made it.
public struct Created<Record: Sendable>: Sendable {
    public let record: Record
    /// False when a record with the same clientId already existed (the contract's 200 case).
    public let isNew: Bool
}

extension SQL {
    enum Tags {
        /// `TagColumn`'s columns, in its order (what `Tag(row:)` decodes).
        static let columns = TagColumn.selectList
        static let listLive = """
            SELECT \(columns) FROM tags WHERE user_id = ? AND deleted_at IS NULL ORDER BY id
            """
        static let liveByID = """
            SELECT \(columns) FROM tags WHERE id = ? AND user_id = ? AND deleted_at IS NULL
            """
        static let byClientKey = """
            SELECT \(columns) FROM tags WHERE user_id = ? AND client_key = ?
            """
        static let isLive = "SELECT 1 FROM tags WHERE id = ? AND user_id = ? AND deleted_at IS NULL"
        /// Create, update and soft delete (`RecordStatements`: their parameters).
        static let writes = RecordStatements<TagColumn>(table: "tags")
        static let insert = writes.insert, update = writes.update, softDelete = writes.softDelete
    }
}
