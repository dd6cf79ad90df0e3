import MariaDB
import XCTest

/// `forEachRow` reads values in place; it must agree with `query` for every column kind.
final class RowCursorTests: XCTestCase {
    private var db: Connection!

    override func setUpWithError() throws {
        db = Connection(configuration: try TestDatabase.configuration())
        try db.execute("DROP TABLE IF EXISTS row_cursor")
        try db.execute(
            """
            CREATE TABLE row_cursor (
              id INT PRIMARY KEY, i64 BIGINT NULL, u64 BIGINT UNSIGNED NULL, flag BOOLEAN NULL,
              vc VARCHAR(300) NULL, lt LONGTEXT NULL, vb VARBINARY(16) NULL, dec_col DECIMAL(8,2) NULL,
              d DATE NULL, dt3 DATETIME(3) NULL
            ) ENGINE=InnoDB
            """)
    }

    override func tearDownWithError() throws {
        try db?.execute("DROP TABLE IF EXISTS row_cursor")
        db = nil
    }

    private let select = "SELECT id, i64, u64, flag, vc, lt, vb, dec_col, d, dt3 FROM row_cursor ORDER BY id"

    func testValuesReadInPlaceMatchTheRowPath() throws {
        // Beyond the initial bind buffer and beyond the 64 KiB buffers grow to: every execution
        // takes the fetch-the-whole-value path for it.
        let long = String(repeating: "긴 텍스트 🚀 ", count: 5_000)
        try db.execute(
            "INSERT INTO row_cursor VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [.int(-42), .text("18446744073709551615"), .int(1), .text(#"a "quoted" \ value"#), .text(long),
             .blob([0, 255, 7]), .text("12.50"), .text("2024-02-29"), .text("2024-02-29 23:59:58.123")])
        try db.execute("INSERT INTO row_cursor (id) VALUES (2)")
        try db.execute("INSERT INTO row_cursor (id, lt) VALUES (3, 'short')")

        // The reference rows come from different SQL text (another prepared statement), so the
        // first forEachRow runs on fresh, initial-size buffers; the second on grown ones.
        let rows = try db.query(select + " -- reference")
        XCTAssertGreaterThan(long.utf8.count, 64 * 1024)
        for _ in 0..<2 {
            var seen = 0
            let count = try db.forEachRow(select) { cursor throws(DatabaseError) in
                let row = rows[seen]
                seen += 1
                XCTAssertEqual(cursor.count, 10)
                for i in 0..<cursor.count {
                    XCTAssertEqual(cursor.isNull(i), row[i].isNull, "column \(i)")
                    XCTAssertEqual(try cursor.value(i), row[i], "column \(i)")
                    XCTAssertEqual(try cursor.int64(i), row.int64(i), "column \(i)")
                    var bytes: [UInt8]? = nil
                    let notNull = try cursor.withBytes(i) { bytes = Array($0) }
                    XCTAssertEqual(notNull, bytes != nil)
                    if case .blob = row[i] {
                        XCTAssertEqual(bytes, row.bytes(i), "column \(i)")
                    } else {
                        XCTAssertEqual(bytes, row.string(i).map { Array($0.utf8) }, "column \(i)")
                    }
                }
            }
            XCTAssertEqual(count, 3)
            XCTAssertEqual(seen, 3)
        }

        try db.forEachRow("SELECT u64, d, dt3, vc FROM row_cursor WHERE id = 1") { cursor throws(DatabaseError) in
            XCTAssertNil(try cursor.int64(0), "above Int64.max is not an Int64")
            XCTAssertEqual(cursor.dateTime(1), DateTimeParts(year: 2024, month: 2, day: 29))
            XCTAssertEqual(
                cursor.dateTime(2),
                DateTimeParts(year: 2024, month: 2, day: 29, hour: 23, minute: 59, second: 58, microsecond: 123_000))
            XCTAssertNil(cursor.dateTime(3), "text is not temporal")
        }
    }

    func testAnErrorFromTheCallbackDrainsTheResultAndKeepsTheConnection() throws {
        for id in 1...50 { try db.execute("INSERT INTO row_cursor (id, i64) VALUES (?, ?)", [.int(Int64(id)), .int(Int64(id))]) }
        var calls = 0
        XCTAssertThrowsError(
            try db.forEachRow(select) { _ throws(DatabaseError) in
                calls += 1
                throw DatabaseError(code: 1644, message: "stop here")
            })
        XCTAssertEqual(calls, 1, "no further rows after the callback failed")
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM row_cursor")?.int64(0), 50, "the connection is in sync")
    }
}
