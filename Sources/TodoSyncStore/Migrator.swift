import Credentials
import Foundation
import MariaDB

/// Applies `Sql/NNN_name.sql` files in version order, once each, recording them in
/// `schema_migrations` with a checksum of their statements. Safe to run concurrently (a named
/// lock serialises migrators) and idempotent (applied versions are skipped). Refuses to run when
/// a file already applied was edited since (comments and blank lines aside): the database would
/// otherwise differ from what the files say, silently. A row recorded before checksums existed
/// takes the file's checksum the first time it is seen.
public struct Migrator {
    /// The columns of `schema_migrations` as both readers select them.
    enum AppliedColumn: Int, ResultColumns { case version, name, appliedAt, checksum }

    public struct Migration: Sendable, Equatable {
        public let version: Int
        public let name: String
        public let statements: [String]

        /// SHA-256 (hex) of the statements, so editing a comment does not count as a change.
        public var checksum: String {
            BearerToken.sha256(Array(statements.joined(separator: ";\n").utf8)).map { String(format: "%02x", $0) }.joined()
        }
    }

    /// A migration directory or file that cannot be used.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A migration applied with one checksum whose file now has another: what `run()` refuses
    /// and `status()` reports, in the same words.
    public struct Edit: Error, Sendable, Equatable, CustomStringConvertible {
        public let migration: Migration
        /// The checksum `schema_migrations` recorded when the migration was applied.
        public let recordedChecksum: String

        public var description: String {
            "migration \(migration.name) was edited after it was applied (checksum \(recordedChecksum.prefix(12))… recorded, \(migration.checksum.prefix(12))… now): restore the file, and put the change in a new migration"
        }
    }

