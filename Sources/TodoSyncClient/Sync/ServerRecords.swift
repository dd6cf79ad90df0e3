import Foundation
import GRDB
import TodoSyncCore

/// Writes what the server sent (push results and pull pages) into the device's tables: tags and
/// todos (keeping what operations still on their way change), tombstones, daily stats. The
/// outbox's state is not touched here (that is `Outbox`).
enum ServerRecords {
    /// Writes a record the server sent in a push result into the device's row `localID` (or the
    /// row it names, or a new row), keeping the fields that operations still on their way change
    /// and their base untouched. Returns the row's local id.
    @discardableResult
    static func apply(_ db: Database, _ entity: EntityKind, localID: Int64?, _ record: ServerRecord,
                      unsettled: [OutboxOperation]? = nil) throws -> Int64 {
        switch entity {
        case .tag: return try apply(db, TagRecord.self, localID: localID, record, unsettled: unsettled)
        case .todo: return try apply(db, TodoRecord.self, localID: localID, record, unsettled: unsettled)
        }
    }

    private static func apply<R: SyncedRecord>(_ db: Database, _ type: R.Type, localID: Int64?, _ record: ServerRecord,
                                               unsettled: [OutboxOperation]?) throws -> Int64 {
        let row: R?
        if let localID {
            // The operation's own row (it cannot be gone while the operation is in the outbox).
            guard let own = try R.fetchOne(db, key: localID) else { return localID }
            row = own
        } else {
            row = try find(db, R.self, id: record.id, clientID: record.clientID)
        }
        let pending = try row?.state.localID.map { try unsettled ?? OutboxOperation.unsettled(db, entity: R.entity, localID: $0) }
        return try write(db, row, record, unsettled: pending ?? [], generation: 0)
    }

    /// Writes the records of one pull page (`pending`: the operations on their way, by record).
    static func applyPage(_ db: Database, _ entity: EntityKind, _ records: [ServerRecord], pending: [Int64: [OutboxOperation]],
                          generation: Int64) throws {
        switch entity {
        case .tag: try applyPage(db, TagRecord.self, records, pending: pending, generation: generation)
        case .todo: try applyPage(db, TodoRecord.self, records, pending: pending, generation: generation)
        }
    }

    private static func applyPage<R: SyncedRecord>(_ db: Database, _ type: R.Type, _ records: [ServerRecord],
                                                   pending: [Int64: [OutboxOperation]], generation: Int64) throws {
        // Only a record this device created and has no server id for yet can be found by
        // clientId alone; when there is none, one index probe per record is enough.
        let byClientID = try !R.filter(SyncState.Columns.serverID == nil).isEmpty(db)
        for record in records {
            let row = try find(db, R.self, id: record.id, clientID: byClientID ? record.clientID : nil)
            try write(db, row, record, unsettled: row?.state.localID.flatMap { pending[$0] } ?? [], generation: generation)
        }
    }

    /// The server's copy goes into `row` (a new row when nil). Returns the row's local id.
    @discardableResult
    private static func write<R: SyncedRecord>(_ db: Database, _ row: R?, _ record: ServerRecord, unsettled: [OutboxOperation],
                                               generation: Int64) throws -> Int64 {
        var tagLocalID: Int64?
        if R.entity == .todo, let tagID = record.tagID {
            tagLocalID = try localID(db, TagRecord.self, id: tagID, clientID: nil)
        }
        guard var row, let localID = row.state.localID else {
            return try insert(db, R.self, record, tagLocalID: tagLocalID, generation: generation)
        }
        if unsettled.isEmpty {
            // The common case: nothing of this device is on its way; the server's copy is the copy.
            row.takeServerFields(record, tagLocalID: tagLocalID, except: [])
            row.state.shadow = nil
        } else {
            var protected = Set<String>()
            for op in unsettled { protected.formUnion(op.data.keys) }
            let fields = R.serverFields(record, tagLocalID: tagLocalID)
            row.takeServerFields(record, tagLocalID: tagLocalID, except: protected)
            // The server's values of the protected fields, should their operation be rejected.
            var shadow = row.state.shadow ?? [:]
            for (name, value) in fields where protected.contains(name) { shadow[name] = value }
            row.state.shadow = shadow
        }
        // A tombstone for a record with a change on its way is a conflict the next push surfaces,
        // not a silent delete: the record stays visible until then.
        let pendingDelete = unsettled.contains { $0.action == .delete }
        row.state.take(record)
        row.state.isDeleted = pendingDelete || (record.deletedAt != nil && unsettled.isEmpty)
        row.state.seenGeneration = max(row.state.seenGeneration, generation)
        try row.update(db)
        if R.entity == .tag { try resolvePendingTag(db, serverID: record.id, localID: localID) }
        return localID
    }

