import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// `RequestDeadline` from nginx's `$msec` (no database needed).
final class RequestDeadlineTests: XCTestCase {
    func testParsesNginxMsec() {
        XCTAssertEqual(RequestDeadline.parseMsec("1764000000.123")?.millisecondsSinceEpoch, 1_764_000_000_123)
        XCTAssertEqual(RequestDeadline.parseMsec("1764000000.1")?.millisecondsSinceEpoch, 1_764_000_000_100)
        XCTAssertEqual(RequestDeadline.parseMsec("1764000000")?.millisecondsSinceEpoch, 1_764_000_000_000)
        XCTAssertEqual(RequestDeadline.parseMsec("253402300799.999")?.millisecondsSinceEpoch, 253_402_300_799_999)
        for bad in ["", ".", "-1.000", "-0", "+1", "+1764000000.000", "1764000000.1234", "17x.000", "1.2.3",
                    "1764000000.", "９.000", "253402300800", "9223372036854775.807", "9223372036854775807",
                    "99999999999999999999.999", " 1764000000"] {
            XCTAssertNil(RequestDeadline.parseMsec(bad), bad)
        }
    }

    /// Issue 19, item 8: a direct FastCGI request with `HTTP_X_TODOSYNC_START` near Int64.max
    /// overflowed `start + budget` and crashed the responder.
    func testNoHandoverTimeOverflowsOrStretchesTheBudget() {
        let now = Timestamp.now().millisecondsSinceEpoch
        for start in [Int64.max, Int64.max - 5, 253_402_300_799_999, now + 3_600_000] {
            let deadline = RequestDeadline(start: Timestamp(millisecondsSinceEpoch: start), budgetMilliseconds: 20_000)
            XCTAssertLessThanOrEqual(deadline.millisecondsSinceEpoch, Timestamp.now().millisecondsSinceEpoch + 20_000)
            XCTAssertGreaterThanOrEqual(deadline.millisecondsSinceEpoch, now + 20_000)
            XCTAssertFalse(deadline.hasPassed)
        }
        let old = RequestDeadline(start: Timestamp(millisecondsSinceEpoch: 1_000_000), budgetMilliseconds: 20_000)
        XCTAssertEqual(old.millisecondsSinceEpoch, 1_020_000)
        XCTAssertTrue(old.hasPassed)
        XCTAssertTrue(RequestDeadline(start: Timestamp(millisecondsSinceEpoch: .min), budgetMilliseconds: -1).hasPassed)
    }
}
