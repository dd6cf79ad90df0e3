import XCTest
@testable import Deflate

/// The whole-body compressor (igzip, level 1): every member decompresses to its input, whatever
/// the input compresses to, and an output buffer too small is retried larger, never cut.
final class GzipCompressorTests: XCTestCase {
    private let compressor = GzipCompressor()

    private func json(_ count: Int) -> [UInt8] {
        var body = Array(#"{"changes":{"todos":{"upserted":["#.utf8)
        var k = 0
        while body.count < count {
            body += Array(#"{"id":\#(k),"title":"Write the report \#(k % 97)","isCompleted":\#(k % 3 == 0)},"#.utf8)
            k += 1
        }
        return body
    }

    func testEveryMemberDecompressesToItsInput() {
        var random = SystemRandomNumberGenerator()
        let inputs: [(String, [UInt8])] = [
            ("empty", []),
            ("one byte", [0x7b]),
            ("every byte value", (0...255).map(UInt8.init)),
            ("a 2 KB list", json(2_000)),
            ("a 170 KB pull page", json(170_000)),
            ("1 MB of one byte", [UInt8](repeating: 0x20, count: 1 << 20)),
            ("300 KB that does not compress", (0..<300_000).map { _ in UInt8.random(in: 0...255, using: &random) }),
        ]
        for (name, input) in inputs {
            let member = compressor.gzip(input)
            XCTAssertEqual(Array(member.prefix(3)), [0x1f, 0x8b, 8], "\(name): a gzip member of deflate data")
            XCTAssertEqual(gunzip(member), input, name)
        }
        let page = json(170_000)
        XCTAssertLessThan(compressor.gzip(page).count, page.count / 4, "a pull page compresses")
    }

    func testAnOutputBufferTooSmallIsRetriedNotCut() {
        let input = json(50_000)
        XCTAssertNil(compressor.gzip(input, capacity: 64), "64 bytes cannot hold the member")
        let whole = compressor.gzip(input)
        XCTAssertEqual(compressor.gzip(input, capacity: whole.count), whole)
        XCTAssertEqual(gunzip(whole), input)
    }
}
