import Foundation
import GRDB
#if canImport(GRDBSQLite)
import GRDBSQLite
#else
import SQLite3
#endif
import TodoSyncCore

/// Why a downloaded snapshot was not installed (the sync goes on with the paged pull).
struct SnapshotRefusal: Error, CustomStringConvertible {
    var reason: String
    init(_ reason: String) { self.reason = reason }
    var description: String { reason }
}

/// A snapshot file that passed every check of docs/SNAPSHOT.md "The file".
struct CheckedSnapshot: Sendable {
    var cursor: String
    var schemaVersion: Int
    var recordCount: Int
    /// The window the file holds (`windowFrom`/`windowTo`; whole when absent or empty).
    var window = SyncWindow.whole
}

/// Reading and installing a snapshot file (docs/SNAPSHOT.md) into the local store.
enum SnapshotFile {
    static let format = "todosync-snapshot"
    /// The snapshot's tables (docs/SNAPSHOT.md "Tables") and the name it is attached under.
    static let tags = "tags", todos = "todos", dailyStats = "daily_stats", meta = "snapshot_meta", schema = "snapshot"

    /// Checks a downloaded file: its SHA-256 is `digest`, `format` is ours, `userId` is the
    /// logged-in user, `user_version` = `schemaVersion` is one this client reads (1 through
    /// `schemaVersion`), and `recordCount` matches the tables. `fileDigest` is the file's SHA-256
    /// when the caller hashed it already (while downloading it); without it the file is read.
    static func check(path: String, digest: [UInt8], userID: String?, schemaVersion: Int,
                      fileDigest: [UInt8]? = nil) throws -> CheckedSnapshot {
        guard try fileDigest ?? SHA256Digest.ofFile(atPath: path) == digest else {
            throw SnapshotRefusal("the file's SHA-256 is not the one of Repr-Digest")
        }
        var configuration = Configuration()
        configuration.readonly = true
        let checked: (userVersion: Int, meta: [String: String], count: Int)
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            checked = try queue.read { db in
                let userVersion = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                var meta: [String: String] = [:]
                for row in try Row.fetchAll(db, sql: "SELECT key, value FROM \(Self.meta)") {
                    if let key = row["key"] as String?, let value = row["value"] as String? { meta[key] = value }
                }
                let count = try Int.fetchOne(db, sql: """
                    SELECT (SELECT COUNT(*) FROM \(tags)) + (SELECT COUNT(*) FROM \(todos)) + (SELECT COUNT(*) FROM \(dailyStats))
                    """) ?? -1
                return (userVersion, meta, count)
            }
            try queue.close()
        } catch let error as DatabaseError {
            throw SnapshotRefusal("not a readable snapshot (\(error.message ?? "\(error.resultCode)"))")
        }
        let meta = checked.meta
        guard meta["format"] == format else { throw SnapshotRefusal("format is \(meta["format"] ?? "missing"), not \(format)") }
        guard let userID, meta["userId"] == userID else { throw SnapshotRefusal("the snapshot is of another user") }
        guard (SchemaVersion.first...schemaVersion).contains(checked.userVersion), meta["schemaVersion"] == String(checked.userVersion) else {
            throw SnapshotRefusal("schema version \(checked.userVersion) is not one this client reads")
        }
        guard meta["recordCount"] == String(checked.count) else {
            throw SnapshotRefusal("recordCount \(meta["recordCount"] ?? "missing") but the tables hold \(checked.count) rows")
        }
        guard let cursor = meta["cursor"], !cursor.isEmpty else { throw SnapshotRefusal("no cursor in snapshot_meta") }
        func side(_ key: String) throws -> Day? {
            guard let text = meta[key], !text.isEmpty else { return nil }
            guard let day = Day(text) else { throw SnapshotRefusal("\(key) is not a date: \(text)") }
            return day
        }
        guard let window = SyncWindow(from: try side("windowFrom"), to: try side("windowTo")) else {
            throw SnapshotRefusal("windowFrom is after windowTo")
        }
        return CheckedSnapshot(cursor: cursor, schemaVersion: checked.userVersion, recordCount: checked.count, window: window)
    }

    /// SQL functions that compute the store's derived columns with the very code the store uses
    /// for rows it writes itself (`TitleOrder.key`, `ClientID.key`, on the argument's UTF-8 bytes).
    /// Registered with SQLite's C API rather than GRDB's `DatabaseFunction`: a million calls
    /// through the latter (an argument array, a String and a Data a call) took 0.7 s of a
    /// 1,000,000-record install (docs/BENCHMARKS.md).
    static let derivedFunctions: [(name: String, function: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void)] = [
        ("todosync_title_key", { context, _, arguments in
            derive(context, arguments) { bytes, context in
                let key = TitleOrder.key(utf8: bytes)
                key.withUnsafeBytes { sqlite3_result_blob(context, $0.baseAddress, Int32($0.count), sqliteTransient) }
            }
        }),
        ("todosync_client_key", { context, _, arguments in
            derive(context, arguments) { bytes, context in
                let key = ClientID.key(utf8: bytes)
                key.withUnsafeBytes { sqlite3_result_text(context, $0.baseAddress?.assumingMemoryBound(to: CChar.self), Int32($0.count), sqliteTransient) }
            }
        }),
    ]

    /// SQLite copies a result given with this destructor.
    static let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Calls `body` with the text of the one argument; NULL gives NULL.
    private static func derive(_ context: OpaquePointer?, _ arguments: UnsafeMutablePointer<OpaquePointer?>?,
                               _ body: (UnsafeBufferPointer<UInt8>, OpaquePointer?) -> Void) {
        guard let argument = arguments?[0], sqlite3_value_type(argument) != SQLITE_NULL,
              let text = sqlite3_value_text(argument) else {
            sqlite3_result_null(context)
            return
        }
        body(UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(argument))), context)
    }

    /// Adds (or with `remove`, drops) the derived-column functions on `db`'s connection.
    static func setDerivedFunctions(_ db: Database, remove: Bool = false) throws {
        for (name, function) in derivedFunctions {
            let code = sqlite3_create_function_v2(db.sqliteConnection, name, 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nil,
                                                  remove ? nil : function, nil, nil, nil)
            guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code), message: "cannot register \(name)") }
        }
    }

    /// `INSERT INTO <table> (every column of the record) SELECT …` from the snapshot table `from`
    /// (alias `s`): a column named like a snapshot column copies it; `derived` gives the others.
    /// The column list is the record's own (`forEachColumn`), so a new local column without a
    /// source here fails the install (and the sync falls back to the paged pull), never goes
    /// silently empty.
    static func copy<R: SyncedRecord>(_ type: R.Type, from table: String, derived: [String: String], join: String = "",
                                      copied: Set<String>) throws -> String {
        var columns: [String] = []
        var values: [String] = []
        var failure: String?
        R.new(from: ServerRecord(), tagLocalID: nil).forEachColumn { column, _ in
            guard column.name != SyncState.Columns.localID.name else { return }
            columns.append(column.name.quotedDatabaseIdentifier)
            if let expression = derived[column.name] {
                values.append(expression)
            } else if copied.contains(column.name) {
                values.append("s.\(column.name.quotedDatabaseIdentifier)")
            } else {
                failure = column.name
            }
        }
        if let failure { throw SnapshotRefusal("no snapshot source for the store's column \(R.databaseTableName).\(failure)") }
        return "INSERT INTO main.\(R.databaseTableName.quotedDatabaseIdentifier) (\(columns.joined(separator: ", "))) "
            + "SELECT \(values.joined(separator: ", ")) FROM \(schema).\(table) AS s \(join) ORDER BY s.id"
    }

    /// The bookkeeping columns of a synced row installed from a snapshot: live, seen by no resync.
    static func stateColumns() -> [String: String] {
        [
            SyncState.Columns.clientKey.name: "todosync_client_key(s.\(SyncState.Columns.clientID.name))",
            SyncState.Columns.deletedAt.name: "NULL", SyncState.Columns.isDeleted.name: "0",
            SyncState.Columns.seenGeneration.name: "0", SyncState.Columns.shadow.name: "NULL",
        ]
    }

    /// Snapshot columns named like the store's (the record's bookkeeping and its synced fields).
    static let sharedColumns: Set<String> = [
        SyncState.Columns.serverID.name, SyncState.Columns.clientID.name, SyncState.Columns.version.name,
        SyncState.Columns.createdAt.name, SyncState.Columns.updatedAt.name,
    ]

    static func insertTags() throws -> String {
        try copy(TagRecord.self, from: tags, derived: stateColumns(),
                 copied: sharedColumns.union(TagField.allCases.map(\.rawValue)))
    }

    static func insertTodos(schemaVersion: Int) throws -> String {
        let todo = TodoRecord.Columns.self
        var derived = stateColumns()
        derived[todo.titleKey.name] = "todosync_title_key(s.\(todo.title.name))"
        derived[todo.raw.name] = "COALESCE(s.\(todo.raw.name), s.\(todo.title.name))"
        // A field newer than the snapshot (notes in a version-1 one): not known, as after a pull
        // at that version.
        for field in TodoField.allCases where field.since > schemaVersion { derived[TodoRecord.column(field).name] = "NULL" }
        // The snapshot names tags by server id; the store links by local id (tags go in first).
        derived[todo.tagLocalID.name] = "g.\(SyncState.Columns.localID.name)"
        derived[todo.pendingTagID.name] = "CASE WHEN g.\(SyncState.Columns.localID.name) IS NULL THEN s.\(TodoField.tagId.rawValue) END"
        let join = "LEFT JOIN main.\(TagRecord.databaseTableName) AS g ON g.\(SyncState.Columns.serverID.name) = s.\(TodoField.tagId.rawValue)"
        let fields = TodoField.allCases.map(\.rawValue).filter { $0 != TodoField.tagId.rawValue }
        return try copy(TodoRecord.self, from: todos, derived: derived, join: join, copied: sharedColumns.union(fields))
    }

    static func insertStats() -> String {
        let stat = DailyStatRecord.Columns.self
        return """
            INSERT INTO main.\(DailyStatRecord.databaseTableName) (\(stat.id.name), \(stat.date.name), \(stat.version.name), \
            \(stat.deletedAt.name), \(stat.json.name), \(stat.seenGeneration.name))
            SELECT id, date, version, NULL, json, 0 FROM \(schema).\(dailyStats) ORDER BY id
            """
    }
}

