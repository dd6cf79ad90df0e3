#if canImport(Glibc)
import Glibc
#endif
import Dispatch
@testable import FastCGI
import Foundation
import XCTest

/// Requests and responses over a real unix socket, spoken by ``FastCGITestClient``.
final class FastCGIServerRequestTests: XCTestCase {
    private var servers: [TestServer] = []

    override func tearDown() {
        for server in servers {
            XCTAssertNotNil(server.stop(), "run() did not return after shutdown")
            server.removeDirectory()
        }
        servers = []
        super.tearDown()
    }

    func startServer(
        workers: Int = 2, maxBodyBytes: Int = 1 << 20, readTimeoutSeconds: Double = 2, readDeadlineSeconds: Double = 5,
        dispatches: Bool = true, keptIdleSeconds: Double = 300,
        makeHandler: @escaping @Sendable (Int) -> (FastCGIRequest) -> FastCGIResponse
    ) throws -> TestServer {
        let server = TestServer(
            workers: workers, maxBodyBytes: maxBodyBytes, readTimeoutSeconds: readTimeoutSeconds,
            readDeadlineSeconds: readDeadlineSeconds, dispatches: dispatches, keptIdleSeconds: keptIdleSeconds)
        servers.append(server)
        try server.start(makeHandler: makeHandler)
        return server
    }

    /// Records every request and answers with the request body.
    private func startEchoServer(
        workers: Int = 2, maxBodyBytes: Int = 1 << 20, seen: Shared<[FastCGIRequest]>
    ) throws -> TestServer {
        try startServer(workers: workers, maxBodyBytes: maxBodyBytes) { _ in
            { request in
                seen.update { $0.append(request) }
                return FastCGIResponse(
                    status: request.bodyTooLarge ? 413 : 200,
                    headers: [("Content-Type", "application/octet-stream")], body: request.body)
            }
        }
    }

    func testParametersAndBodyArriveIntact() throws {
        let seen = Shared<[FastCGIRequest]>([])
        let server = try startEchoServer(seen: seen)
        let note = "héllo wörld 🌍 — 日本語"
        let longCookie = String(repeating: "session=abcdef0123456789; ", count: 20)  // > 127 bytes: 4-byte length
        var body = Array("{\"title\":\"Kaffee ☕️ kaufen\",\"emoji\":\"👩‍💻\"}".utf8)
        body += (0...255).map { UInt8($0) }

        let reply = try FastCGITestClient.send(
            to: server.socketPath,
            params: [
                ("REQUEST_METHOD", "PUT"), ("REQUEST_URI", "/v1/todos/%C3%A9?x=1&y=ü"), ("QUERY_STRING", "x=1&y=ü"),
                ("CONTENT_TYPE", "application/json; charset=utf-8"), ("CONTENT_LENGTH", "\(body.count)"),
                ("HTTP_X_NOTE", note), ("HTTP_IF_MATCH", "\"v7\""), ("HTTP_COOKIE", longCookie), ("HTTP_X_EMPTY", ""),
            ],
            body: body)

        XCTAssertEqual(reply.protocolStatus, 0)
        let response = try reply.parsed()
        XCTAssertEqual(response.statusLine, "Status: 200 OK")
        XCTAssertEqual(response.body, body)

        let request = try XCTUnwrap(seen.value.first)
        XCTAssertEqual(request.method, "PUT")
        XCTAssertEqual(request.uri, "/v1/todos/%C3%A9?x=1&y=ü")
        XCTAssertEqual(request.path, "/v1/todos/%C3%A9")
        XCTAssertEqual(request.queryString, "x=1&y=ü")
        XCTAssertEqual(request.parameters["HTTP_X_NOTE"], note)
        XCTAssertEqual(request.header("X-Note"), note)
        XCTAssertEqual(request.header("If-Match"), "\"v7\"")
        XCTAssertEqual(request.header("Cookie"), longCookie)
        XCTAssertEqual(request.parameters["HTTP_X_EMPTY"], "")
        XCTAssertEqual(request.header("Content-Type"), "application/json; charset=utf-8")
        XCTAssertEqual(request.parameters["FCGI_ROLE"], "RESPONDER")
        XCTAssertEqual(request.body, body)
        XCTAssertFalse(request.bodyTooLarge)
    }