    private static func insert<R: SyncedRecord>(_ db: Database, _ type: R.Type, _ record: ServerRecord, tagLocalID: Int64?,
                                                generation: Int64) throws -> Int64 {
        var row = R.new(from: record, tagLocalID: tagLocalID)
        row.state.take(record)
        row.state.createdAt = record.createdAt ?? Timestamp.now().rfc3339
        row.state.isDeleted = record.deletedAt != nil
        row.state.seenGeneration = generation
        try row.insertCached(db)
        let localID = row.state.localID!
        if R.entity == .tag { try resolvePendingTag(db, serverID: record.id, localID: localID) }
        return localID
    }

    /// Links the todos that named this tag before the device had it.
    private static func resolvePendingTag(_ db: Database, serverID: Int64?, localID: Int64) throws {
        guard let serverID else { return }
        try TodoRecord.filter(TodoRecord.Columns.pendingTagID == serverID)
            .updateAll(db, TodoRecord.Columns.tagLocalID.set(to: localID), TodoRecord.Columns.pendingTagID.set(to: nil))
    }

    /// The local row of a server record: by server id, else by clientId. Statements are cached
    /// and probe the index first: a first sync looks up every record it receives, most of them
    /// new.
    static func find<R: SyncedRecord>(_ db: Database, _ type: R.Type, id: Int64?, clientID: String?) throws -> R? {
        guard let localID = try localID(db, R.self, id: id, clientID: clientID) else { return nil }
        let localIDColumn = SyncState.Columns.localID.name
        return try R.fetchOne(db.cachedStatement(sql: "SELECT * FROM \(R.databaseTableName) WHERE \(localIDColumn) = ?"),
                              arguments: [localID])
    }

    /// The local id of a server record's row: by server id, else by clientId.
    static func localID<R: SyncedRecord>(_ db: Database, _ type: R.Type, id: Int64?, clientID: String?) throws -> Int64? {
        func probe(_ column: Column, _ value: some DatabaseValueConvertible) throws -> Int64? {
            try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT \(SyncState.Columns.localID.name) FROM \(R.databaseTableName) WHERE \(column.name) = ?"),
                arguments: [value])
        }
        if let id, let localID = try probe(SyncState.Columns.serverID, id) { return localID }
        guard let clientID else { return nil }
        return try probe(SyncState.Columns.clientKey, ClientID.key(clientID))
    }

    /// A tombstone: the record is hidden unless a change of this device is on its way (then the
    /// next push surfaces the conflict).
    static func applyTombstone(_ db: Database, _ entity: EntityKind, _ tombstone: ServerRecord,
                               unsettled: [Int64: [OutboxOperation]]) throws {
        switch entity {
        case .tag: try applyTombstone(db, TagRecord.self, tombstone, unsettled: unsettled)
        case .todo: try applyTombstone(db, TodoRecord.self, tombstone, unsettled: unsettled)
        }
    }

    private static func applyTombstone<R: SyncedRecord>(_ db: Database, _ type: R.Type, _ tombstone: ServerRecord,
                                                        unsettled: [Int64: [OutboxOperation]]) throws {
        // A tombstone of a record this device never had changes nothing.
        guard var row = try find(db, R.self, id: tombstone.id, clientID: tombstone.clientID), let localID = row.state.localID
        else { return }
        let pending = unsettled[localID] ?? []
        row.state.serverID = tombstone.id ?? row.state.serverID
        row.state.version = tombstone.version
        row.state.deletedAt = tombstone.deletedAt
        row.state.isDeleted = pending.isEmpty || pending.contains { $0.action == .delete }
        try row.update(db)
    }

    /// A daily stat as the server sent it (one per date: a newer id for the date replaces the old).
    static func applyStat(_ db: Database, _ stat: ServerRecord, generation: Int64) throws {
        guard let id = stat.id, let date = stat.date else { return }
        try DailyStatRecord.filter(DailyStatRecord.Columns.date == date && DailyStatRecord.Columns.id != id).deleteAll(db)
        try DailyStatRecord(id: id, date: date, version: stat.version, json: String(decoding: stat.json, as: UTF8.self),
                            seenGeneration: generation).save(db)
    }

    /// A daily stat the server deleted.
    static func applyStatTombstone(_ db: Database, _ tombstone: ServerRecord) throws {
        guard let id = tombstone.id else { return }
        try DailyStatRecord.filter(key: id).updateAll(
            db, DailyStatRecord.Columns.deletedAt.set(to: tombstone.deletedAt), DailyStatRecord.Columns.version.set(to: tombstone.version))
    }
}
