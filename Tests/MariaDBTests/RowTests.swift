import MariaDB
import XCTest

/// Row accessors and errors without a server.
final class RowTests: XCTestCase {
    func testTypedAccessors() {
        let row = Row([.int(42), .double(2.0), .text("17"), .text("3.000"), .text("3.5"), .blob([104, 105]), .null, .blob([0xFF])])
        XCTAssertEqual(row.count, 8)
        XCTAssertEqual(row.int64(0), 42)
        XCTAssertEqual(row.int(0), 42)
        XCTAssertEqual(row.bool(0), true)
        XCTAssertEqual(row.string(0), "42")
        XCTAssertEqual(row.double(0), 42)
        XCTAssertNil(row.bytes(0))
        XCTAssertEqual(row.int64(1), 2)
        XCTAssertEqual(row.int(2), 17, "DECIMAL/SUM results arrive as text")
        XCTAssertEqual(row.int(3), 3)
        XCTAssertNil(row.int(4))
        XCTAssertEqual(row.double(4), 3.5)
        XCTAssertEqual(row.string(5), "hi")
        XCTAssertEqual(row.bytes(5), [104, 105])
        XCTAssertEqual(row.bytes(2), Array("17".utf8))
        XCTAssertNil(row.int(6))
        XCTAssertNil(row.string(6))
        XCTAssertNil(row.bool(6))
        XCTAssertNil(row.double(6))
        XCTAssertNil(row.bytes(6))
        XCTAssertNil(row.string(7), "invalid UTF-8 is not text")
        XCTAssertEqual(row[6], .null)
        XCTAssertTrue(row[6].isNull)
        XCTAssertEqual(Row([.int(0)]).bool(0), false)
    }

    func testConvertibles() {
        let values: [(any DatabaseValueConvertible)?] = [1, Int64(2), Int32(3), UInt64.max, true, 1.5, "s", [UInt8](), nil, Optional<Int>.none, DatabaseValue.null]
        XCTAssertEqual(
            values.map { $0?.databaseValue ?? .null },
            [.int(1), .int(2), .int(3), .text("18446744073709551615"), .int(1), .double(1.5), .text("s"), .blob([]), .null, .null, .null])
    }

    func testErrorClassification() {
        XCTAssertTrue(DatabaseError(code: 2006, message: "gone").isConnectionError)
        XCTAssertTrue(DatabaseError(code: 2013, message: "lost").isConnectionError)
        XCTAssertTrue(DatabaseError(code: 1927, message: "killed").isConnectionError)
        XCTAssertTrue(DatabaseError(code: 1243, message: "unknown handler").isConnectionError)
        XCTAssertFalse(DatabaseError(code: 1062, message: "dup").isConnectionError)
        XCTAssertTrue(DatabaseError(code: 1213, message: "deadlock").isRetryableTransactionError)
        XCTAssertTrue(DatabaseError(code: 1205, message: "lock wait").isRetryableTransactionError)
        XCTAssertFalse(DatabaseError(code: 1062, message: "dup").isRetryableTransactionError)
        XCTAssertTrue(DatabaseError(code: 1062, message: "dup").isDuplicateKey)
    }

    /// Seen at COMMIT on a surviving Galera node while the cluster evicted a killed one: the
    /// session is dropped like a lost one (another node is used, the API answers a retryable 503)
    /// instead of surfacing as a 500. A storage engine's own 1180 is not a connection error.
    func testGaleraCommitOutsideThePrimaryComponentIsAConnectionError() {
        let outside = DatabaseError(
            code: 1180, message: "Error while appending streaming replication fragment"
                + "(provider status: Not connected to Primary Component)", sql: "COMMIT")
        XCTAssertTrue(outside.isConnectionError)
        XCTAssertFalse(outside.isRetryableTransactionError)
        XCTAssertFalse(DatabaseError(code: 1180, message: "Got error 28 \"No space left on device\" during COMMIT").isConnectionError)
    }

    func testServerMessagesAreRedacted() {
        let duplicate = DatabaseError(code: 1062, sqlState: "23000", message: "Duplicate entry 'bob's ' for mail' for key 'users_email'")
        XCTAssertEqual(duplicate.message, "Duplicate entry '?' for key 'users_email'")
        XCTAssertEqual(duplicate.duplicateKeyName, "users_email")
        let composite = DatabaseError(code: 1062, message: "Duplicate entry '7-abc' for key 'PRIMARY'")
        XCTAssertEqual(composite.duplicateKeyName, "PRIMARY")
        let incorrect = DatabaseError(code: 1366, message: "Incorrect integer value: 'secret' for column `db`.`t`.`n` at row 1")
        XCTAssertEqual(incorrect.message, "Incorrect integer value: '?' for column `db`.`t`.`n` at row 1")
        let truncated = DatabaseError(code: 1292, message: "Truncated incorrect DOUBLE value: 'secret'")
        XCTAssertEqual(truncated.message, "Truncated incorrect DOUBLE value: '?'")
        let other = DatabaseError(code: 1054, message: "Unknown column 'nope' in 'field list'", sql: "SELECT nope")
        XCTAssertEqual(other.message, "Unknown column 'nope' in 'field list'")
        XCTAssertEqual(other.description, "MariaDB error 1054 (HY000): Unknown column 'nope' in 'field list' [SQL: SELECT nope]")
    }

    func testConfigurationDescriptionHidesPassword() {
        let configuration = ConnectionConfiguration(user: "app", password: "hunter2", database: "todosync")
        XCTAssertFalse(configuration.description.contains("hunter2"))
        XCTAssertEqual(configuration.host, "127.0.0.1")
        XCTAssertEqual(configuration.port, 3306)
        XCTAssertEqual(configuration.connectTimeoutSeconds, 3)
        XCTAssertEqual(configuration.readTimeoutSeconds, 10)
        XCTAssertEqual(configuration.writeTimeoutSeconds, 10)
    }
}
