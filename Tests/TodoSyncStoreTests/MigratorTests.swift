import Foundation
import MariaDB
import XCTest

@testable import TodoSyncStore

/// Round 3, item 14: migrations refuse to run when a file already applied was edited.
final class MigratorTests: StoreTestCase {
    /// A copy of the migrations directory to edit; the test database has them all applied.
    private func copyOfMigrations() throws -> URL {
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.copyItem(at: StoreTestDatabase.sqlDirectory, to: copy)
        addTeardownBlock { try? FileManager.default.removeItem(at: copy) }
        return copy
    }

    func testAnEditedAppliedMigrationStopsTheMigrator() throws {
        let directory = try copyOfMigrations()
        XCTAssertEqual(try Migrator(connection: db, directory: directory).run(), [], "all applied, nothing to do")
        let file = directory.appendingPathComponent("002_daily_stats.sql")
        let text = try String(contentsOf: file, encoding: .utf8)
        try (text + "\nALTER TABLE daily_stats ADD COLUMN sneaky INT NULL;\n").write(to: file, atomically: true, encoding: .utf8)
        XCTAssertThrowsError(try Migrator(connection: db, directory: directory).run()) {
            XCTAssertTrue("\($0)".contains("002_daily_stats.sql was edited after it was applied"), "\($0)")
        }
        XCTAssertNil(try db.queryOne("SHOW COLUMNS FROM daily_stats LIKE 'sneaky'"), "nothing of the edit ran")
    }

    func testCommentsAndBlankLinesMayChange() throws {
        let directory = try copyOfMigrations()
        let file = directory.appendingPathComponent("002_daily_stats.sql")
        let text = try String(contentsOf: file, encoding: .utf8)
        try ("-- a note added later\n\n" + text + "\n-- and another\n").write(to: file, atomically: true, encoding: .utf8)
        XCTAssertEqual(try Migrator(connection: db, directory: directory).run(), [])
    }

    func testEveryAppliedMigrationHasItsChecksumRecorded() throws {
        let missing = try db.query("SELECT version FROM schema_migrations WHERE checksum IS NULL").compactMap { $0.int(0) }
        XCTAssertEqual(missing, [])
    }
}
