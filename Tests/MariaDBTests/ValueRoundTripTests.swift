import MariaDB
import XCTest

/// Every value type through a real server: bind as parameter, read back as column.
final class ValueRoundTripTests: XCTestCase {
    private var db: Connection!

    override func setUpWithError() throws {
        db = Connection(configuration: try TestDatabase.configuration())
        try db.execute("DROP TABLE IF EXISTS value_round_trip")
        try db.execute(
            """
            CREATE TABLE value_round_trip (
              id INT PRIMARY KEY,
              i64 BIGINT NULL, u64 BIGINT UNSIGNED NULL, i32 INT NULL, u32 INT UNSIGNED NULL,
              tiny TINYINT NULL, flag BOOLEAN NULL, yr YEAR NULL,
              dbl DOUBLE NULL, flt FLOAT NULL, dec_col DECIMAL(12,3) NULL,
              vc VARCHAR(255) NULL, txt TEXT NULL, ch CHAR(4) NULL, en ENUM('a','b') NULL,
              vb VARBINARY(64) NULL, bl BLOB NULL, lb LONGBLOB NULL, lt LONGTEXT NULL,
              d DATE NULL, dt3 DATETIME(3) NULL
            ) ENGINE=InnoDB
            """)
    }

    override func tearDownWithError() throws {
        try db?.execute("DROP TABLE IF EXISTS value_round_trip")
        db = nil
    }

    private let columns =
        "i64, u64, i32, u32, tiny, flag, yr, dbl, flt, dec_col, vc, txt, ch, en, vb, bl, lb, lt, d, dt3"

