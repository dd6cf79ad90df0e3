import XCTest

@testable import FastCGI

/// Streamed bodies (`FastCGIBodyStream`): chunking, and what the web server sees over a real socket.
final class FastCGIBodyStreamTests: XCTestCase {
    private var servers: [TestServer] = []

    override func tearDown() {
        for server in servers {
            XCTAssertNotNil(server.stop(), "run() did not return after shutdown")
            server.removeDirectory()
        }
        servers = []
        super.tearDown()
    }

    private func start(_ respond: @escaping @Sendable () -> FastCGIResponse) throws -> TestServer {
        let server = TestServer(workers: 1, maxBodyBytes: 1 << 20, readTimeoutSeconds: 2, readDeadlineSeconds: 5)
        servers.append(server)
        try server.start { _ in { _ in respond() } }
        return server
    }

    private static func request(_ server: TestServer) throws -> FastCGITestClient.Reply {
        try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_METHOD", "GET"), ("REQUEST_URI", "/x")])
    }

    /// `pieces` pieces of 1 to 1,000 bytes each (a deterministic pattern), about 500 KB in all.
    private static func pieces(_ count: Int = 1000) -> [[UInt8]] {
        (0..<count).map { index in (0..<(index * 7919 % 1000 + 1)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) } }
    }

    func testTheChunkerPassesEveryByteOnInChunksOfAtMostItsCapacity() {
        var chunker = BodyChunker(capacity: 4096)
        var chunks: [[UInt8]] = []
        let input = Self.pieces() + [[UInt8](repeating: 7, count: 20_000)]  // one piece larger than a chunk
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

    func testAStreamedBodyArrivesWholeWithItsHeadAndNoContentLength() throws {
        let pieces = Self.pieces()
        let server = try start {
            FastCGIResponse(status: 200, headers: [("Content-Type", "application/json")], stream: FastCGIBodyStream { write in
                for piece in pieces where !piece.withUnsafeBytes(write) { return .cutOff }
                return .complete
            })
        }
        let reply = try Self.request(server)
        XCTAssertEqual(reply.protocolStatus, 0)
        let response = try reply.parsed()
        XCTAssertEqual(response.statusLine, "Status: 200 OK")
        XCTAssertEqual(response.header("Content-Type"), "application/json")
        XCTAssertNil(response.header("Content-Length"), "the web server frames a streamed body")
        XCTAssertEqual(response.body, pieces.flatMap { $0 })
        XCTAssertGreaterThan(response.body.count, 4 * FastCGIBodyStream.chunkBytes)
    }

    func testAnErrorBeforeAnyChunkWentOutIsAnsweredInstead() throws {
        let server = try start {
            FastCGIResponse(status: 200, stream: FastCGIBodyStream { write in
                _ = Array("{\"partial\":".utf8).withUnsafeBytes(write)  // held: less than a chunk
                return .instead(FastCGIResponse(status: 503, headers: [("Retry-After", "1")], body: Array("busy".utf8)))
            })
        }
        let response = try Self.request(server).parsed()
        XCTAssertEqual(response.statusLine, "Status: 503 Service Unavailable")
        XCTAssertEqual(response.header("Content-Length"), "4")
        XCTAssertEqual(response.body, Array("busy".utf8))
    }

    func testABodyThatFailsMidwayIsCutOffNotEndedAsIfWhole() throws {
        let server = try start {
            FastCGIResponse(status: 200, stream: FastCGIBodyStream { write in
                let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 3 * FastCGIBodyStream.chunkBytes)
                _ = chunk.withUnsafeBytes(write)
                return .instead(FastCGIResponse(status: 500))  // too late: the head is out
            })
        }
        XCTAssertThrowsError(try Self.request(server), "no FCGI_END_REQUEST may follow a cut-off body")
        // The worker is not lost with the connection: it serves the next request (cut off again).
        XCTAssertThrowsError(try Self.request(server))
    }
}
