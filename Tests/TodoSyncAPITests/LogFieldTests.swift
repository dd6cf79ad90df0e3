import XCTest

@testable import TodoSyncAPI

/// Issue 19, item 6: client-controlled values are capped before they reach a log line.
final class LogFieldTests: XCTestCase {
    func testShortValuesAreKeptAsTheyAre() {
        XCTAssertEqual(LogField.capped("GET", limit: LogField.methodLimit), "GET")
        XCTAssertEqual(LogField.capped(String(repeating: "a", count: 256)), String(repeating: "a", count: 256))
    }

    func testLongValuesAreCutAndSayHowMuchWasLeftOut() {
        let capped = LogField.capped(String(repeating: "A", count: 16_000), limit: LogField.methodLimit)
        XCTAssertEqual(capped, String(repeating: "A", count: 16) + "…(+15984 bytes)")
        XCTAssertLessThan(LogField.capped(String(repeating: "p", count: 20_000)).utf8.count, 300)
    }

    func testCutsAtACharacterBoundary() {
        // "é" is 2 bytes: 3 of them (6 bytes) do not fit in 5, 2 do.
        XCTAssertEqual(LogField.capped("ééé", limit: 5), "éé…(+2 bytes)")
        XCTAssertEqual(LogField.capped("😀😀", limit: 6), "😀…(+4 bytes)")
    }
}
