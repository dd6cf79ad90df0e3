import TodoSyncCore
import XCTest

final class JSONParserTests: XCTestCase {
    private func parse(_ text: String) throws -> JSONValue {
        try JSONParser.parse(Array(text.utf8))
    }

    func testParsesNestedDocument() throws {
        let value = try parse(#" {"a": [1, -2.5e3, true, false, null], "b": {"c": "d"}} "#)
        guard case .object(let object) = value, case .array(let array) = object["a"] else {
            return XCTFail("expected an object with an array")
        }
        XCTAssertEqual(array.count, 5)
        XCTAssertEqual(array[0], .number(JSONNumber(literal: "1")))
        XCTAssertEqual(array[1], .number(JSONNumber(literal: "-2.5e3")))
        XCTAssertEqual(array[2], .bool(true))
        XCTAssertEqual(array[4], .null)
        XCTAssertEqual(object["b"], .object(["c": .string("d")]))
    }

    func testDecodesEscapesAndUnicode() throws {
        XCTAssertEqual(try parse(#""\u00e9\n\t\"\\\/ \ud83d\ude00 한국어 مرحبا""#),
                       .string("é\n\t\"\\/ 😀 한국어 مرحبا"))
    }

    func testRejectsMalformedInput() {
        for text in ["", "{", "{\"a\":}", "[1,]", "{\"a\" 1}", "01", "1.", "-", "tru", "\"abc", "{} x",
                     "\"\\ud800\"", "\"\\udc00x\"", "\"\\x\"", "\"a\u{01}b\"", "NaN", "{'a': 1}"] {
            XCTAssertThrowsError(try parse(text), "accepted \(text.debugDescription)")
        }
    }

    func testRejectsInvalidUTF8() {
        XCTAssertThrowsError(try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]))
        XCTAssertThrowsError(try JSONParser.parse([0x22, 0xED, 0xA0, 0x80, 0x22]))  // encoded surrogate
    }

    func testRejectsDeepNesting() {
        let deep = String(repeating: "[", count: 100) + String(repeating: "]", count: 100)
        XCTAssertThrowsError(try parse(deep))
        let ok = String(repeating: "[", count: 30) + String(repeating: "]", count: 30)
        XCTAssertNoThrow(try parse(ok))
    }

    func testNumbersAsIntegers() {
        XCTAssertEqual(JSONNumber(literal: "42").int64, 42)
        XCTAssertEqual(JSONNumber(literal: "3.0").int64, 3)
        XCTAssertEqual(JSONNumber(literal: "1e2").int64, 100)
        XCTAssertNil(JSONNumber(literal: "1.5").int64)
        XCTAssertNil(JSONNumber(literal: "1e400").int64)
        XCTAssertNil(JSONNumber(literal: "99999999999999999999999").int64)
    }
}
