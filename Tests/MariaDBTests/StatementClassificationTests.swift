import XCTest

@testable import MariaDB

/// Which SQL counts as a read that may be re-run after a lost connection.
final class StatementClassificationTests: XCTestCase {
    func testReadOnlyDetection() {
        XCTAssertTrue(Statement.isReadOnly("SELECT 1"))
        XCTAssertTrue(Statement.isReadOnly("  \n select id FROM t"))
        XCTAssertTrue(Statement.isReadOnly("(SELECT 1) UNION (SELECT 2)"))
        XCTAssertTrue(Statement.isReadOnly("WITH x AS (SELECT 1) SELECT * FROM x"))
        XCTAssertTrue(Statement.isReadOnly("SHOW TABLES"))
        XCTAssertFalse(Statement.isReadOnly("INSERT INTO t VALUES (1) RETURNING id"))
        XCTAssertFalse(Statement.isReadOnly("DELETE FROM t RETURNING id"))
        XCTAssertFalse(Statement.isReadOnly("UPDATE t SET a = 1"))
        XCTAssertFalse(Statement.isReadOnly("SELECTED"))
        XCTAssertFalse(Statement.isReadOnly("/* hint */ SELECT 1"), "conservative with comments")
        XCTAssertFalse(Statement.isReadOnly(""))
    }
}
