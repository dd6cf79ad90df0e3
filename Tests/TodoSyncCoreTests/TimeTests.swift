import TodoSyncCore
import XCTest

final class TimeTests: XCTestCase {
    func testDayAcceptsOnlyRealDatesInRange() {
        XCTAssertEqual(Day("2026-11-21")?.description, "2026-11-21")
        XCTAssertNotNil(Day("2000-01-01"))
        XCTAssertNotNil(Day("2999-12-31"))
        XCTAssertNotNil(Day("2024-02-29"))
        for text in ["1999-12-31", "3000-01-01", "2026-02-29", "2026-02-30", "2026-13-01", "2026-00-10",
                     "2026-1-01", "2026-01-1", "20260101", "2026-01-01T00:00", " 2026-01-01", "２０２６-01-01"] {
            XCTAssertNil(Day(text), text)
        }
    }

    func testDaysSinceEpoch() {
        XCTAssertEqual(Day("2000-01-01")!.daysSinceEpoch, 10957)
        XCTAssertEqual(Day("2026-12-31")!.daysSinceEpoch - Day("2026-01-01")!.daysSinceEpoch, 364)
        XCTAssertEqual(Day("2024-12-31")!.daysSinceEpoch - Day("2024-01-01")!.daysSinceEpoch, 365)
    }

    func testTimestampFormats() {
        let time = Timestamp(millisecondsSinceEpoch: 1_795_253_400_123)  // 2026-11-21T09:30:00.123Z
        XCTAssertEqual(time.rfc3339, "2026-11-21T09:30:00.123Z")
        XCTAssertEqual(time.databaseText, "2026-11-21 09:30:00.123")
        XCTAssertEqual(Timestamp(millisecondsSinceEpoch: 5).rfc3339, "1970-01-01T00:00:00.005Z")
        XCTAssertEqual(Timestamp(millisecondsSinceEpoch: -1).rfc3339, "1969-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp(millisecondsSinceEpoch: 1_709_208_000_000).databaseText, "2024-02-29 12:00:00.000")
        XCTAssertEqual(Timestamp(millisecondsSinceEpoch: 253_402_300_799_999).rfc3339, "9999-12-31T23:59:59.999Z")
        XCTAssertEqual(Timestamp(millisecondsSinceEpoch: 946_684_799_000).rfc3339, "1999-12-31T23:59:59.000Z")
    }

    func testDatabaseTextToRFC3339() {
        XCTAssertEqual(Timestamp.rfc3339(fromDatabaseText: "2026-11-21 09:30:00.123"), "2026-11-21T09:30:00.123Z")
        XCTAssertEqual(Timestamp.rfc3339(fromDatabaseText: "2026-11-21 09:30:00"), "2026-11-21T09:30:00.000Z")
        XCTAssertEqual(Timestamp.rfc3339(fromDatabaseText: "2026-11-21 09:30:00.1"), "2026-11-21T09:30:00.100Z")
    }
}