    func testEveryTypeRoundTrips() throws {
        let blob: [UInt8] = [0, 1, 2, 0xFF, 0xFE, 0x80, 0, 7]
        try db.execute(
            "INSERT INTO value_round_trip (id, \(columns)) VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                .int(-9_000_000_000_000), .int(9_000_000_000_000), .int(-2_000_000_000), .int(4_000_000_000),
                .int(-128), .int(1), .int(2024), .double(3.141592653589793), .double(1.5), .text("-12345.678"),
                .text("hello"), .text("text body"), .text("abcd"), .text("b"),
                .blob(blob), .blob(blob), .blob([]), .text(""),
                .text("2024-02-29"), .text("2024-02-29 23:59:58.123"),
            ])
        let row = try XCTUnwrap(try db.queryOne("SELECT \(columns) FROM value_round_trip WHERE id = ?", [.int(1)]))
        XCTAssertEqual(row.count, 20)
        XCTAssertEqual(row[0], .int(-9_000_000_000_000))
        XCTAssertEqual(row[1], .int(9_000_000_000_000))
        XCTAssertEqual(row[2], .int(-2_000_000_000))
        XCTAssertEqual(row[3], .int(4_000_000_000))
        XCTAssertEqual(row[4], .int(-128))
        XCTAssertEqual(row.bool(5), true)
        XCTAssertEqual(row[6], .int(2024))
        XCTAssertEqual(row[7], .double(3.141592653589793))
        XCTAssertEqual(row[8], .double(1.5))
        XCTAssertEqual(row[9], .text("-12345.678"))
        XCTAssertEqual(row.int64(9), nil, "fractional DECIMAL is not an integer")
        XCTAssertEqual(row.double(9), -12345.678)
        XCTAssertEqual(row[10], .text("hello"))
        XCTAssertEqual(row[11], .text("text body"))
        XCTAssertEqual(row[12], .text("abcd"))
        XCTAssertEqual(row[13], .text("b"))
        XCTAssertEqual(row[14], .blob(blob))
        XCTAssertEqual(row[15], .blob(blob))
        XCTAssertEqual(row[16], .blob([]))
        XCTAssertEqual(row[17], .text(""))
        XCTAssertEqual(row[18], .text("2024-02-29"))
        XCTAssertEqual(row[19], .text("2024-02-29 23:59:58.123"))
    }

    func testNullInEveryColumn() throws {
        let placeholders = Array(repeating: "?", count: 20).joined(separator: ", ")
        try db.execute(
            "INSERT INTO value_round_trip (id, \(columns)) VALUES (2, \(placeholders))",
            Array(repeating: DatabaseValue.null, count: 20))
        let row = try XCTUnwrap(try db.queryOne("SELECT \(columns) FROM value_round_trip WHERE id = 2"))
        for index in 0..<row.count {
            XCTAssertEqual(row[index], .null, "column \(index)")
            XCTAssertNil(row.string(index))
            XCTAssertNil(row.int64(index))
            XCTAssertNil(row.bytes(index))
        }
        // NULL parameters compare as NULL, and IS NULL works with a bound NULL.
        let count = try db.queryOne("SELECT COUNT(*) FROM value_round_trip WHERE ? IS NULL AND vc IS NULL", [.null])
        XCTAssertEqual(count?.int(0), 1)
    }

    func testSwiftValuesBindThroughConvertible() throws {
        let name: String? = nil
        try db.execute(
            "INSERT INTO value_round_trip (id, i64, u64, i32, flag, dbl, vc, vb, txt) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [3, Int64(-5), UInt64(7), Int32(9), true, 2.5, "swift", [UInt8](arrayLiteral: 1, 2), name])
        let row = try XCTUnwrap(
            try db.queryOne("SELECT i64, u64, i32, flag, dbl, vc, vb, txt FROM value_round_trip WHERE id = ?", [3]))
        XCTAssertEqual(row.int64(0), -5)
        XCTAssertEqual(row.int(1), 7)
        XCTAssertEqual(row.int(2), 9)
        XCTAssertEqual(row.bool(3), true)
        XCTAssertEqual(row.double(4), 2.5)
        XCTAssertEqual(row.string(5), "swift")
        XCTAssertEqual(row.bytes(6), [1, 2])
        XCTAssertEqual(row[7], .null)
        // Without parameters, and with an empty list literal, the calls resolve unambiguously.
        XCTAssertEqual(try db.query("SELECT id FROM value_round_trip").count, 1)
        XCTAssertEqual(try db.query("SELECT id FROM value_round_trip", []).count, 1)
        XCTAssertEqual(try db.execute("DELETE FROM value_round_trip WHERE id = -1", []).affectedRows, 0)
        // Mixing DatabaseValue with Swift values uses the convertible overload.
        XCTAssertEqual(try db.queryOne("SELECT ? + ?", [DatabaseValue.int(2), 3])?.int(0), 5)
    }

    func testUnsignedBigIntAboveInt64MaxReadsAsText() throws {
        try db.execute("INSERT INTO value_round_trip (id, u64) VALUES (4, 18446744073709551615)")
        let row = try XCTUnwrap(try db.queryOne("SELECT u64 FROM value_round_trip WHERE id = 4"))
        XCTAssertEqual(row[0], .text("18446744073709551615"))
        try db.execute("UPDATE value_round_trip SET u64 = ? WHERE id = 4", [UInt64(18_446_744_073_709_551_614)])
        XCTAssertEqual(try db.queryOne("SELECT u64 FROM value_round_trip WHERE id = 4")?[0], .text("18446744073709551614"))
    }

    func testEmojiAndKoreanText() throws {
        let samples = [
            "한국어 텍스트: 안녕하세요, 세계!",
            "emoji 😀🎉👩‍👩‍👧‍👦 and flags 🇰🇷🇺🇸",
            "mixed ÅÄÖ ß 中文 العربية 𝄞",
            String(repeating: "가", count: 255),
        ]
        for (index, sample) in samples.enumerated() {
            try db.execute("INSERT INTO value_round_trip (id, vc, txt) VALUES (?, ?, ?)", [.int(Int64(100 + index)), .text(sample), .text(sample)])
        }
        let rows = try db.query("SELECT vc, txt, CHAR_LENGTH(vc) FROM value_round_trip WHERE id >= 100 ORDER BY id")
        XCTAssertEqual(rows.count, samples.count)
        for (row, sample) in zip(rows, samples) {
            XCTAssertEqual(row.string(0), sample)
            XCTAssertEqual(row.string(1), sample)
            XCTAssertEqual(row.int(2), sample.unicodeScalars.count, "stored as utf8mb4 code points")
        }
        // Text parameters compare correctly server-side.
        XCTAssertEqual(try db.queryOne("SELECT id FROM value_round_trip WHERE vc = ?", [.text(samples[1])])?.int(0), 101)
    }

    func testLongValuesTakeTheTruncationPath() throws {
        let long = String(repeating: "long text 🚀 한국어 ", count: 8_000)  // ~200 KB, > every buffer
        let medium = String(repeating: "m", count: 5_000)  // > initial buffer, < adaptive limit
        let bigBlob = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try db.execute("INSERT INTO value_round_trip (id, txt, lt, lb, vc) VALUES (10, ?, ?, ?, 'short')", [.text(medium), .text(long), .blob(bigBlob)])
        try db.execute("INSERT INTO value_round_trip (id, txt, lt, lb, vc) VALUES (11, 'small', 'small', ?, 'short2')", [.blob([9, 9])])
        try db.execute("INSERT INTO value_round_trip (id, txt, lt, lb, vc) VALUES (12, ?, ?, ?, 'short3')", [.text(medium), .text(long), .blob(bigBlob)])
        // Run the same statement several times: first with initial buffers, then grown ones.
        for _ in 0..<3 {
            let rows = try db.query("SELECT id, txt, lt, lb, vc FROM value_round_trip WHERE id IN (10, 11, 12) ORDER BY id")
            XCTAssertEqual(rows.count, 3)
            XCTAssertEqual(rows[0].string(1), medium)
            XCTAssertEqual(rows[0].string(2), long)
            XCTAssertEqual(rows[0].bytes(3), bigBlob)
            XCTAssertEqual(rows[0].string(4), "short")
            XCTAssertEqual(rows[1].string(1), "small")
            XCTAssertEqual(rows[1].string(2), "small")
            XCTAssertEqual(rows[1].bytes(3), [9, 9])
            XCTAssertEqual(rows[1].string(4), "short2")
            XCTAssertEqual(rows[2].string(1), medium)
            XCTAssertEqual(rows[2].string(2), long)
            XCTAssertEqual(rows[2].bytes(3), bigBlob)
        }
        // A truncated value on the first and only row.
        XCTAssertEqual(try db.queryOne("SELECT lt FROM value_round_trip WHERE id = 12")?.string(0), long)
        XCTAssertEqual(try db.queryOne("SELECT CONCAT(lt, '!') FROM value_round_trip WHERE id = 12")?.string(0), long + "!")
    }

    func testTemporalColumnsReadAsText() throws {
        try db.execute("DROP TABLE IF EXISTS temporal_format")
        defer { _ = try? db.execute("DROP TABLE IF EXISTS temporal_format") }
        try db.execute(
            "CREATE TABLE temporal_format (d DATE, dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), ts3 TIMESTAMP(3) NULL, t0 TIME, t3 TIME(3))")
        try db.execute(
            "INSERT INTO temporal_format VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                .text("0999-01-02"), .text("2024-03-04 05:06:07"), .text("2024-03-04 05:06:07.000"),
                .text("2024-03-04 05:06:07.000042"), .text("2024-03-04 05:06:07.5"), .text("-100:02:03"),
                .text("12:34:56.7"),
            ])
        let row = try XCTUnwrap(try db.queryOne("SELECT d, dt0, dt3, dt6, ts3, t0, t3 FROM temporal_format"))
        XCTAssertEqual(row.string(0), "0999-01-02")
        XCTAssertEqual(row.string(1), "2024-03-04 05:06:07")
        XCTAssertEqual(row.string(2), "2024-03-04 05:06:07.000", "exactly the column's 3 fractional digits")
        XCTAssertEqual(row.string(3), "2024-03-04 05:06:07.000042")
        XCTAssertEqual(row.string(4), "2024-03-04 05:06:07.500", "TIMESTAMP in UTC session time zone")
        XCTAssertEqual(row.string(5), "-100:02:03")
        XCTAssertEqual(row.string(6), "12:34:56.700")

        // Expressions carry their own precision; the session runs in UTC.
        let now = try XCTUnwrap(try db.queryOne("SELECT NOW(3), CURDATE(), @@session.time_zone, UTC_TIMESTAMP(3) = NOW(3)"))
        let text = try XCTUnwrap(now.string(0))
        XCTAssertTrue(text.wholeMatch(of: /\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}/) != nil, text)
        XCTAssertTrue(try XCTUnwrap(now.string(1)).wholeMatch(of: /\d{4}-\d{2}-\d{2}/) != nil)
        XCTAssertEqual(now.string(2), "+00:00")
        XCTAssertEqual(now.bool(3), true)
    }

    func testSessionIsStrict() throws {
        let error = assertDatabaseError(
            try db.execute("INSERT INTO value_round_trip (id, vc) VALUES (50, ?)", [.text(String(repeating: "x", count: 300))]))
        XCTAssertEqual(error?.code, 1406, "strict mode rejects instead of truncating")
        XCTAssertEqual(error?.isConnectionError, false)
        let zeroDate = assertDatabaseError(
            try db.execute("INSERT INTO value_round_trip (id, d) VALUES (51, ?)", [.text("0000-00-00")]))
        XCTAssertNotNil(zeroDate)
    }
}
