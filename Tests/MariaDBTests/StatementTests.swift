import MariaDB
import XCTest

/// Execution results, errors, the statement cache.
final class StatementTests: XCTestCase {
    private var db: Connection!

    override func setUpWithError() throws {
        db = Connection(configuration: try TestDatabase.configuration())
        try db.execute("DROP TABLE IF EXISTS stmt_items")
        try db.execute("DROP TABLE IF EXISTS stmt_sequences")
        try db.execute(
            """
            CREATE TABLE stmt_items (
              id BIGINT UNSIGNED PRIMARY KEY AUTO_INCREMENT,
              email VARCHAR(100) NOT NULL,
              n INT NOT NULL DEFAULT 0,
              UNIQUE KEY uq_items_email (email)
            ) ENGINE=InnoDB
            """)
        try db.execute(
            "CREATE TABLE stmt_sequences (user_id BIGINT PRIMARY KEY, next_value BIGINT NOT NULL) ENGINE=InnoDB")
    }

    override func tearDownWithError() throws {
        try db?.execute("DROP TABLE IF EXISTS stmt_items")
        try db?.execute("DROP TABLE IF EXISTS stmt_sequences")
        db = nil
    }

    func testAffectedRowsAndLastInsertID() throws {
        let first = try db.execute("INSERT INTO stmt_items (email) VALUES (?)", [.text("a@example.com")])
        XCTAssertEqual(first.affectedRows, 1)
        XCTAssertGreaterThan(first.lastInsertID, 0)
        let second = try db.execute("INSERT INTO stmt_items (email) VALUES (?)", [.text("b@example.com")])
        XCTAssertEqual(second.lastInsertID, first.lastInsertID + 1)
        let multi = try db.execute("INSERT INTO stmt_items (email) VALUES (?), (?), (?)", ["c", "d", "e"])
        XCTAssertEqual(multi.affectedRows, 3)
        XCTAssertEqual(multi.lastInsertID, second.lastInsertID + 1, "first id of a multi-row insert")

        let update = try db.execute("UPDATE stmt_items SET n = n + 1 WHERE id > ?", [.int(Int64(first.lastInsertID))])
        XCTAssertEqual(update.affectedRows, 4)
        XCTAssertEqual(update.lastInsertID, 0)
        let unchanged = try db.execute("UPDATE stmt_items SET n = 1 WHERE id = ?", [.int(Int64(second.lastInsertID))])
        XCTAssertEqual(unchanged.affectedRows, 0, "rows changed, not matched (foundRows is off)")
        let delete = try db.execute("DELETE FROM stmt_items WHERE email IN (?, ?)", ["d", "e"])
        XCTAssertEqual(delete.affectedRows, 2)
        let none = try db.execute("DELETE FROM stmt_items WHERE id = ?", [.int(-1)])
        XCTAssertEqual(none.affectedRows, 0)
    }

    func testFoundRowsCountsMatchedRows() throws {
        var configuration = try TestDatabase.configuration()
        configuration.foundRows = true
        let found = Connection(configuration: configuration)
        try found.execute("INSERT INTO stmt_items (email, n) VALUES ('f', 1)")
        XCTAssertEqual(try found.execute("UPDATE stmt_items SET n = 1 WHERE email = 'f'").affectedRows, 1)
    }

    func testLastInsertIDExpressionTrickForSequences() throws {
        try db.execute("INSERT INTO stmt_sequences (user_id, next_value) VALUES (?, 0), (?, 100)", [.int(1), .int(2)])
        let sql = "UPDATE stmt_sequences SET next_value = LAST_INSERT_ID(next_value + 1) WHERE user_id = ?"
        for expected in 1...5 {
            let result = try db.execute(sql, [.int(1)])
            XCTAssertEqual(result.affectedRows, 1)
            XCTAssertEqual(result.lastInsertID, UInt64(expected))
        }
        XCTAssertEqual(try db.execute(sql, [.int(2)]).lastInsertID, 101)
        XCTAssertEqual(try db.execute(sql, [.int(1)]).lastInsertID, 6, "per-user sequence")
        // Inside a transaction too.
        let value = try db.inTransaction { try db.execute(sql, [.int(2)]).lastInsertID }
        XCTAssertEqual(value, 102)
        XCTAssertEqual(try db.queryOne("SELECT next_value FROM stmt_sequences WHERE user_id = 2")?.int(0), 102)
    }

    func testDuplicateKeyErrorHidesTheValue() throws {
        let secret = "secret-person@example.com"
        try db.execute("INSERT INTO stmt_items (email) VALUES (?)", [.text(secret)])
        let error = try XCTUnwrap(assertDatabaseError(try db.execute("INSERT INTO stmt_items (email) VALUES (?)", [.text(secret)])))
        XCTAssertEqual(error.code, 1062)
        XCTAssertEqual(error.sqlState, "23000")
        XCTAssertTrue(error.isDuplicateKey)
        XCTAssertFalse(error.isConnectionError)
        XCTAssertFalse(error.isRetryableTransactionError)
        XCTAssertEqual(error.duplicateKeyName, "uq_items_email")
        XCTAssertEqual(error.sql, "INSERT INTO stmt_items (email) VALUES (?)")
        XCTAssertFalse(error.description.contains("secret"), error.description)
        XCTAssertFalse(error.message.contains("secret"), error.message)
        XCTAssertTrue(error.description.contains("1062"))
        XCTAssertTrue(error.description.contains("INSERT INTO stmt_items"))
        // The connection is still fine afterwards.
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM stmt_items")?.int(0), 1)
    }