extension LocalStore {
    /// Whether the store holds nothing a snapshot could overwrite: no record, no queued change,
    /// no conflict, no cursor (a new device after its login).
    func isEmptyForSnapshot() throws -> Bool {
        try pool.read { try Self.isEmptyForSnapshot($0) }
    }

    static func isEmptyForSnapshot(_ db: Database) throws -> Bool {
        try Meta.get(db, .cursor) == nil && TagRecord.all().isEmpty(db) && TodoRecord.all().isEmpty(db)
            && DailyStatRecord.all().isEmpty(db) && OutboxOperation.all().isEmpty(db) && ConflictRecord.all().isEmpty(db)
    }

    /// The logged-in user's id, as `snapshot_meta` writes it.
    func userID() throws -> String? {
        try pool.read { try Meta.get($0, .userID) }
    }

    /// Copies a checked snapshot into the store in one transaction (ATTACH, then `INSERT …
    /// SELECT` per table), with its cursor, its schema version and a new deviceId: after a crash
    /// the store holds all of it or none of it. Refused when the store is no longer empty.
    ///
    /// The secondary indexes of the record tables are dropped before the copy and created again
    /// after it, in the same transaction (their definitions read back from `sqlite_master`, so
    /// the migrations stay their one source): building an index from a million rows sorts them
    /// once instead of inserting each row at a random place of the B-tree, and the WAL then holds
    /// each index page once. A kill before COMMIT rolls the drops back with the rows.
    ///
    /// When no other connection has the file open (this pool's idle readers are closed first),
    /// the install runs under a rollback journal instead of the WAL
    /// (`withRollbackJournalIfAlone`): SQLite journals only the pages the empty store had, so
    /// the hundreds of megabytes of new pages are written once, to the store itself, instead of
    /// once to the WAL and once more by the checkpoint. A kill before COMMIT leaves a hot
    /// journal that the next open rolls back: the empty store, as before. With another
    /// connection on the file (the app's, another process's) the install goes through the WAL.
    /// `phaseEnded` is told when the journal was switched (`install_journal`, only then), then
    /// when the rows, then the indexes, are in (`SnapshotPhases`).
    func installSnapshot(atPath path: String, _ snapshot: CheckedSnapshot, phaseEnded: (String) -> Void = { _ in },
                         whileOpen: (@Sendable () throws -> Void)? = nil) throws {
        let statements = [try SnapshotFile.insertTags(), try SnapshotFile.insertTodos(schemaVersion: snapshot.schemaVersion),
                          SnapshotFile.insertStats()]
        // Idle readers of this pool hold the file open (a shared lock): close them.
        pool.releaseMemory()
        // No memory map for the install: the sorter that builds the indexes would map its
        // temporary files too, and every page of them would count in the process's RSS.
        try pool.writeWithoutTransaction { db in try db.withoutMemoryMap { try db.withRollbackJournalIfAlone(phaseEnded) {
            // Undone whatever fails after this point, so the writer connection is left as it was.
            defer { try? SnapshotFile.setDerivedFunctions(db, remove: true) }
            try SnapshotFile.setDerivedFunctions(db)
            // A page cache of 16 MiB for the install (the store's is 32 MiB): SQLite's index sorter
            // takes as much again for each run it sorts, and the two are the install's share of
            // the process's peak RSS. Rows and runs spill to disk sooner, which costs little here.
            let cacheSize = try Int.fetchOne(db, sql: "PRAGMA main.cache_size") ?? 0
            try db.execute(sql: "PRAGMA main.cache_size = -16384")
            defer { try? db.execute(sql: "PRAGMA main.cache_size = \(cacheSize)") }
            // ATTACH cannot run inside a transaction; the copy below is one.
            try db.execute(sql: "ATTACH DATABASE ? AS \(SnapshotFile.schema)", arguments: [path])
            defer { try? db.execute(sql: "DETACH DATABASE \(SnapshotFile.schema)") }
            try db.inTransaction(.immediate) {
                guard try Self.isEmptyForSnapshot(db) else { throw SnapshotRefusal("the local store is not empty any more") }
                // A partial index (`todo_pending_tag`: the few todos whose tag is not there yet) stays:
                // kept up row by row it costs nearly nothing, built again it would scan every row.
                let indexes = try Row.fetchAll(db, sql: """
                    SELECT m.name, m.sql FROM main.sqlite_master AS m
                    WHERE m.type = 'index' AND m.sql IS NOT NULL AND m.tbl_name IN (?, ?, ?)
                      AND NOT EXISTS (SELECT 1 FROM pragma_index_list(m.tbl_name, 'main') AS p WHERE p.name = m.name AND p.partial)
                    ORDER BY m.name
                    """, arguments: [TagRecord.databaseTableName, TodoRecord.databaseTableName, DailyStatRecord.databaseTableName])
                for index in indexes { try db.execute(sql: "DROP INDEX main.\((index["name"] as String).quotedDatabaseIdentifier)") }
                for sql in statements { try db.execute(sql: sql) }
                phaseEnded("install_rows")
                for index in indexes { try db.execute(sql: index["sql"] as String) }
                phaseEnded("install_indexes")
                try Meta.set(db, .cursor, snapshot.cursor)
                try Meta.set(db, .schemaVersion, String(snapshot.schemaVersion))
                try Meta.set(db, .resyncActive, nil)
                // A store that starts from a snapshot is a new device for echo suppression.
                try Meta.set(db, .deviceID, UUID().uuidString.lowercased())
                try whileOpen?()
                return .commit
            }
        } } }
    }
}

