import GRDB
import TodoSyncCore

/// The device's SQLite schema, versioned with GRDB's migrator.
///
/// Records are keyed by a local id (`localId`): a record created offline has no server id yet,
/// and one created elsewhere without a clientId has no clientId. `isDeleted` hides a record from
/// the app (a local delete, or a server tombstone with nothing pending); `deletedAt` is the
/// server's tombstone time. `seenGeneration` marks records a full resync has delivered.
enum LocalSchema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE meta (
                    key TEXT PRIMARY KEY NOT NULL,
                    value TEXT
                );
                CREATE TABLE tag (
                    localId INTEGER PRIMARY KEY AUTOINCREMENT,
                    id INTEGER UNIQUE,
                    clientId TEXT,
                    clientKey TEXT UNIQUE,
                    name TEXT NOT NULL,
                    color TEXT NOT NULL,
                    version INTEGER,
                    createdAt TEXT,
                    updatedAt TEXT,
                    deletedAt TEXT,
                    isDeleted INTEGER NOT NULL DEFAULT 0,
                    seenGeneration INTEGER NOT NULL DEFAULT 0
                );
                CREATE TABLE todo (
                    localId INTEGER PRIMARY KEY AUTOINCREMENT,
                    id INTEGER UNIQUE,
                    clientId TEXT,
                    clientKey TEXT UNIQUE,
                    title TEXT NOT NULL,
                    titleKey BLOB NOT NULL,
                    raw TEXT NOT NULL,
                    isImportant INTEGER NOT NULL,
                    isLife INTEGER NOT NULL,
                    tagLocalId INTEGER,
                    difficulty INTEGER NOT NULL,
                    estimatedTime INTEGER NOT NULL,
                    deadline TEXT NOT NULL,
                    isCompleted INTEGER NOT NULL,
                    version INTEGER,
                    createdAt TEXT NOT NULL,
                    updatedAt TEXT,
                    deletedAt TEXT,
                    isDeleted INTEGER NOT NULL DEFAULT 0,
                    seenGeneration INTEGER NOT NULL DEFAULT 0
                );
                -- The contract's order for a day: important first, newest first, title A→Z
                -- (simple-lowercased code points: titleKey compares as bytes), then id.
                CREATE INDEX todo_by_day ON todo (deadline, isDeleted, isImportant DESC, createdAt DESC, titleKey, id);
                CREATE INDEX todo_by_tag ON todo (tagLocalId);
                CREATE TABLE dailyStat (
                    id INTEGER PRIMARY KEY,
                    date TEXT NOT NULL UNIQUE,
                    version INTEGER NOT NULL,
                    deletedAt TEXT,
                    json TEXT NOT NULL,
                    seenGeneration INTEGER NOT NULL DEFAULT 0
                );
                -- Operations not yet settled: pending, sending, or rejected (until acknowledged).
                CREATE TABLE outbox (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT,
                    opId TEXT NOT NULL UNIQUE,
                    entity TEXT NOT NULL,
                    action TEXT NOT NULL,
                    recordLocalId INTEGER NOT NULL,
                    data TEXT NOT NULL,
                    base TEXT NOT NULL,
                    baseVersion INTEGER,
                    waitsForPredecessor INTEGER NOT NULL DEFAULT 0,
                    policyOverride TEXT,
                    state TEXT NOT NULL,
                    payload TEXT,
                    errorCode TEXT,
                    errorMessage TEXT,
                    createdAt TEXT NOT NULL
                );
                CREATE INDEX outbox_by_record ON outbox (entity, recordLocalId, seq);
                -- Final results, newest kept (bounded).
                CREATE TABLE operationLog (
                    opId TEXT PRIMARY KEY NOT NULL,
                    entity TEXT NOT NULL,
                    action TEXT NOT NULL,
                    recordLocalId INTEGER NOT NULL,
                    fields TEXT NOT NULL,
                    status TEXT NOT NULL,
                    errorCode TEXT,
                    errorMessage TEXT,
                    conflictingFields TEXT NOT NULL DEFAULT '[]',
                    finishedAt TEXT NOT NULL
                );
                CREATE TABLE conflict (
                    conflictId INTEGER PRIMARY KEY AUTOINCREMENT,
                    opId TEXT NOT NULL,
                    entity TEXT NOT NULL,
                    action TEXT NOT NULL,
                    recordLocalId INTEGER NOT NULL,
                    base TEXT NOT NULL,
                    local TEXT NOT NULL,
                    server TEXT NOT NULL,
                    serverVersion INTEGER NOT NULL,
                    createdAt TEXT NOT NULL
                );
                """)
        }
        migrator.registerMigration("v2: server values hidden by pending edits") { db in
            // While an operation protects a field from pull pages, the server's newer value of
            // that field is kept here (JSON, local terms), so that if the operation is rejected
            // the record can show what the server really has.
            try db.execute(sql: "ALTER TABLE tag ADD COLUMN shadow TEXT; ALTER TABLE todo ADD COLUMN shadow TEXT")
        }
        migrator.registerMigration("v3: tags a todo names before the device has them") { db in
            // A push result can carry a todo whose tag another device set and this device has
            // not pulled yet (and the pull will not resend the todo: its latest change is this
            // device's). The server tag id waits here until the tag arrives.
            try db.execute(sql: """
                ALTER TABLE todo ADD COLUMN pendingTagId INTEGER;
                CREATE INDEX todo_pending_tag ON todo (pendingTagId) WHERE pendingTagId IS NOT NULL
                """)
        }
        migrator.registerMigration("v4: the todo's notes (schema version 2)") { db in
            // Null until a version-2 client pulls the todo (or writes notes): existing stores
            // keep working, and their first version-2 sync brings the notes (a full pull, once).
            try db.execute(sql: "ALTER TABLE todo ADD COLUMN notes TEXT")
        }
        migrator.registerMigration("v5: the todo's clientKey unique by a named index") { db in
            // A UNIQUE column constraint is an index that cannot be dropped; a named unique index
            // can, so a snapshot install builds it once after its rows instead of inserting a
            // million random clientIds into it one by one (SnapshotInstall.swift). The table is
            // rebuilt (SQLite cannot drop a constraint): its own definition with the constraint
            // left out, the rows with their localIds, its AUTOINCREMENT counter, its indexes.
            let table = TodoRecord.databaseTableName, rebuilt = TodoRecord.databaseTableName + "_v5"
            let constrained = "clientKey TEXT UNIQUE,"
            guard let definition = try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                                       arguments: [table]),
                  definition.contains(constrained), definition.hasPrefix("CREATE TABLE \(table) (")
            else { throw DatabaseError(message: "v5: the todo table is not the one v1 through v4 made") }
            let indexes = try String.fetchAll(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                                              arguments: [table])
            let sequence = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [table])
            // Read through the page cache, not the memory map: every mapped page of a large
            // store read for the copy and the index sorts would count in the process's RSS.
            try db.withoutMemoryMap {
                try db.execute(sql: definition
                    .replacingOccurrences(of: "CREATE TABLE \(table) (", with: "CREATE TABLE \(rebuilt) (")
                    .replacingOccurrences(of: constrained, with: "clientKey TEXT,"))
                try db.execute(sql: "INSERT INTO \(rebuilt) SELECT * FROM \(table)")
                try db.execute(sql: "DROP TABLE \(table)")
                try db.execute(sql: "ALTER TABLE \(rebuilt) RENAME TO \(table)")
                if let sequence {
                    // Never hand out a localId again that an earlier (deleted) todo had.
                    let now = try Int64.fetchOne(db, sql: "SELECT seq FROM sqlite_sequence WHERE name = ?", arguments: [table]) ?? 0
                    try db.execute(sql: "DELETE FROM sqlite_sequence WHERE name = ?", arguments: [table])
                    try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", arguments: [table, max(now, sequence)])
            }
            for index in indexes { try db.execute(sql: index) }
            try db.execute(sql: "CREATE UNIQUE INDEX todo_by_client_key ON \(table) (clientKey)")
            }
        }
        // From schema version 3 on, a version's new todo fields are one migration made from the
        // list (`TodoField.since`): a column named and typed as `TodoRecord.column(_:)` and the
        // field's kind say, NULL in existing rows until a sync at that version brings the values
        // (a full pull, once, as for the notes). A new field needs no edit here.
        for version in 3...max(3, SchemaVersion.current) {
            let fields = TodoField.allCases.filter { $0.since == version }
            guard !fields.isEmpty else { continue }
            // The name must not change once a store has run it: a version's fields are fixed when it ships.
            migrator.registerMigration("todo fields of schema version \(version)") { db in
                for field in fields {
                    try db.execute(sql: "ALTER TABLE \(TodoRecord.databaseTableName) ADD COLUMN"
                        + " \(TodoRecord.column(field).name.quotedDatabaseIdentifier) \(field.kind.sqliteType)")
                }
            }
        }
        return migrator
    }
}

extension Database {
    /// Runs `body` with the memory map off, restored afterwards: the pages a large copy or an
    /// index sort reads then go through the page cache (bounded) instead of counting, every one
    /// of them, in the process's RSS. The v5 rebuild and the snapshot install.
    func withoutMemoryMap<T>(_ body: () throws -> T) throws -> T {
        let mapped = try Int.fetchOne(self, sql: "PRAGMA mmap_size") ?? 0
        try execute(sql: "PRAGMA mmap_size = 0")
        defer { try? execute(sql: "PRAGMA mmap_size = \(mapped)") }
        return try body()
    }
}
