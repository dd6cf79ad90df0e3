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
                    let localID = try ServerRecords.findLocal(db, entity, id: record.id, clientID: byClientID ? record.clientID : nil)
                    try ServerRecords.apply(db, entity, localID: localID, record,
                                          unsettled: localID.map { pending[$0] ?? [] } ?? [], generation: generation)
                }
                for tombstone in deleted {
                    try ServerRecords.applyTombstone(db, entity, tombstone, unsettled: pending)
                }
            }
            for stat in page.stats { try ServerRecords.applyStat(db, stat, generation: generation) }
            for tombstone in page.statTombstones { try ServerRecords.applyStatTombstone(db, tombstone) }
            try whileOpen?()
            try Meta.set(db, .cursor, cursor)
            return AppliedPage(records: page.count, hasMore: hasMore)
        }
    }

    // MARK: Conflicts

    /// Settles a conflict from the inbox. `keepMine` and `edited` queue a new operation based on
    /// the server copy the user was shown (pushed with `client-wins` when it must restore a record
    /// deleted on the server); `takeTheirs` keeps the server copy the device already shows.
    @discardableResult
    public func resolveConflict(_ conflictID: Int64, _ resolution: ConflictResolution) throws -> LocalChange {
        try pool.write { db in try Outbox.resolveConflict(db, conflictID, resolution) }
    }
}
