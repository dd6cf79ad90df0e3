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
            try Self.openGeneration(db)
        }
    }

    /// Opens the next generation for a full pull and forgets the cursor.
    static func openGeneration(_ db: Database) throws {
        let generation = (Int64(try Meta.get(db, .generation) ?? "0") ?? 0) + 1
        try Meta.set(db, .generation, String(generation))
        try Meta.set(db, .resyncActive, String(generation))
        try Meta.set(db, .cursor, nil)
    }

    /// Notes that pages are about to be pulled at schema version `version`. True when the store
    /// holds records pulled at an older version (an upgraded app, or a store older than
    /// versions): they lack the fields that version added, which the server will not send again
    /// for records that do not change, so everything must be pulled anew, once.
    func pullsAnew(atSchemaVersion version: Int) throws -> Bool {
        try pool.write { db in
            let fresh = try Meta.get(db, .cursor) == nil && Meta.get(db, .resyncActive) == nil
            let stored = try Meta.get(db, .schemaVersion).flatMap { Int($0) } ?? (fresh ? version : SchemaVersion.first)
            try Meta.set(db, .schemaVersion, String(version))
            return stored < version
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
            for entity in [EntityKind.todo, .tag] {
                // Nor a record with a conflict waiting for the app (a window change makes this common).
                let queued = try Self.unsettledIDs(db, entity)
                try SyncedRecords.table(entity)
                    .filter(SyncState.Columns.serverID != nil && SyncState.Columns.seenGeneration < generation
                            && !queued.contains(SyncState.Columns.localID))
                    .deleteAll(db)
            }
            let tagged = TodoRecord.Columns.tagLocalID
            try TodoRecord.filter(tagged != nil && !TagRecord.select(SyncState.Columns.localID).contains(tagged))
                .updateAll(db, tagged.set(to: nil))
            try DailyStatRecord.filter(DailyStatRecord.Columns.seenGeneration < generation).deleteAll(db)
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
            for op in try OutboxOperation.onTheirWay().order(OutboxOperation.Columns.seq).fetchAll(db) {
                unsettled[op.entity, default: [:]][op.recordLocalID, default: []].append(op)
            }
            for (entity, upserted, deleted) in [(EntityKind.tag, page.tags, page.tagTombstones), (.todo, page.todos, page.todoTombstones)] {
                let pending = unsettled[entity] ?? [:]
                try ServerRecords.applyPage(db, entity, upserted, pending: pending, generation: generation)
                for tombstone in deleted {
                    try ServerRecords.applyTombstone(db, entity, tombstone, unsettled: pending)
                }
            }
            for stat in page.stats { try ServerRecords.applyStat(db, stat, generation: generation) }
            for tombstone in page.statTombstones { try ServerRecords.applyStatTombstone(db, tombstone) }
            try Self.forgetLeft(db, todos: page.todoLeft, stats: page.statLeft)
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
