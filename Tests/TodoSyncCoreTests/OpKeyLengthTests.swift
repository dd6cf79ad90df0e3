@testable import TodoSyncCore
import XCTest

/// `sync_operations.op_key` is VARCHAR(200) (Sql/010): the lower-cased key of any opId the
/// contract accepts (1–100 code points) must fit, or the whole push fails with 500 forever.
final class OpKeyLengthTests: XCTestCase {
    /// No scalar lower-cases to more than two, so 100 code points give at most 200.
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

    func testKeyOfTheLongestOpIdFitsTheColumn() {
        let opID = String(repeating: "\u{130}", count: 100)  // İ
        let operation = PushOperation(opID: opID, fields: [:])
        XCTAssertEqual(operation.key.unicodeScalars.count, 200)
        XCTAssertEqual(operation.key, String(repeating: "i\u{307}", count: 100))
    }
}
