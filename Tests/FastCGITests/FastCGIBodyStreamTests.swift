import XCTest

@testable import FastCGI

/// Streamed bodies (`FastCGIBodyStream`): chunking.
final class FastCGIBodyChunkerTests: XCTestCase {
    /// `pieces` pieces of 1 to 1,000 bytes each (a deterministic pattern), about 500 KB in all.
    static func pieces(_ count: Int = 1000) -> [[UInt8]] {
        (0..<count).map { index in (0..<(index * 7919 % 1000 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) } }
    }

    func testTheChunkerPassesEveryByteOnInChunksOfAtMostItsCapacity() {
        var chunker = BodyChunker(capacity: 4096)
        var chunks: [[UInt8]] = []
        let input = FastCGIBodyChunkerTests.pieces() + [[UInt8](repeating: 7, count: 20_000)]  // one piece larger than a chunk
        for piece in input {
            XCTAssertTrue(piece.withUnsafeBytes { chunker.append($0) { chunks.append(Array($0)); return true } })
        }
        XCTAssertTrue(chunker.finish { chunks.append(Array($0)); return true })
        XCTAssertEqual(chunks.flatMap { $0 }, input.flatMap { $0 })
        XCTAssertTrue(chunks.allSatisfy { $0.count <= 4096 && !$0.isEmpty })
        XCTAssertTrue(chunks.dropLast().allSatisfy { $0.count == 4096 }, "only the last chunk may be short")
    }

    func testTheChunkerStopsOnceTheReaderRefused() {
        var chunker = BodyChunker(capacity: 100)
        var emitted = 0
        let refuse: (UnsafeRawBufferPointer) -> Bool = { _ in emitted += 1; return false }
        let piece = [UInt8](repeating: 1, count: 250)
        XCTAssertFalse(piece.withUnsafeBytes { chunker.append($0, emit: refuse) })
        XCTAssertFalse(piece.withUnsafeBytes { chunker.append($0, emit: refuse) })
        XCTAssertFalse(chunker.finish(emit: refuse))
        XCTAssertEqual(emitted, 1, "nothing is offered after a refusal")
        XCTAssertTrue(chunker.failed)
    }
}

/// Streamed bodies over a real socket: what the web server sees.
extension FastCGIServerRequestTests {
    private func startStreaming(_ respond: @escaping @Sendable () -> FastCGIResponse) throws -> TestServer {
        try startServer(workers: 1) { _ in { _ in respond() } }
    }

    private static func get(_ server: TestServer) throws -> FastCGITestClient.Reply {
        try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_METHOD", "GET"), ("REQUEST_URI", "/x")])
    }

    func testAStreamedBodyArrivesWholeWithItsHeadAndNoContentLength() throws {
        let pieces = FastCGIBodyChunkerTests.pieces()
        let server = try startStreaming {
            FastCGIResponse(status: 200, headers: [("Content-Type", "application/json")], stream: FastCGIBodyStream { write in
                for piece in pieces where !piece.withUnsafeBytes(write) { return .cutOff }
                return .complete
            })
        }
        let reply = try Self.get(server)
        XCTAssertEqual(reply.protocolStatus, 0)
        let response = try reply.parsed()
        XCTAssertEqual(response.statusLine, "Status: 200 OK")
        XCTAssertEqual(response.header("Content-Type"), "application/json")
        XCTAssertNil(response.header("Content-Length"), "the web server frames a streamed body")
        XCTAssertEqual(response.body, pieces.flatMap { $0 })
        XCTAssertGreaterThan(response.body.count, 4 * FastCGIBodyStream.chunkBytes)
    }

    func testAnErrorBeforeAnyChunkWentOutIsAnsweredInstead() throws {
        let server = try startStreaming {
            FastCGIResponse(status: 200, stream: FastCGIBodyStream { write in
                _ = Array("{\"partial\":".utf8).withUnsafeBytes(write)  // held: less than a chunk
                return .instead(FastCGIResponse(status: 503, headers: [("Retry-After", "1")], body: Array("busy".utf8)))
            })
        }
        let response = try Self.get(server).parsed()
        XCTAssertEqual(response.statusLine, "Status: 503 Service Unavailable")
        XCTAssertEqual(response.header("Content-Length"), "4")
        XCTAssertEqual(response.body, Array("busy".utf8))
    }

    func testABodyThatFailsMidwayIsCutOffNotEndedAsIfWhole() throws {
        let server = try startStreaming {
            FastCGIResponse(status: 200, stream: FastCGIBodyStream { write in
                let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 3 * FastCGIBodyStream.chunkBytes)
                _ = chunk.withUnsafeBytes(write)
                return .instead(FastCGIResponse(status: 500))  // too late: the head is out
            })
        }
        XCTAssertThrowsError(try Self.get(server), "no FCGI_END_REQUEST may follow a cut-off body")
        // The worker is not lost with the connection: it serves the next request (cut off again).
        XCTAssertThrowsError(try Self.get(server))
    }
}
