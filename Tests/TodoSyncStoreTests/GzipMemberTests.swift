import Deflate
import MariaDB
import XCTest

/// `GzipMember.fromCompress` against MariaDB's own `COMPRESS()` and `CRC32()` (what the stored day
/// lists hold, Sql/026): every member must decompress to the bytes MariaDB was given, including
/// the values whose zlib stream ends in a space (MariaDB appends a dot) or in a space and a dot
/// (it does not): those two look alike, and only the stream itself tells where it ends.
final class GzipMemberTests: StoreTestCase {
    /// The member built from MariaDB's values for `input`, and its stored value.
    private func member(_ input: [UInt8]) throws -> (member: [UInt8]?, stored: [UInt8]) {
        let row = try XCTUnwrap(try db.queryOne("SELECT COMPRESS(?), CRC32(?)", [.blob(input), .blob(input)]))
        let stored = try XCTUnwrap(row.bytes(0))
        let crc = UInt32(try XCTUnwrap(row.int64(1)))
        return (stored.withUnsafeBytes { GzipMember.fromCompress($0, crc32: crc) }, stored)
    }

    /// Text whose Adler-32 has `a` as its low half (1 + the sum of its bytes, modulo 65,521, here
    /// below that): the zlib stream's last two bytes are `a`, big-endian, whatever compressed it.
    private func text(adlerLow a: Int) -> [UInt8] {
        var bytes = Array(#"{"items":[{"title":"#.utf8)
        var need = a - 1 - bytes.reduce(0) { $0 + Int($1) }
        while need > 126 + 32 { bytes.append(UInt8(ascii: "z")); need -= 122 }
        precondition(need >= 32, "the prefix is longer than the target")
        if need > 126 { bytes.append(UInt8(need - 32)); need = 32 }  // two printable bytes
        bytes.append(UInt8(need))
        return bytes
    }

    func testMembersOfCompressDecompressToTheirInput() throws {
        var random = SplitMix(seed: 26)
        var inputs: [[UInt8]] = [Array("x".utf8), Array(repeating: UInt8(ascii: "a"), count: 300_000)]
        for _ in 0..<40 {
            let length = random.next(5_000)
            inputs.append((0..<length).map { _ in UInt8(32 + random.next(95)) })
        }
        for input in inputs {
            let (member, stored) = try member(input)
            XCTAssertEqual(member.flatMap { gunzip($0) }, input, "\(input.count) bytes, stored \(stored.count)")
        }
    }

    func testAStreamEndingInASpaceGetsADotThatIsNotSent() throws {
        let input = text(adlerLow: 0x1F20)
        let (member, stored) = try member(input)
        XCTAssertEqual(Array(stored.suffix(2)), Array(" .".utf8), "MariaDB appended its dot")
        XCTAssertEqual(member.flatMap { gunzip($0) }, input)
    }

    func testAStreamEndingInASpaceAndADotKeepsBoth() throws {
        let input = text(adlerLow: 0x202E)
        let (member, stored) = try member(input)
        XCTAssertEqual(Array(stored.suffix(2)), Array(" .".utf8), "the stream's own last bytes")
        XCTAssertEqual(member.flatMap { gunzip($0) }, input)
    }

    func testValuesThatAreNotCompressOutputAreRefused() throws {
        let (good, stored) = try member(Array(repeating: UInt8(ascii: "b"), count: 2_000))
        XCTAssertNotNil(good)
        for bad in [[], Array(stored.prefix(8)), [0, 0, 0, 0] + Array(stored.dropFirst(4).reversed()),
                    Array(stored.prefix(4)) + [0x78, 0x9D] + Array(stored.dropFirst(6))] {
            XCTAssertNil(bad.withUnsafeBytes { GzipMember.fromCompress($0, crc32: 0) }, "\(bad.prefix(8))")
        }
        // A wrong CRC makes a member that gzip readers refuse.
        let wrong = try XCTUnwrap(stored.withUnsafeBytes { GzipMember.fromCompress($0, crc32: 12345) })
        XCTAssertNil(gunzip(wrong))
    }
}
