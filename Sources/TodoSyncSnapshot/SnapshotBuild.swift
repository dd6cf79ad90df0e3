#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import SystemSQLite
import TodoSyncCore

extension SnapshotCache {
    /// What a build reads from the database: it calls its argument once per live record (kind and
    /// rendered JSON, bytes valid only during the call) from one consistent read, and returns the
    /// user's version and epoch at that read and when it was taken. What the argument throws ends
    /// the read and must be rethrown.
    public typealias RecordSource = ((FeedKind, UnsafeRawBufferPointer) throws -> Void) throws
        -> (version: Int64, epoch: UInt64, readAt: Timestamp)

    /// Builds the user's file at `schemaVersion` from `records`: each record written into the file
    /// as it streams in (`SnapshotTableWriter`), then moved into the cache under its digest. Past
    /// `deadline` the build stops with `DomainError.snapshotTooSlow(retryAfterSeconds: 0)`.
    ///
    /// The file is written the way `VACUUM INTO` would write it, so that no second copy is needed:
    /// one transaction, no journal (a failed build's file is thrown away; the header still says
    /// rollback-journal mode), 64 KiB pages (the largest: fewest pages, writes and B-tree levels;
    /// the file within 3 % of a 4 KiB one's size, and a reader copies it sequentially anyway), rows appended in
    /// `id` order, no index but the tables' own. The feed is read in version order, which is `id`
    /// order only for an account whose records were never edited; when a table's rows came out of
    /// order its pages were split on the way, and the file is compacted by `VACUUM INTO` as before.
    ///
    /// `window`: a window's file (`records` gives only the window's records): its cursor is a
    /// cursor of that window, `snapshot_meta` names it (`windowFrom`, `windowTo`), and it is cached
    /// under a key of its own.
    public func build(userID: Int64, schemaVersion: Int, window: SyncWindow? = nil, deadline: RequestDeadline?,
                      records source: RecordSource) throws -> Entry {
        let started = Timestamp.now()
        try prepareDirectory(userID)
        let scratch = try scratchPath(userID, ".sqlite")
        let compact = try scratchPath(userID, ".vacuum")
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
            let (version, epoch, readAt) = try source { kind, body in
                records += 1
                if records % 1024 == 0, let deadline, deadline.hasPassed {
                    throw DomainError.snapshotTooSlow(retryAfterSeconds: 0)
                }
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
            if let deadline, deadline.hasPassed { throw DomainError.snapshotTooSlow(retryAfterSeconds: 0) }
            if !writers.allSatisfy(\.inIDOrder) {
                // The copy is compact and in rollback-journal mode (journal_mode=DELETE: VACUUM INTO
                // writes the header of a rollback-journal database whatever the scratch file's mode).
                let quoted = compact.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "''")
                try file.execute("VACUUM INTO '\(quoted)'")
                finished = compact
                SnapshotMetrics.compacted.increment()
            }
            return (version, epoch)
        }()  // the file is closed here, before its bytes are digested
        let key = Key(userID: userID, epoch: epoch, version: version, schemaVersion: schemaVersion, window: window)
        let entry = try install(finished, key: key)
        SnapshotMetrics.built(records: records, seconds: Double(Timestamp.now().millisecondsSinceEpoch
            - started.millisecondsSinceEpoch) / 1000)
        return entry
    }
}

/// Snapshot builds, as metrics.
public enum SnapshotMetrics {
    static let builds = Counter(label: "todosync_snapshot_builds_total")
    static let buildRecords = Counter(label: "todosync_snapshot_build_records_total")
    static let buildSeconds = FloatingPointCounter(label: "todosync_snapshot_build_seconds_total")
    public static let tooSlow = Counter(label: "todosync_snapshot_builds_too_slow_total")
    static let compacted = Counter(label: "todosync_snapshot_builds_compacted_total")

    static func built(records: Int, seconds: Double) {
        builds.increment()
        buildRecords.increment(by: records)
        buildSeconds.increment(by: seconds)
    }
}