    func testOneMebibyteBodyAndResponseRoundTrip() throws {
        let seen = Shared<[FastCGIRequest]>([])
        let server = try startEchoServer(seen: seen)
        var generator = SystemRandomNumberGenerator()
        let body = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255, using: &generator) }

        let reply = try FastCGITestClient.send(
            to: server.socketPath,
            params: [("REQUEST_METHOD", "POST"), ("REQUEST_URI", "/upload"), ("CONTENT_LENGTH", "\(body.count)")],
            body: body)

        let response = try reply.parsed()
        XCTAssertEqual(response.statusLine, "Status: 200 OK")
        XCTAssertEqual(response.header("Content-Length"), "\(1 << 20)")
        XCTAssertEqual(response.body.count, body.count)
        XCTAssertTrue(response.body == body, "echoed body differs")
        XCTAssertEqual(seen.value.first?.bodyTooLarge, false)
    }

    func testBodyAboveLimitIsFlaggedAndNotRead() throws {
        let seen = Shared<[FastCGIRequest]>([])
        let server = try startEchoServer(workers: 1, maxBodyBytes: 1024, seen: seen)
        let params = [("REQUEST_METHOD", "POST"), ("REQUEST_URI", "/big")]

        let tooLarge = try FastCGITestClient.send(
            to: server.socketPath, params: params + [("CONTENT_LENGTH", "4096")],
            body: [UInt8](repeating: 7, count: 4096))
        let atLimit = try FastCGITestClient.send(
            to: server.socketPath, params: params + [("CONTENT_LENGTH", "1024")],
            body: [UInt8](repeating: 9, count: 1024))

        XCTAssertEqual(try tooLarge.parsed().statusLine, "Status: 413 Content Too Large")
        XCTAssertEqual(try tooLarge.parsed().body, [])
        XCTAssertEqual(try atLimit.parsed().body, [UInt8](repeating: 9, count: 1024))
        let requests = seen.value
        XCTAssertEqual(requests.map(\.bodyTooLarge), [true, false])
        XCTAssertEqual(requests.first?.body, [])
        XCTAssertEqual(requests.first?.parameters["CONTENT_LENGTH"], "4096")
    }

    func testResponseIsWrittenInCGIFormat() throws {
        let server = try startServer { _ in
            { request in
                switch request.path {
                case "/empty": return FastCGIResponse(status: 204, headers: [("X-A", "1")], body: Array("ignored".utf8))
                case "/bad": return FastCGIResponse(status: 7)
                default:
                    return FastCGIResponse(
                        status: 404,
                        headers: [("Content-Type", "application/json"), ("Content-Length", "1"), ("X-Evil", "a\nb"), ("X-Ok", "ü")],
                        body: Array("{\"error\":\"nö\"}".utf8))
                }
            }
        }
        let notFound = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/x")])
        XCTAssertEqual(
            notFound.stdout,
            Array("Status: 404 Not Found\r\nContent-Type: application/json\r\nX-Ok: ü\r\nContent-Length: 15\r\n\r\n{\"error\":\"nö\"}".utf8))
        XCTAssertEqual(notFound.stderr, [])
        XCTAssertEqual(notFound.appStatus, 0)
        XCTAssertEqual(notFound.protocolStatus, 0)

        let empty = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/empty")])
        XCTAssertEqual(empty.stdout, Array("Status: 204 No Content\r\nX-A: 1\r\n\r\n".utf8))

        let bad = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/bad")])
        XCTAssertEqual(bad.stdout, Array("Status: 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n".utf8))
    }

    func testConcurrentRequestsAreSpreadOverWorkersEachWithItsOwnHandler() throws {
        let made = Shared<[Int: pthread_t]>([:])
        let served = Shared<[(worker: Int, onMakerThread: Bool)]>([])
        let server = try startServer(workers: 4) { index in
            let thread = pthread_self()
            made.update { $0[index] = thread }
            return { _ in
                served.update { $0.append((index, pthread_equal(pthread_self(), thread) != 0)) }
                usleep(300_000)
                return FastCGIResponse(headers: [("X-Worker", "\(index)")], body: Array("w\(index)".utf8))
            }
        }
        let path = server.socketPath
        let results = Shared<[String]>([])
        let finished = DispatchSemaphore(value: 0)
        let start = Date()
        for _ in 0..<8 {
            Thread.detachNewThread {
                let reply = try? FastCGITestClient.send(to: path, params: [("REQUEST_URI", "/slow")])
                let worker = (try? reply?.parsed().header("X-Worker")) ?? nil
                results.update { $0.append(worker ?? "failed") }
                finished.signal()
            }
        }
        for _ in 0..<8 { XCTAssertEqual(finished.wait(timeout: .now() + 10), .success) }
        let elapsed = Date().timeIntervalSince(start)

        XCTAssertEqual(results.value.count, 8)
        XCTAssertFalse(results.value.contains("failed"))
        XCTAssertEqual(Set(results.value), ["0", "1", "2", "3"], "every worker should have served a request")
        XCTAssertLessThan(elapsed, 1.5, "8 requests of 0.3 s on 4 workers take about 0.6 s, not 2.4 s")
        XCTAssertEqual(made.value.count, 4, "makeHandler runs once per worker")
        XCTAssertEqual(Set(made.value.values.map { UInt($0) }).count, 4, "each worker has its own thread")
        XCTAssertTrue(served.value.allSatisfy(\.onMakerThread), "a handler only runs on the thread that made it")
    }

    func testKeptConnectionServesSeveralRequestsIncludingBodies() throws {
        let seen = Shared<[FastCGIRequest]>([])
        let server = try startEchoServer(workers: 1, seen: seen)
        let client = try FastCGITestClient.connect(to: server.socketPath)
        defer { client.close() }

        for (index, body) in [[], Array("first body".utf8), [UInt8](repeating: 1, count: 100_000), []].enumerated() {
            let requestID = UInt16(index + 1)
            let bytes = FastCGITestClient.encodeRequest(
                requestID: requestID,
                params: [("REQUEST_URI", Array("/keep/\(index)".utf8)), ("CONTENT_LENGTH", Array("\(body.count)".utf8))],
                body: body, keepConnection: true)
            if index == 2 {
                // The empty end-of-stdin record arrives separately, after the body has been read.
                try client.write(Array(bytes.dropLast(8)))
                usleep(50_000)
                try client.write(Array(bytes.suffix(8)))
            } else {
                try client.write(bytes)
            }
            let reply = try client.readReply(requestID: requestID)
            XCTAssertEqual(try reply.parsed().body, body, "request \(index)")
        }
        XCTAssertEqual(seen.value.map(\.uri), ["/keep/0", "/keep/1", "/keep/2", "/keep/3"])
    }

    func testClientThatDisconnectsEarlyDoesNotDisturbTheServer() throws {
        let big = [UInt8](repeating: 0x41, count: 4 << 20)
        let server = try startServer(workers: 1) { _ in
            { request in FastCGIResponse(body: request.path == "/big" ? big : Array("small".utf8)) }
        }
        for _ in 0..<3 {
            // Ask for 4 MiB and hang up without reading: the worker's writes fail with EPIPE/ECONNRESET.
            let client = try FastCGITestClient.connect(to: server.socketPath)
            try client.write(FastCGITestClient.encodeRequest(params: [("REQUEST_URI", Array("/big".utf8))], body: []))
            client.close()

            // A client that dies half-way through its body: the request is dropped, not handled.
            let partial = try FastCGITestClient.connect(to: server.socketPath)
            var bytes = FastCGITestClient.encodeRequest(
                params: [("REQUEST_URI", Array("/partial".utf8)), ("CONTENT_LENGTH", Array("1000".utf8))],
                body: [UInt8](repeating: 1, count: 1000))
            bytes.removeLast(600)
            try partial.write(bytes)
            partial.close()
        }
        let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/after")])
        XCTAssertEqual(try reply.parsed().body, Array("small".utf8))
    }

    /// Issue 19, item 8: `readTimeoutSeconds` bounds each read alone, so a peer that sends a byte
    /// just before each one used to hold its worker for as long as it kept sending. The total
    /// deadline closes it; the worker then serves others.
    func testATrickledRequestIsDroppedAtItsTotalReadDeadline() throws {
        let server = try startServer(workers: 1, readTimeoutSeconds: 0.6, readDeadlineSeconds: 1.5) { _ in
            { _ in FastCGIResponse(body: Array("ok".utf8)) }
        }
        for phase in ["params", "body"] {
            let bytes = FastCGITestClient.encodeRequest(
                params: [("REQUEST_URI", Array("/slow".utf8)), ("CONTENT_LENGTH", Array("64".utf8))],
                body: [UInt8](repeating: 7, count: 64))
            let client = try FastCGITestClient.connect(to: server.socketPath)
            defer { client.close() }
            // "body": params at once, then the body a byte at a time.
            let start = phase == "body" ? bytes.count - 64 - 16 : 0
            if start > 0 { try client.write(Array(bytes[..<start])) }
            let t0 = Date()
            var closedAfter: TimeInterval?
            for byte in bytes[start...] {
                usleep(200_000)  // well inside the 0.6 s per-read timeout
                do { try client.write([byte]) } catch {
                    closedAfter = Date().timeIntervalSince(t0)
                    break
                }
                if Date().timeIntervalSince(t0) > 6 { break }
            }
            let after = try XCTUnwrap(closedAfter, "\(phase): the trickling connection was never closed")
            XCTAssertGreaterThan(after, 1.2, phase)
            XCTAssertLessThan(after, 3.0, phase)
            // The single worker is free again.
            let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/after")])
            XCTAssertEqual(try reply.parsed().body, Array("ok".utf8), phase)
        }
    }

    /// The worker closes a kept connection itself once the peer has closed it with nothing left
    /// to read (nginx after every response), freeing the worker at once; a request the peer sent
    /// right before shutting down its side is still served first.
    func testAKeptConnectionsPeerCloseFreesTheWorkerButALastRequestIsServed() throws {
        let server = try startServer(workers: 1, readDeadlineSeconds: 5) { _ in
            { request in FastCGIResponse(body: Array(request.path.utf8)) }
        }
        let client = try FastCGITestClient.connect(to: server.socketPath)
        defer { client.close() }
        try client.write(FastCGITestClient.encodeRequest(
            requestID: 1, params: [("REQUEST_URI", Array("/first".utf8))], body: [], keepConnection: true))
        XCTAssertEqual(try client.readReply(requestID: 1).parsed().body, Array("/first".utf8))
        try client.write(FastCGITestClient.encodeRequest(
            requestID: 2, params: [("REQUEST_URI", Array("/last".utf8))], body: [], keepConnection: true))
        _ = shutdown(client.fd, Int32(SHUT_WR))
        XCTAssertEqual(try client.readReply(requestID: 2).parsed().body, Array("/last".utf8))
        XCTAssertTrue(client.serverClosedConnection())

        let closing = try FastCGITestClient.connect(to: server.socketPath)
        try closing.write(FastCGITestClient.encodeRequest(
            params: [("REQUEST_URI", Array("/kept".utf8))], body: [], keepConnection: true))
        _ = try closing.readReply()
        closing.close()
        let t0 = Date()
        let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/next")])
        XCTAssertEqual(try reply.parsed().body, Array("/next".utf8))
        XCTAssertLessThan(Date().timeIntervalSince(t0), 1, "the single worker waited on a closed connection")
    }

    /// Workers bound to their connections (`dispatchesConnections` off): a kept connection that
    /// sends nothing after its response is closed after the deadline instead of parking the worker
    /// for ever; meanwhile it does park it (the stall that the dispatcher removes, below).
    func testAnIdleKeptConnectionIsClosedAfterTheDeadline() throws {
        let server = try startServer(workers: 1, readDeadlineSeconds: 1, dispatches: false) { _ in
            { _ in FastCGIResponse(body: Array("ok".utf8)) }
        }
        let client = try FastCGITestClient.connect(to: server.socketPath)
        defer { client.close() }
        try client.write(FastCGITestClient.encodeRequest(
            params: [("REQUEST_URI", Array("/kept".utf8))], body: [], keepConnection: true))
        _ = try client.readReply()
        let t0 = Date()
        let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/other")])
        XCTAssertEqual(try reply.parsed().body, Array("ok".utf8))
        XCTAssertGreaterThan(Date().timeIntervalSince(t0), 0.8, "the kept connection was closed too early")
        XCTAssertLessThan(Date().timeIntervalSince(t0), 3)
        XCTAssertTrue(client.serverClosedConnection())
    }

    // MARK: kept connections without bound threads (issue 39, item 1)

    /// Opens `count` kept connections and serves one request on each; returns them, idle.
    private func keptConnections(_ count: Int, to server: TestServer) throws -> [FastCGITestClient] {
        var kept: [FastCGITestClient] = []
        for index in 0..<count {
            let client = try FastCGITestClient.connect(to: server.socketPath)
            kept.append(client)
            try client.write(FastCGITestClient.encodeRequest(
                params: [("REQUEST_URI", Array("/open/\(index)".utf8))], body: [], keepConnection: true))
            XCTAssertEqual(try client.readReply().parsed().body, Array("/open/\(index)".utf8))
        }
        return kept
    }

    /// Eight idle kept connections on two workers: each connection's next request, and a new
    /// connection's, is answered at once. Bound to their connections, the same workers left the
    /// later ones waiting until an idle connection's deadline (the test below).
    func testIdleKeptConnectionsHoldNoWorker() throws {
        let server = try startServer(workers: 2, readDeadlineSeconds: 3) { _ in
            { request in FastCGIResponse(body: Array(request.path.utf8)) }
        }
        let kept = try keptConnections(8, to: server)
        defer { kept.forEach { $0.close() } }
        for round in 0..<2 {
            for (index, client) in kept.enumerated().reversed() {
                let t0 = Date()
                try client.write(FastCGITestClient.encodeRequest(
                    requestID: 7, params: [("REQUEST_URI", Array("/again/\(round)/\(index)".utf8))], body: [],
                    keepConnection: true))
                XCTAssertEqual(try client.readReply(requestID: 7).parsed().body, Array("/again/\(round)/\(index)".utf8))
                XCTAssertLessThan(Date().timeIntervalSince(t0), 0.5, "kept connection \(index) waited for a worker")
            }
            let t0 = Date()
            let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/new")])
            XCTAssertEqual(try reply.parsed().body, Array("/new".utf8))
            XCTAssertLessThan(Date().timeIntervalSince(t0), 0.5, "a new connection waited for a worker")
        }
        XCTAssertFalse(kept.contains { $0.serverClosedConnection(timeoutMilliseconds: 50) }, "a kept connection was closed")
    }

    /// The same load on workers bound to their connections stalls: the proof the test above can fail.
    func testBoundWorkersStallBehindIdleKeptConnections() throws {
        let server = try startServer(workers: 2, readDeadlineSeconds: 2, dispatches: false) { _ in
            { request in FastCGIResponse(body: Array(request.path.utf8)) }
        }
        let kept = try keptConnections(2, to: server)
        defer { kept.forEach { $0.close() } }
        let t0 = Date()
        let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/new")])
        XCTAssertEqual(try reply.parsed().body, Array("/new".utf8))
        XCTAssertGreaterThan(Date().timeIntervalSince(t0), 1.5, "two idle kept connections hold both workers")
    }

    /// An idle kept connection is closed after `keptIdleSeconds`; one whose next request stops
    /// half-way through its header is closed at the read deadline, and never takes a worker.
    func testDispatchedKeptConnectionsHaveTheirDeadlines() throws {
        let server = try startServer(workers: 1, readDeadlineSeconds: 1, keptIdleSeconds: 1.5) { _ in
            { request in FastCGIResponse(body: Array(request.path.utf8)) }
        }
        let kept = try keptConnections(2, to: server)
        defer { kept.forEach { $0.close() } }
        let t0 = Date()
        let partial = FastCGITestClient.encodeRequest(params: [("REQUEST_URI", Array("/cut".utf8))], body: [], keepConnection: true)
        try kept[1].write(Array(partial.prefix(20)))  // BEGIN_REQUEST and part of the params
        usleep(100_000)
        let reply = try FastCGITestClient.send(to: server.socketPath, params: [("REQUEST_URI", "/other")])
        XCTAssertEqual(try reply.parsed().body, Array("/other".utf8), "the half-sent header holds no worker")
        XCTAssertLessThan(Date().timeIntervalSince(t0), 0.5)
        XCTAssertTrue(kept[1].serverClosedConnection(timeoutMilliseconds: 3000))
        let cut = Date().timeIntervalSince(t0)
        XCTAssertGreaterThan(cut, 0.8, "closed before the read deadline")
        XCTAssertLessThan(cut, 1.6)
        XCTAssertTrue(kept[0].serverClosedConnection(timeoutMilliseconds: 3000))
        let idle = Date().timeIntervalSince(t0)
        XCTAssertGreaterThan(idle, 1.3, "closed before keptIdleSeconds")
        XCTAssertLessThan(idle, 2.5)
    }

    func testHeaderCompletenessOfPeekedBytes() {
        let full = FastCGITestClient.encodeRequest(params: [("REQUEST_URI", Array("/x".utf8))], body: Array("abc".utf8))
        let headerEnd = full.count - (8 + 8) - 8  // the body's record (padded to 8) and stdin's end follow
        func judge(_ bytes: [UInt8], full: Bool = false) -> ConnectionDispatcher.Header {
            bytes.withUnsafeBytes { ConnectionDispatcher.header(in: $0, full: full) }
        }
        XCTAssertEqual(judge(full), .complete)
        XCTAssertEqual(judge(Array(full.prefix(headerEnd))), .complete)
        XCTAssertEqual(judge(Array(full.prefix(headerEnd - 1))), .incomplete)
        XCTAssertEqual(judge(Array(full.prefix(16))), .incomplete)
        XCTAssertEqual(judge(Array(full.prefix(5))), .incomplete)
        XCTAssertEqual(judge(Array(full.prefix(16)), full: true), .complete, "a header too long to peek goes to libfcgi")
        XCTAssertEqual(judge(Array("GET / HTTP/1.1\r\n".utf8)), .complete, "not FastCGI: libfcgi refuses it")
    }
}
