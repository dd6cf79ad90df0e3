#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import MariaDB
import SystemSQLite
import TodoSyncCore

extension Store {
    /// The user's snapshot file at `schemaVersion` (contract "Sync: snapshot", docs/SNAPSHOT.md):
    /// the newest cached one of the user's current version and epoch, or one built now. Concurrent
    /// requests for one key build it once (`SnapshotCache.withBuildLock`); the others wait for it
    /// within their own budget. A build that does not fit the request budget is abandoned; when
    /// it had at least half the budget, the account is noted too large and answered
    /// `SnapshotError.tooSlow` (503, `Retry-After`) without a new try until the cache's age limit
    /// has passed (with less: `busy`, 503 `Retry-After: 1`).
    ///
    /// `holdMilliseconds` (test hooks only): the build sleeps that long right after its consistent
    /// read began, so writes can commit while it runs.
    ///
    /// `window`: a window's snapshot (every tag, the window's todos and daily stats), cached apart.
    public func snapshot(userID: Int64, schemaVersion: Int, window: SyncWindow? = nil,
                         holdMilliseconds: Int = 0) throws -> SnapshotCache.Entry {
        guard let cache = configuration.snapshotCache else { throw DomainError.notFound }
        let state = try guarded { try db.queryOne(SQL.Pull.syncState, [.text(""), .int(userID)]) }
        guard let state else { throw DomainError.unauthenticated }
        if state.bool(4) == true { throw DomainError.unavailable }  // feed still being back-filled
        let key = SnapshotCache.Key(userID: userID, epoch: UInt64(bitPattern: state.int64(3)!), version: state.int64(0)!,
                                    schemaVersion: schemaVersion, window: window)
        if let entry = cache.lookup(key) { return entry }
        if let wait = cache.tooSlowRetryAfter(key) { throw SnapshotError.tooSlow(retryAfterSeconds: wait) }
        let entry = try cache.withBuildLock(key, deadline: deadline) { () throws -> SnapshotCache.Entry in
            // Built by the request that held the lock before this one.
            if let entry = cache.lookup(key) { return entry }
            if let wait = cache.tooSlowRetryAfter(key) { throw SnapshotError.tooSlow(retryAfterSeconds: wait) }
            // The budget this build starts with: one that waited for most of it (for the lock,
            // or in the queue) and then ran out says nothing about the account's size.
            let left = deadline.map { $0.millisecondsSinceEpoch - Timestamp.now().millisecondsSinceEpoch }
            do {
                let built = try configuration.snapshotBuildSlots.withSlot(client: "\(userID)") {
                    try buildSnapshot(userID: userID, schemaVersion: schemaVersion, window: window, cache: cache,
                                      holdMilliseconds: holdMilliseconds)
                }
                guard let built else { throw SnapshotError.busy }
                return built
            } catch SnapshotError.tooSlow {
                guard let left, left * 2 >= configuration.requestBudgetMilliseconds else { throw SnapshotError.busy }
                cache.markTooSlow(key)
                SnapshotMetrics.tooSlow.increment()
                throw SnapshotError.tooSlow(retryAfterSeconds: cache.maximumAgeSeconds)
            }
        }
        guard let entry else { throw SnapshotError.busy }
        return entry
    }