    /// The applied migrations (version, recorded checksum or nil) whose file differs now.
    static func edits(recorded: [(version: Int, checksum: String?)], files: [Migration]) -> [Edit] {
        let byVersion = Dictionary(files.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        return recorded.compactMap { row in
            guard let file = byVersion[row.version], let checksum = row.checksum, checksum != file.checksum else { return nil }
            return Edit(migration: file, recordedChecksum: checksum)
        }.sorted { $0.migration.version < $1.migration.version }
    }

    let db: Connection
    let directory: URL

    public init(connection: Connection, directory: URL) {
        self.db = connection
        self.directory = directory
    }

    /// Applies pending migrations; returns the versions applied now.
    @discardableResult
    public func run() throws -> [Int] {
        let migrations = try Migrator.load(from: directory)
        try db.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version INT NOT NULL PRIMARY KEY,
                name VARCHAR(200) NOT NULL,
                applied_at DATETIME(3) NOT NULL
            ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
            """)
        try db.execute("ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum CHAR(64) CHARACTER SET ascii NULL")
        guard try db.queryOne("SELECT GET_LOCK('todosync_migrate', 60)")?.int(OnlyColumn.value) == 1 else {
            throw Failure(description: "another migrator holds the lock for over 60 s")
        }
        defer { _ = try? db.query("SELECT RELEASE_LOCK('todosync_migrate')") }
        let files = Dictionary(migrations.map { ($0.version, $0) }, uniquingKeysWith: { first, _ in first })
        let recorded = try db.query("SELECT version, name, applied_at, checksum FROM schema_migrations").compactMap { row in
            row.int(AppliedColumn.version).map { (version: $0, checksum: row.string(AppliedColumn.checksum)) }
        }
        if let edit = Self.edits(recorded: recorded, files: migrations).first { throw edit }
        let applied = Set(recorded.map(\.version))
        for row in recorded where row.checksum == nil {
            guard let file = files[row.version] else { continue }
            try db.execute("UPDATE schema_migrations SET checksum = ? WHERE version = ? AND checksum IS NULL",
                           [.text(file.checksum), .int(Int64(row.version))])
        }
        var appliedNow: [Int] = []
        for migration in migrations where !applied.contains(migration.version) {
            // DDL commits implicitly in MariaDB, so a migration is recorded after all its statements.
            for statement in migration.statements { try db.execute(statement) }
            try db.execute(
                "INSERT INTO schema_migrations (version, name, applied_at, checksum) VALUES (?, ?, UTC_TIMESTAMP(3), ?)",
                [.int(Int64(migration.version)), .text(migration.name), .text(migration.checksum)])
            appliedNow.append(migration.version)
        }
        return appliedNow
    }

    /// What the database has applied and what `run()` would still apply.
    public struct Status: Sendable, Equatable {
        /// `schema_migrations` rows by version: (version, file name, applied at UTC).
        public var applied: [(version: Int, name: String, appliedAt: String)]
        /// Migrations of the directory that the database has not applied, in order.
        public var pending: [Migration]
        /// Applied migrations whose file was edited since (`run()` refuses to run while there are any).
        public var edited: [Edit] = []

        public static func == (a: Status, b: Status) -> Bool {
            a.applied.map(\.version) == b.applied.map(\.version) && a.pending == b.pending && a.edited == b.edited
        }

        /// One line per migration (`applied 001 001_x.sql 2026-… UTC`, `pending 005 005_y.sql`,
        /// `edited 002 002_z.sql checksum …`), then a summary (`, N edited` only when there are).
        public var report: String {
            let edits = Dictionary(edited.map { ($0.migration.version, $0) }, uniquingKeysWith: { first, _ in first })
            var lines = applied.map { row in
                guard let edit = edits[row.version] else {
                    return "applied  \(String(format: "%03d", row.version))  \(row.name)  \(row.appliedAt) UTC"
                }
                return "edited   \(String(format: "%03d", row.version))  \(row.name)  \(row.appliedAt) UTC  checksum \(edit.recordedChecksum.prefix(12))… recorded, \(edit.migration.checksum.prefix(12))… now"
            }
            lines += pending.map { "pending  \(String(format: "%03d", $0.version))  \($0.name)" }
            lines.append("\(applied.count) applied, \(pending.count) pending" + (edited.isEmpty ? "" : ", \(edited.count) edited"))
            return lines.joined(separator: "\n") + "\n"
        }
    }

    /// Applied and pending migrations; changes nothing (a database never migrated has none applied).
    public func status() throws -> Status {
        let migrations = try Migrator.load(from: directory)
        var applied: [(version: Int, name: String, appliedAt: String)] = []
        var recorded: [(version: Int, checksum: String?)] = []
        do {
            let rows: [Row]
            do {
                rows = try db.query("SELECT version, name, applied_at, checksum FROM schema_migrations ORDER BY version")
            } catch let error as DatabaseError where error.code == 1054 {
                // ER_BAD_FIELD_ERROR: recorded before checksums existed (`run()` adds them).
                rows = try db.query("SELECT version, name, applied_at, NULL FROM schema_migrations ORDER BY version")
            }
            for row in rows {
                typealias C = AppliedColumn
                applied.append((version: row.int(C.version) ?? 0, name: row.string(C.name) ?? "",
                                appliedAt: row.string(C.appliedAt) ?? ""))
                recorded.append((version: row.int(C.version) ?? 0, checksum: row.string(C.checksum)))
            }
        } catch let error as DatabaseError where error.code == 1146 {
            // ER_NO_SUCH_TABLE: nothing applied yet.
        }
        let done = Set(applied.map(\.version))
        return Status(applied: applied, pending: migrations.filter { !done.contains($0.version) },
                      edited: Self.edits(recorded: recorded, files: migrations))
    }

    /// Reads and orders the migration files of `directory`.
    public static func load(from directory: URL) throws -> [Migration] {
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }
        var migrations: [Migration] = []
        for name in names {
            guard let version = Int(name.prefix(while: \.isNumber)) else {
                throw Failure(description: "migration file \(name) does not start with a version number")
            }
            let text = try String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            migrations.append(Migration(version: version, name: name, statements: splitStatements(text)))
        }
        migrations.sort { $0.version < $1.version }
        for (previous, next) in zip(migrations, migrations.dropFirst()) where previous.version == next.version {
            throw Failure(description: "two migrations share version \(next.version)")
        }
        return migrations
    }

    /// Splits a file into statements at `;` that ends a line; drops `--` comment lines.
    static func splitStatements(_ text: String) -> [String] {
        var statements: [String] = []
        var current: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop(while: { $0 == " " || $0 == "\t" })
            if trimmed.hasPrefix("--") || trimmed.isEmpty { continue }
            if line.hasSuffix(";") {
                current.append(line.dropLast())
                statements.append(current.joined(separator: "\n"))
                current = []
            } else {
                current.append(line)
            }
        }
        let rest = current.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
        if !rest.isEmpty { statements.append(rest) }
        return statements
    }
}