extension Database {
    /// Runs `body` with the main database in rollback-journal mode (`journal_mode=DELETE`) when
    /// this connection is the only one on the file, and in WAL mode again afterwards; when
    /// another connection holds the file open (leaving WAL needs the exclusive lock), runs it in
    /// WAL mode at once, without waiting for the other one. `switched` is told `install_journal`
    /// when the journal was switched.
    ///
    /// Leaving WAL checkpoints the WAL and deletes it. While `body` writes, SQLite holds the
    /// file's exclusive lock from its first spill of the page cache until COMMIT: a connection
    /// that opens the file meanwhile waits (its busy timeout) instead of reading.
    func withRollbackJournalIfAlone<T>(_ switched: (String) -> Void, _ body: () throws -> T) throws -> T {
        let timeout = try Int.fetchOne(self, sql: "PRAGMA busy_timeout") ?? 0
        var mode: String?
        do {
            try execute(sql: "PRAGMA busy_timeout = 0")
            defer { try? execute(sql: "PRAGMA busy_timeout = \(timeout)") }
            mode = try String.fetchOne(self, sql: "PRAGMA main.journal_mode = DELETE")
        } catch let error as DatabaseError where [.SQLITE_BUSY, .SQLITE_LOCKED].contains(error.resultCode) {
            mode = nil
        }
        guard mode?.lowercased() == "delete" else { return try body() }
        // Back to WAL whatever `body` did. Should that fail, the file stays in rollback mode, still
        // readable, until the store is next opened (LocalStore opens it in WAL mode).
        defer { _ = try? String.fetchOne(self, sql: "PRAGMA main.journal_mode = WAL") }
        switched("install_journal")
        return try body()
    }
}