    /// Builds the file: one transaction of the database (its first read fixes the InnoDB snapshot
    /// that gives both the cursor and the records), each record written into the file as it
    /// streams in (`SnapshotTableWriter`), then moved into the cache under its digest.
    ///
    /// The file is written the way `VACUUM INTO` would write it, so that no second copy is needed:
    /// one transaction, no journal (a failed build's file is thrown away; the header still says
    /// rollback-journal mode), 64 KiB pages (the largest: fewest pages, writes and B-tree levels;
    /// the file within 3 % of a 4 KiB one's size, and a reader copies it sequentially anyway), rows appended in
    /// `id` order, no index but the tables' own. The feed is read in version order, which is `id`
    /// order only for an account whose records were never edited; when a table's rows came out of
    /// order its pages were split on the way, and the file is compacted by `VACUUM INTO` as before.
    private func buildSnapshot(userID: Int64, schemaVersion: Int, window: SyncWindow?, cache: SnapshotCache,
                               holdMilliseconds: Int) throws -> SnapshotCache.Entry {
        let started = Timestamp.now()
        try cache.prepareDirectory(userID)
        let scratch = try cache.scratchPath(userID, ".sqlite")
        let compact = try cache.scratchPath(userID, ".vacuum")
        defer {
            unlink(scratch)
            unlink(compact)
        }
        var records = 0
        var finished = scratch
        let (version, epoch) = try {
            let file = try SQLiteDatabase(path: scratch)
            try file.execute("""
                PRAGMA page_size = 65536; PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;
                PRAGMA locking_mode = EXCLUSIVE; PRAGMA cache_size = -16384; BEGIN
                """)
            let tables = SnapshotTable.tables(schemaVersion: schemaVersion)
            for table in tables { try file.execute(table.createSQL) }
            try file.execute("CREATE TABLE snapshot_meta (key TEXT PRIMARY KEY, value TEXT)")
            let writers = try tables.map { try SnapshotTableWriter($0, in: file) }
            // By the feed's kind (1 tag, 2 todo, 3 daily stat): an array, read once per record.
            var byKind = [SnapshotTableWriter?](repeating: nil, count: 4)
            for writer in writers { byKind[Int(writer.table.kind.rawValue)] = writer }
            let (version, epoch, readAt) = try readLiveRecords(userID: userID, window: window,
                                                               holdMilliseconds: holdMilliseconds) {
                kind, body in
                records += 1
                if records % 1024 == 0, let deadline, deadline.hasPassed { throw SnapshotError.tooSlow(retryAfterSeconds: 0) }
                try byKind[Int(kind.rawValue)]!.insert(body)
            }
            let cursor = SyncCursor(position: version, skipTombstonesThrough: version, userID: userID, epoch: epoch,
                                    window: window)
            let meta = try file.prepare("INSERT INTO snapshot_meta (key, value) VALUES (?1, ?2)")
            let metaRows: [(String, String)] = [
                ("format", "todosync-snapshot"), ("userId", "\(userID)"), ("cursor", cursor.encoded),
                ("schemaVersion", "\(schemaVersion)"), ("createdAt", readAt.rfc3339), ("recordCount", "\(records)"),
            ] + (window.map { [("windowFrom", $0.from?.description ?? ""), ("windowTo", $0.to?.description ?? "")] } ?? [])
            for (name, value) in metaRows {
                var name = name, value = value
                try name.withUTF8 { n in try value.withUTF8 { v in
                    try meta.run(text: [UnsafeRawBufferPointer(n), UnsafeRawBufferPointer(v)])
                } }
            }
            try file.execute("PRAGMA user_version = \(schemaVersion); COMMIT")
            if let deadline, deadline.hasPassed { throw SnapshotError.tooSlow(retryAfterSeconds: 0) }
            if !writers.allSatisfy(\.inIDOrder) {
                // The copy is compact and in rollback-journal mode (journal_mode=DELETE: VACUUM INTO
                // writes the header of a rollback-journal database whatever the scratch file's mode).
                try file.execute("VACUUM INTO '\(compact.replacingOccurrences(of: "'", with: "''"))'")
                finished = compact
                SnapshotMetrics.compacted.increment()
            }
            return (version, epoch)
        }()  // the file is closed here, before its bytes are digested
        let key = SnapshotCache.Key(userID: userID, epoch: epoch, version: version, schemaVersion: schemaVersion,
                                    window: window)
        let entry = try cache.install(finished, key: key)
        SnapshotMetrics.built(records: records, seconds: Double(Timestamp.now().millisecondsSinceEpoch
            - started.millisecondsSinceEpoch) / 1000)
        return entry
    }

    /// Streams the user's live records (kind and rendered JSON) from one transaction whose first
    /// read fixes the InnoDB snapshot; returns the user's version and epoch at that snapshot and
    /// when it was taken. `body` sees each record's bytes where they lie; what it throws ends the
    /// read and is rethrown.
    /// With `window`, the tags and the window's todos and daily stats only.
    private func readLiveRecords(userID: Int64, window: SyncWindow?, holdMilliseconds: Int,
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
                if holdMilliseconds > 0 { usleep(useconds_t(holdMilliseconds) * 1000) }
                do {
                    let (sql, parameters): (String, [DatabaseValue]) = window.map {
                        (WindowPull.snapshotRecords, [.int(userID), .day($0.lowerBound), .day($0.upperBound)])
                    } ?? (SQL.Snapshot.liveRecords, [.int(userID)])
                    try db.forEachRow(sql, parameters) { row throws(DatabaseError) in
                        do {
                            let kind = FeedKind(rawValue: try row.int64(0)!)!
                            var failure: Error?
                            _ = try row.withBytes(1) { bytes in
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
                return (state.int64(0)!, UInt64(bitPattern: state.int64(3)!), readAt)
            }
        }
    }
}

/// Snapshot builds, as metrics.
enum SnapshotMetrics {
    static let builds = Counter(label: "todosync_snapshot_builds_total")
    static let buildRecords = Counter(label: "todosync_snapshot_build_records_total")
    static let buildSeconds = FloatingPointCounter(label: "todosync_snapshot_build_seconds_total")
    static let tooSlow = Counter(label: "todosync_snapshot_builds_too_slow_total")
    static let compacted = Counter(label: "todosync_snapshot_builds_compacted_total")

    static func built(records: Int, seconds: Double) {
        builds.increment()
        buildRecords.increment(by: records)
        buildSeconds.increment(by: seconds)
    }
}
