#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import MariaDB
import TodoSyncCore
import TodoSyncSnapshot

extension Store {
    /// The user's snapshot file at `schemaVersion` (contract "Sync: snapshot", docs/SNAPSHOT.md):
    /// the newest cached one of the user's current version and epoch, or one built now. Concurrent
    /// requests for one key build it once (`SnapshotCache.withBuildLock`); the others wait for it
    /// within their own budget. A build that does not fit the request budget is abandoned; when
    /// it had at least half the budget, the account is noted too large and answered
    /// `DomainError.snapshotTooSlow` (503, `Retry-After`) without a new try until the cache's age limit
    /// has passed (with less: `busy`, 503 `Retry-After: 1`).
    ///
    /// `afterRead` (the test hooks' pause): run by a build right after its consistent read began,
    /// so that writes can commit while it runs.
    ///
    /// `window`: a window's snapshot (every tag, the window's todos and daily stats), cached apart.
    public func snapshot(userID: Int64, schemaVersion: Int, window: SyncWindow? = nil,
                         afterRead: (() -> Void)? = nil) throws -> SnapshotCache.Entry {
        guard let cache = configuration.snapshotCache else { throw DomainError.notFound }
        let state = try guarded { try db.queryOne(SQL.Pull.syncState, [.text(""), .int(userID)]) }
        guard let state else { throw DomainError.unauthenticated }
        typealias S = SQL.Pull.SyncStateColumn
        if state.bool(S.backfilling) == true { throw DomainError.unavailable }  // feed still being back-filled
        let key = SnapshotCache.key(userID: userID, epoch: UInt64(bitPattern: state.int64(S.epoch)!),
                                    version: state.int64(S.changeSequence)!, schemaVersion: schemaVersion, window: window)
        if let entry = cache.lookup(key) { return entry }
        if let wait = cache.tooSlowRetryAfter(key) { throw DomainError.snapshotTooSlow(retryAfterSeconds: wait) }
        let entry = try cache.withBuildLock(key, deadline: deadline) { () throws -> SnapshotCache.Entry in
            // Built by the request that held the lock before this one.
            if let entry = cache.lookup(key) { return entry }
            if let wait = cache.tooSlowRetryAfter(key) { throw DomainError.snapshotTooSlow(retryAfterSeconds: wait) }
            // The budget this build starts with: one that waited for most of it (for the lock,
            // or in the queue) and then ran out says nothing about the account's size.
            let left = deadline.map { $0.millisecondsSinceEpoch - Timestamp.now().millisecondsSinceEpoch }
            do {
                let built = try configuration.snapshotBuildSlots.withSlot(client: "\(userID)") {
                    try cache.build(userID: userID, schemaVersion: schemaVersion, window: window, deadline: deadline) {
                        record in try readLiveRecords(userID: userID, window: window, afterRead: afterRead, record)
                    }
                }
                guard let built else { throw DomainError.snapshotBusy }
                return built
            } catch DomainError.snapshotTooSlow {
                guard let left, left * 2 >= configuration.requestBudgetMilliseconds else { throw DomainError.snapshotBusy }
                cache.markTooSlow(key)
                SnapshotMetrics.tooSlow.increment()
                throw DomainError.snapshotTooSlow(retryAfterSeconds: cache.maximumAgeSeconds)
            }
        }
        guard let entry else { throw DomainError.snapshotBusy }
        return entry
    }

    /// Streams the user's live records (kind and rendered JSON) from one transaction whose first
    /// read fixes the InnoDB snapshot; returns the user's version and epoch at that snapshot and
    /// when it was taken. `body` sees each record's bytes where they lie; what it throws ends the
    /// read and is rethrown.
    /// With `window`, the tags and the window's todos and daily stats only.
    private func readLiveRecords(userID: Int64, window: SyncWindow?, afterRead: (() -> Void)?,
                                 _ body: (FeedKind, UnsafeRawBufferPointer) throws -> Void) throws
        -> (version: Int64, epoch: UInt64, readAt: Timestamp) {
        var stopped: Error?
        return try guarded {
            try db.inTransaction(maxAttempts: 1, readOnly: true) { () throws -> (Int64, UInt64, Timestamp) in
                let readAt = Timestamp.now()
                // The first read fixes the snapshot that the feed read below sees.
                guard let state = try db.queryOne(SQL.Pull.syncState, [.text(""), .int(userID)]) else {
                    throw DomainError.unauthenticated
                }
                afterRead?()
                do {
                    let (sql, parameters): (String, [DatabaseValue]) = window.map {
                        (WindowPull.snapshotRecords, [.int(userID), .day($0.lowerBound), .day($0.upperBound)])
                    } ?? (SQL.Snapshot.liveRecords, [.int(userID)])
                    try db.forEachRow(sql, parameters) { row throws(DatabaseError) in
                        do {
                            let kind = FeedKind(rawValue: try row.int64(SQL.Snapshot.LiveRecordColumn.kind)!)!
                            var failure: Error?
                            _ = try row.withBytes(SQL.Snapshot.LiveRecordColumn.body) { bytes in
                                do { try body(kind, bytes) } catch { failure = error }
                            }
                            if let failure { throw failure }
                        } catch {
                            stopped = error
                            throw DatabaseError(code: 0, message: "snapshot build stopped")
                        }
                    }
                } catch {
                    if let stopped { throw stopped }
                    throw error
                }
                typealias S = SQL.Pull.SyncStateColumn
                return (state.int64(S.changeSequence)!, UInt64(bitPattern: state.int64(S.epoch)!), readAt)
            }
        }
    }
}

extension Store {
    /// The size in bytes of a cache file (`relativePath` of an entry or companion); nil when gone.
    public func snapshotFileSize(_ relativePath: String) -> Int64? {
        guard let cache = configuration.snapshotCache else { return nil }
        var info = stat()
        return stat("\(cache.directory)/\(relativePath)", &info) == 0 ? Int64(info.st_size) : nil
    }

    /// The gzip companion of `entry` (`SnapshotCache.makeCompanion`), within this request's
    /// budget; nil when it could not be made in time (serve the file itself).
    public func snapshotGzip(_ entry: SnapshotCache.Entry) throws -> SnapshotCache.Companion? {
        try configuration.snapshotCache?.makeCompanion(of: entry, deadline: deadline)
    }
}

extension SQL {
    /// A snapshot's records (Store+Snapshot.swift): every live record of the user as the change
    /// feed holds it rendered, read in the snapshot's one transaction. Columns: kind, body.
    enum Snapshot {
        static let liveRecords = "SELECT kind, body FROM sync_feed WHERE user_id = ? AND deleted_at IS NULL"
        enum LiveRecordColumn: Int, ResultColumns { case kind, body }
    }
}
