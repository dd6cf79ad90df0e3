@testable import TodoSyncCore
import XCTest

/// opIds are compared exactly (contract, Sync: push): `OpKey` is the opId's exact bytes, and
/// `sync_operations.op_key` (VARCHAR(200), Sql/010 and 018) must hold both an exact opId and the
/// lower-cased key that results stored before Sql/018 were filed under.
final class OpKeyTests: XCTestCase {
    /// No scalar lower-cases to more than two, so the legacy key of 100 code points fits 200.
    func testNoScalarLowercasesToMoreThanTwo() {
        var longest = 0
        var widest: Unicode.Scalar = "a"
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let count = scalar.properties.lowercaseMapping.unicodeScalars.count
            if count > longest { (longest, widest) = (count, scalar) }
        }
        XCTAssertLessThanOrEqual(longest, 2, "U+\(String(widest.value, radix: 16)) lower-cases to \(longest) scalars")
    }

    func testLegacyKeyOfTheLongestOpIdFitsTheColumn() {
        let operation = PushOperation(opID: String(repeating: "\u{130}", count: 100), fields: [:])  // İ
        XCTAssertEqual(operation.key.text.unicodeScalars.count, 100)
        XCTAssertEqual(operation.key.legacyText, String(repeating: "i\u{307}", count: 100))
        XCTAssertNil(operation.opIDProblem)
    }

    func testKeysCompareCodePointForCodePoint() {
        // Swift's String equality treats canonically equivalent text as equal; opIds must not.
        XCTAssertEqual("\u{E9}", "e\u{301}")
        XCTAssertNotEqual(OpKey("op-\u{E9}"), OpKey("op-e\u{301}"))
        XCTAssertEqual(Set([OpKey("op-\u{E9}"), OpKey("op-e\u{301}")]).count, 2)
        XCTAssertNotEqual(OpKey("pad-1"), OpKey("pad-1 "))
        XCTAssertNotEqual(OpKey("A"), OpKey("a"))
        XCTAssertEqual(OpKey("abc"), OpKey("abc"))
        XCTAssertNil(OpKey("abc").legacyText)
        XCTAssertEqual(OpKey("ABC").legacyText, "abc")
    }

    func testLengthIsCountedInCodePoints() {
        XCTAssertNotNil(PushOperation(opID: "", fields: [:]).opIDProblem)
        XCTAssertNil(PushOperation(opID: String(repeating: "\u{1F600}", count: 100), fields: [:]).opIDProblem)
        XCTAssertNotNil(PushOperation(opID: String(repeating: "o", count: 101), fields: [:]).opIDProblem)
    }
}