    func testErrorDescriptionsNeverContainBoundValues() throws {
        let secret = "TOPSECRET-4242"
        var errors: [DatabaseError] = []
        // Invalid integer text for an INT column (1366 quotes the value).
        if let error = assertDatabaseError(try db.execute("INSERT INTO stmt_items (email, n) VALUES (?, ?)", [.text("x"), .text(secret)])) {
            errors.append(error)
        }
        // Too long for the column (1406).
        if let error = assertDatabaseError(try db.execute("INSERT INTO stmt_items (email) VALUES (?)", [.text(secret + String(repeating: "z", count: 200))])) {
            errors.append(error)
        }
        // Out of range (1264).
        if let error = assertDatabaseError(try db.execute("INSERT INTO stmt_items (email, n) VALUES (?, ?)", [.text(secret), .double(1e20)])) {
            errors.append(error)
        }
        // Unknown column: the SQL text itself is reported, bound values are not.
        if let error = assertDatabaseError(try db.query("SELECT nope FROM stmt_items WHERE email = ?", [.text(secret)])) {
            XCTAssertEqual(error.code, 1054)
            errors.append(error)
        }
        // Wrong number of parameters.
        if let error = assertDatabaseError(try db.query("SELECT id FROM stmt_items WHERE email = ?", [.text(secret), .text(secret)])) {
            XCTAssertEqual(error.code, 2031)
            errors.append(error)
        }
        XCTAssertGreaterThanOrEqual(errors.count, 4)
        for error in errors {
            XCTAssertFalse(error.description.contains(secret), error.description)
            XCTAssertFalse("\(error)".contains(secret))
            XCTAssertFalse(String(reflecting: error).contains(secret))
        }
    }

    func testQueryReturnsPagesOfRows() throws {
        try db.inTransaction {
            for index in 0..<600 {
                try db.execute("INSERT INTO stmt_items (email, n) VALUES (?, ?)", [.text("user\(index)@example.com"), .int(Int64(index))])
            }
        }
        let sql = "SELECT id, email, n FROM stmt_items WHERE n >= ? ORDER BY n LIMIT 500"
        let start = ContinuousClock.now
        for _ in 0..<20 {
            let rows = try db.query(sql, [.int(50)])
            XCTAssertEqual(rows.count, 500)
            XCTAssertEqual(rows.first?.int(2), 50)
            XCTAssertEqual(rows.last?.string(1), "user549@example.com")
            XCTAssertEqual(rows[123].count, 3)
        }
        let elapsed = ContinuousClock.now - start
        print("20 pages of 500 rows: \(elapsed)")
        XCTAssertEqual(try db.query("SELECT id FROM stmt_items WHERE n < 0").count, 0)
        XCTAssertNil(try db.queryOne("SELECT id FROM stmt_items WHERE n < 0"))
        XCTAssertEqual(try db.queryOne("SELECT n FROM stmt_items ORDER BY n DESC")?.int(0), 599, "first row, rest drained")
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*), SUM(n), AVG(n) FROM stmt_items").map { [$0.int(0), $0.int(1)] }, [600, 179_700])
    }

    func testStatementsAreCachedAndEvicted() throws {
        let small = Connection(configuration: try TestDatabase.configuration(statementCacheCapacity: 2))
        _ = try small.query("SELECT 1")
        _ = try small.query("SELECT 1")
        XCTAssertEqual(small.cachedStatementCount, 1)
        _ = try small.query("SELECT 2")
        _ = try small.query("SELECT 3")
        XCTAssertEqual(small.cachedStatementCount, 2)
        XCTAssertEqual(try small.queryOne("SELECT 1")?.int(0), 1)
        small.close()
        XCTAssertEqual(small.cachedStatementCount, 0)
        XCTAssertFalse(small.isConnected)
        XCTAssertEqual(try small.queryOne("SELECT 4")?.int(0), 4, "reconnects lazily after close")
    }

    func testExecuteDrainsRowsAndCallProcedures() throws {
        // execute() on a SELECT must leave the connection usable.
        try db.execute("SELECT * FROM stmt_items")
        try db.execute("DROP PROCEDURE IF EXISTS stmt_proc")
        try db.execute("CREATE PROCEDURE stmt_proc(IN x INT) BEGIN SELECT x, x * 2; END")
        defer { _ = try? db.execute("DROP PROCEDURE IF EXISTS stmt_proc") }
        let rows = try db.query("CALL stmt_proc(?)", [.int(21)])
        XCTAssertEqual(rows.count, 1)
        XCTAssertEqual(rows.first?.int(1), 42)
        XCTAssertEqual(try db.query("CALL stmt_proc(?)", [.int(2)]).first?.int(1), 4)
        XCTAssertEqual(try db.queryOne("SELECT 7")?.int(0), 7)
    }

    func testPingConnectAndConnectionID() throws {
        let db = Connection(configuration: try TestDatabase.configuration())
        XCTAssertFalse(db.isConnected)
        XCTAssertNil(db.connectionID)
        try db.connect()
        XCTAssertTrue(db.isConnected)
        let id = try XCTUnwrap(db.connectionID)
        XCTAssertEqual(try db.queryOne("SELECT CONNECTION_ID()")?.int64(0), Int64(id))
        XCTAssertTrue(db.ping())
    }
}
