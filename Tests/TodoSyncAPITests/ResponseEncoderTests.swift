import Deflate
import XCTest
@testable import TodoSyncAPI

final class ResponseEncoderTests: XCTestCase {
    private let encoder = ResponseEncoder()

    private func jsonResponse(bytes count: Int, headers: [HTTPHeader] = []) -> HTTPResponse {
        var body = Array(#"{"items":["#.utf8)
        while body.count < count { body += Array(#"{"title":"Write the report","isCompleted":false},"#.utf8) }
        body[body.count - 1] = UInt8(ascii: "]")
        body.append(UInt8(ascii: "}"))
        return .json(200, body, headers: headers)
    }

    private func header(_ response: HTTPResponse, _ name: String) -> [String] {
        response.headers.filter { $0.name == name }.map(\.value)
    }

    func testALargeJSONBodyIsGzippedWhenAcceptedAndDecodesToTheSameBytes() throws {
        let plain = jsonResponse(bytes: 50_000)
        let encoded = encoder.encode(plain, acceptEncoding: "gzip, deflate, br")
        XCTAssertEqual(header(encoded, "Content-Encoding"), ["gzip"])
        XCTAssertEqual(header(encoded, "Vary"), ["Accept-Encoding"])
        XCTAssertEqual(header(encoded, "Content-Type"), ["application/json"])
        XCTAssertLessThan(encoded.body.count, plain.body.count / 5)
        XCTAssertEqual(Array(encoded.body.prefix(2)), [0x1f, 0x8b], "a gzip member")
        XCTAssertEqual(gunzip(encoded.body), plain.body)
    }

    func testBodiesAreLeftAloneWhenGzipIsNotAcceptedOrNotWorthIt() {
        let large = jsonResponse(bytes: 50_000)
        for refusal in [nil, "", "identity", "gzip;q=0", "br, gzip; q=0.0", "deflate", "*;q=0", "gzip;q=0, *"] {
            let encoded = encoder.encode(large, acceptEncoding: refusal)
            XCTAssertEqual(encoded.body, large.body, "Accept-Encoding: \(refusal ?? "(none)")")
            XCTAssertEqual(header(encoded, "Content-Encoding"), [], "Accept-Encoding: \(refusal ?? "(none)")")
        }
        let small = jsonResponse(bytes: ResponseEncoder.minimumLength - 60)
        XCTAssertLessThan(small.body.count, ResponseEncoder.minimumLength)
        XCTAssertEqual(encoder.encode(small, acceptEncoding: "gzip").body, small.body)
        // A record keeps the bytes its ETag names.
        let tagged = jsonResponse(bytes: 5_000, headers: [HTTPHeader("ETag", "\"7\"")])
        XCTAssertEqual(encoder.encode(tagged, acceptEncoding: "gzip").body, tagged.body)
        let notJSON = HTTPResponse(status: 200, headers: [HTTPHeader("Content-Type", "text/plain")],
                                   body: Array(repeating: UInt8(ascii: "a"), count: 5_000))
        XCTAssertEqual(encoder.encode(notJSON, acceptEncoding: "gzip").body, notJSON.body)
    }

    func testAcceptEncodingIsReadAsRFC9110Says() {
        for accepted in ["gzip", "GZIP", "x-gzip", "br;q=1.0, gzip;q=0.5", " deflate , gzip ", "*", "*;q=0.1", "identity, *;q=0.5"] {
            XCTAssertTrue(ResponseEncoder.acceptsGzip(accepted), accepted)
        }
        for refused in ["", "identity", "br", "gzip;q=0", "gzip;q=0.000", "*;q=0", "gzip;q=0, *;q=1", "gzipx"] {
            XCTAssertFalse(ResponseEncoder.acceptsGzip(refused), refused)
        }
    }

    /// The encoder remembers the last value's answer: alternating values still get their own.
    func testRememberedAcceptEncodingFollowsTheValue() {
        let encoder = ResponseEncoder()
        let response = jsonResponse(bytes: 5_000)
        for value in ["gzip", "gzip", "identity", "identity", "gzip", "gzip;q=0", "br, gzip"] {
            let encoded = encoder.encode(response, acceptEncoding: value)
            XCTAssertEqual(encoded.headers.contains { $0.name == "Content-Encoding" }, ResponseEncoder.acceptsGzip(value), value)
        }
    }

    // MARK: streamed bodies

    /// A streamed JSON response writing `pieces`.
    private func streamed(_ pieces: [[UInt8]]) -> HTTPResponse {
        .json(200, stream: ResponseStream { write in
            for piece in pieces where !piece.withUnsafeBytes(write) { return .cutOff }
            return .complete
        })
    }

    /// Runs a response's stream, collecting what it writes piece by piece.
    private func run(_ response: HTTPResponse) throws -> (outcome: ResponseStream.Outcome, writes: [[UInt8]]) {
        var writes: [[UInt8]] = []
        let outcome = try XCTUnwrap(response.stream).produce { writes.append(Array($0)); return true }
        return (outcome, writes)
    }

    /// About 1.5 MB of todo-like JSON in 3,000 pieces.
    private static let records: [[UInt8]] = (0..<3000).map { index in
        Array(#"{"id":\#(index),"title":"Buy \#(index % 97) apples","notes":"\#(String(repeating: "n", count: index % 400))"},"#.utf8)
    }

    func testAStreamedBodyIsGzippedAsItIsProducedAndDecodesToTheSameBytes() throws {
        let response = streamed(Self.records)
        let encoded = encoder.encode(response, acceptEncoding: "gzip, deflate")
        XCTAssertEqual(header(encoded, "Content-Encoding"), ["gzip"])
        XCTAssertEqual(header(encoded, "Vary"), ["Accept-Encoding"])
        XCTAssertEqual(header(encoded, "Content-Type"), ["application/json"])
        let (outcome, writes) = try run(encoded)
        guard case .complete = outcome else { return XCTFail("\(outcome)") }
        let plain = Self.records.flatMap { $0 }
        let compressed = writes.flatMap { $0 }
        XCTAssertEqual(Array(compressed.prefix(2)), [0x1f, 0x8b], "one gzip member")
        XCTAssertEqual(gunzip(compressed), plain)
        XCTAssertLessThan(compressed.count, plain.count / 5)
        XCTAssertGreaterThan(writes.count, 1, "compressed output leaves while the body is produced")
        XCTAssertTrue(writes.allSatisfy { $0.count <= 64 * 1024 }, "bounded pieces: \(writes.map(\.count).max() ?? 0)")
    }

    func testAStreamedBodyStaysIdentityWhenGzipIsNotAccepted() throws {
        let encoded = encoder.encode(streamed(Self.records), acceptEncoding: "identity")
        XCTAssertEqual(header(encoded, "Content-Encoding"), [])
        XCTAssertEqual(try run(encoded).writes.flatMap { $0 }, Self.records.flatMap { $0 })
    }

    func testAGzippedStreamStopsWhenTheReaderIsGoneAndPassesAnAnswerInsteadOn() throws {
        let encoded = encoder.encode(streamed(Self.records), acceptEncoding: "gzip")
        var offered = 0
        let outcome = try XCTUnwrap(encoded.stream).produce { _ in offered += 1; return false }
        guard case .cutOff = outcome else { return XCTFail("\(outcome)") }
        XCTAssertEqual(offered, 1)

        let failing = HTTPResponse.json(200, stream: ResponseStream { _ in .instead(.error(.internalError)) })
        guard case .instead(let answer) = try run(encoder.encode(failing, acceptEncoding: "gzip")).outcome else {
            return XCTFail("the answer instead is passed on")
        }
        XCTAssertEqual(answer.status, 500)
    }
}
