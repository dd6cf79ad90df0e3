@testable import TodoSyncAPI
import XCTest

/// The hot path's byte-level readings of request input give the general (character-level)
/// answers.
final class RequestParsingTests: XCTestCase {
    func testBearerTokenFastPathAgreesWithTheGeneralOne() {
        let long = String(repeating: "t", count: 256)
        let values = [
            "Bearer abc", "bearer abc", "BEARER abc", "BeArEr abc", "  Bearer abc", "Bearer    abc   ",
            "Bearer", "Bearer ", "Bearer     ", "", "   ", "Basic abc", "Bearerabc", "Bearer a b c",
            "Bearer \(long)", "Bearer \(long)t", "Bearer  \(long)  ", "Bearerr abc", "Beare abc", "Dearer abc",
            "Bearer\tabc", "Bearer abc\t", "Bearer é", "Bearer abc\r\n", "Bearer \u{85}abc", "B\u{301}earer abc",
        ]
        for value in values {
            XCTAssertEqual(RequestContext.bearerToken(in: value), RequestContext.generalBearerToken(in: value),
                           "\(value.debugDescription)")
        }
        XCTAssertEqual(RequestContext.bearerToken(in: "  bEaReR   tok-1_2.3~  "), "tok-1_2.3~")
        XCTAssertNil(RequestContext.bearerToken(in: "Bearer \(long)t"))
    }

    func testQueryDecoding() {
        XCTAssertEqual(HTTPRequest.parseQuery("date=2025-01-02&limit=5"), ["date": "2025-01-02", "limit": "5"])
        XCTAssertEqual(HTTPRequest.parseQuery("a=x%20y+z&b=%zz&c&a=last"), ["a": "last", "b": "%zz", "c": ""])
        XCTAssertEqual(HTTPRequest.parseQuery("q=%C3%A9t%C3%A9+1"), ["q": "été 1"])
        // Empty pairs, a bare `=`, `=` in a value, non-ASCII bytes, and `&` before a combining
        // mark (one Character, still two pairs: a query is split on bytes).
        XCTAssertEqual(HTTPRequest.parseQuery("&&a=1&&=v&b=x=y&&"), ["a": "1", "": "v", "b": "x=y"])
        XCTAssertEqual(HTTPRequest.parseQuery("é=ü&k"), ["é": "ü", "k": ""])
        XCTAssertEqual(HTTPRequest.parseQuery("a=1&\u{301}b=2"), ["a": "1", "\u{301}b": "2"])
        XCTAssertEqual(HTTPRequest.parseQuery(""), [:])
    }
}
