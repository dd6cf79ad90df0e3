import GRDB
import TodoSyncCore

/// What one applied pull page held.
struct AppliedPage: Sendable {
    var records: Int
    var hasMore: Bool
}

extension LocalStore {
    /// The stored pull cursor; nil before the first complete page of a first sync or after 410.
    func pullCursor() throws -> String? {
        try pool.read { try Meta.get($0, .cursor) }
    }

    /// Starts a full pull (first sync, or a resync after 410): forgets the cursor and opens a new
    /// generation, so that at the end the records the server no longer sends can be told apart.
    /// A full pull interrupted by a crash resumes from its last applied page.
    func beginFullPull() throws {
        try pool.write { db in
            guard try Meta.get(db, .resyncActive) == nil else { return }
            let generation = (Int64(try Meta.get(db, .generation) ?? "0") ?? 0) + 1
            try Meta.set(db, .generation, String(generation))
            try Meta.set(db, .resyncActive, String(generation))
            try Meta.set(db, .cursor, nil)
        }
    }

    /// Starts the full pull over (410 during a pull): a new generation, no cursor.
    func restartFullPull() throws {
        try pool.write { db in try Meta.set(db, .resyncActive, nil) }
        try beginFullPull()
    }

    /// Whether a full pull is under way (its pages go without deviceId: after a 410 the device's
    /// own records must come back too, or they would look gone).
    func isFullPullActive() throws -> Bool {
        try pool.read { try Meta.get($0, .resyncActive) != nil }
    }

    /// Ends a full pull: synced records the server did not send and that have nothing on its way
    /// (and no unacknowledged rejection) are gone from the server; offline creates stay pending.
    func finishFullPull() throws {
        try pool.write { db in
            guard let text = try Meta.get(db, .resyncActive), let generation = Int64(text) else { return }
            for table in ["todo", "tag"] {
                try db.execute(sql: """
                    DELETE FROM \(table) WHERE id IS NOT NULL AND seenGeneration < ?
                      AND NOT EXISTS (SELECT 1 FROM outbox WHERE outbox.entity = ? AND outbox.recordLocalId = \(table).localId)
                    """, arguments: [generation, table])
            }
            try db.execute(sql: "UPDATE todo SET tagLocalId = NULL WHERE tagLocalId IS NOT NULL AND tagLocalId NOT IN (SELECT localId FROM tag)")
            try db.execute(sql: "DELETE FROM dailyStat WHERE seenGeneration < ?", arguments: [generation])
            try Meta.set(db, .resyncActive, nil)
        }
    }

    /// Applies one pull page and its cursor in one transaction: after a crash the device holds
    /// either the whole page and its cursor or neither.
    func applyPullPage(_ page: DecodedPage, whileOpen: (@Sendable () throws -> Void)? = nil) throws -> AppliedPage {
        guard let cursor = page.cursor, let hasMore = page.hasMore else {
            throw SyncError.protocolError("pull page without cursor/hasMore")
        }
        return try pool.write { db in
            let generation = Int64(try Meta.get(db, .resyncActive) ?? "0") ?? 0
            // Records with operations on their way (usually none): only these need the slow path.
            var unsettled: [EntityKind: [Int64: [OutboxOperation]]] = [:]
            for op in try OutboxOperation.fetchAll(db) where op.state == .pending || op.state == .sending {
                unsettled[op.entity, default: [:]][op.recordLocalID, default: []].append(op)
            }
            for (entity, upserted, deleted) in [(EntityKind.tag, page.tags, page.tagTombstones), (.todo, page.todos, page.todoTombstones)] {
                let pending = unsettled[entity] ?? [:]
                // Only a record this device created and has no server id for yet can be found by
                // clientId alone; when there is none, one index probe per record is enough.
                let byClientID = try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(entity.rawValue) WHERE id IS NULL)")!
                for record in upserted {
                    let localID = try findLocal(db, entity, id: record.id, clientID: byClientID ? record.clientID : nil)
                    try applyServerRecord(db, entity, localID: localID, record,
                                          unsettled: localID.map { pending[$0] ?? [] } ?? [], generation: generation)
                }
                for tombstone in deleted {
                    try applyTombstone(db, entity, tombstone, unsettled: pending)
                }
            }
            for stat in page.stats {
                guard let id = stat.id, let date = stat.date else { continue }
                try db.cachedStatement(sql: "DELETE FROM dailyStat WHERE date = ? AND id <> ?").execute(arguments: [date, id])
                try db.cachedStatement(sql: """
                    INSERT INTO dailyStat (id, date, version, deletedAt, json, seenGeneration) VALUES (?, ?, ?, NULL, ?, ?)
                    ON CONFLICT(id) DO UPDATE SET date = excluded.date, version = excluded.version, deletedAt = NULL,
                                                  json = excluded.json, seenGeneration = excluded.seenGeneration
                    """).execute(arguments: [id, date, stat.version, String(decoding: stat.json, as: UTF8.self), generation])
            }
            for tombstone in page.statTombstones {
                guard let id = tombstone.id else { continue }
                try db.cachedStatement(sql: "UPDATE dailyStat SET deletedAt = ?, version = ? WHERE id = ?")
                    .execute(arguments: [tombstone.deletedAt, tombstone.version, id])
            }
            try whileOpen?()
            try Meta.set(db, .cursor, cursor)
            return AppliedPage(records: page.count, hasMore: hasMore)
        }
    }

    private func applyTombstone(_ db: Database, _ entity: EntityKind, _ tombstone: ServerRecord,
                                unsettled: [Int64: [OutboxOperation]]) throws {
        // A tombstone of a record this device never had changes nothing.
        guard let localID = try findLocal(db, entity, id: tombstone.id, clientID: tombstone.clientID) else { return }
        let pending = unsettled[localID] ?? []
        let isDeleted = pending.isEmpty || pending.contains { $0.action == .delete }
        try db.cachedStatement(sql: """
            UPDATE \(entity.rawValue) SET id = COALESCE(?, id), version = ?, deletedAt = ?, isDeleted = ? WHERE localId = ?
            """).execute(arguments: [tombstone.id, tombstone.version, tombstone.deletedAt, isDeleted, localID])
    }

    // MARK: Conflicts

    /// Settles a conflict from the inbox. `keepMine` and `edited` queue a new operation based on
    /// the server copy the user was shown (pushed with `client-wins` when it must restore a record
    /// deleted on the server); `takeTheirs` keeps the server copy the device already shows.
    @discardableResult
    public func resolveConflict(_ conflictID: Int64, _ resolution: ConflictResolution) throws -> LocalChange {
        try pool.write { db in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM conflict WHERE conflictId = ?", arguments: [conflictID]) else {
                throw LocalStoreError.notFound
            }
            let conflict = Self.conflict(row: row)
            try db.execute(sql: "DELETE FROM conflict WHERE conflictId = ?", arguments: [conflictID])
            let localID = conflict.recordLocalID
            guard try RecordFields.read(db, conflict.entity, localID: localID) != nil else { throw LocalStoreError.notFound }
            let serverDeleted = conflict.server["deletedAt"].map { !$0.isNull } ?? false
            var wanted: JSONObject
            switch resolution {
            case .takeTheirs:
                return LocalChange(localID: localID, opID: nil)
            case .keepMine:
                wanted = conflict.local
            case .edited(let fields):
                wanted = fields
            }
            if conflict.action == .delete && resolution == .keepMine {
                var op = OutboxOperation(entity: conflict.entity, action: .delete, recordLocalID: localID,
                                         baseVersion: conflict.serverVersion)
                try op.insert(db)
                try Outbox.markDeleted(db, conflict.entity, localID)
                return LocalChange(localID: localID, opID: op.opID)
            }
            var data: JSONObject = [:]
            var base: JSONObject = [:]
            for (key, value) in wanted where RecordFields.names(conflict.entity).contains(RecordFields.localName(key)) {
                let (name, local) = try RecordFields.localTerms(db, key, value)
                data[name] = local
                base[key] = conflict.server[key] ?? .null
            }
            try RecordFields.write(db, conflict.entity, localID: localID, data)
            try db.execute(sql: "UPDATE \(conflict.entity.rawValue) SET isDeleted = 0 WHERE localId = ?", arguments: [localID])
            var op = OutboxOperation(entity: conflict.entity, action: .update, recordLocalID: localID, data: data, base: base,
                                     baseVersion: conflict.serverVersion, policyOverride: serverDeleted ? .clientWins : nil)
            try op.insert(db)
            return LocalChange(localID: localID, opID: op.opID)
        }
    }
}
