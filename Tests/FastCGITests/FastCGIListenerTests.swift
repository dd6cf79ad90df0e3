#if canImport(Glibc)
import Glibc
#endif
import FastCGI
import Foundation
import XCTest

/// TCP listeners, inherited listening sockets (spawn-fcgi's descriptor 0, systemd's 3) and the
/// peer allow-list, driven over real sockets by ``FastCGITestClient``.
final class FastCGIListenerTests: XCTestCase {
    private static let params = [("REQUEST_METHOD", "GET"), ("REQUEST_URI", "/who"), ("SCRIPT_NAME", "/who")]

    private func answeringServer(_ address: FastCGIListenAddress, allowedPeers: PeerAllowList = .everyone) throws -> TestServer {
        let server = TestServer(workers: 3, listenAddress: address, allowedPeers: allowedPeers)
        try server.start { worker in
            { request in FastCGIResponse(status: 200, body: Array("worker \(worker) \(request.uri)".utf8)) }
        }
        return server
    }

    /// A listening TCP socket on 127.0.0.1 with a kernel-chosen port, as a parent process would pass it.
    private func makeListeningSocket() throws -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 64) == 0 else { throw FastCGITestClient.Failure(description: "bind/listen: errno \(errno)") }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    /// A free TCP port on 127.0.0.1 (bound, read and released).
    private func freePort() throws -> UInt16 {
        let (fd, port) = try makeListeningSocket()
        close(fd)
        return port
    }

    func testServesRequestsOverTCPAndStopsPromptly() throws {
        let port = try freePort()
        let server = try answeringServer(.tcp(host: "127.0.0.1", port: port))
        defer { server.removeDirectory() }
        for _ in 0..<5 {
            let reply = try FastCGITestClient.send(host: "127.0.0.1", port: port, params: Self.params).parsed()
            XCTAssertEqual(reply.statusLine, "Status: 200 OK")
            XCTAssertTrue(String(decoding: reply.body, as: UTF8.self).hasSuffix(" /who"))
        }
        // Three workers sit blocked in accept on a TCP socket, which is never shut down: the
        // server must wake them itself, well within the 5 s grace period.
        let elapsed = try XCTUnwrap(server.stop(timeout: 10), "run() did not return")
        XCTAssertLessThan(elapsed, 2.0)
        XCTAssertThrowsError(try FastCGITestClient.connect(host: "127.0.0.1", port: port), "the TCP socket must be closed")
    }

    func testTwoServersCannotShareATCPAddress() throws {
        let port = try freePort()
        let first = try answeringServer(.tcp(host: "127.0.0.1", port: port))
        defer {
            XCTAssertNotNil(first.stop())
            first.removeDirectory()
        }
        let second = TestServer(listenAddress: .tcp(host: "127.0.0.1", port: port))
        defer { second.removeDirectory() }
        XCTAssertEqual(second.runExpectingFailure() as? FastCGIServerError, .socketInUse(path: "127.0.0.1:\(port)"))
    }

    /// What systemd socket activation and spawn-fcgi do: the parent owns the listening socket and
    /// starts the responder on it, possibly many times. The server must serve it, and after a
    /// graceful stop leave it open and listening for the next instance.
    func testServesAnInheritedSocketAndLeavesItListeningForTheNextInstance() throws {
        let (fd, port) = try makeListeningSocket()
        defer { close(fd) }
        for round in 0..<2 {
            let server = try answeringServer(.inherited(fd: fd))
            defer { server.removeDirectory() }
            let reply = try FastCGITestClient.send(host: "127.0.0.1", port: port, params: Self.params).parsed()
            XCTAssertEqual(reply.statusLine, "Status: 200 OK", "round \(round)")
            let elapsed = try XCTUnwrap(server.stop(timeout: 10), "run() did not return in round \(round)")
            XCTAssertLessThan(elapsed, 2.0)
            var accepting: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            XCTAssertEqual(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length), 0, "descriptor closed")
            XCTAssertEqual(accepting, 1, "the inherited socket must still be listening")
        }
        // A request queued while no instance runs is served by the next one.
        let client = try FastCGITestClient.connect(host: "127.0.0.1", port: port)
        defer { client.close() }
        try client.write(FastCGITestClient.encodeRequest(params: Self.params.map { ($0.0, Array($0.1.utf8)) }, body: []))
        let server = try answeringServer(.inherited(fd: fd))
        defer {
            XCTAssertNotNil(server.stop())
            server.removeDirectory()
        }
        XCTAssertEqual(try client.readReply().parsed().statusLine, "Status: 200 OK")
    }

    func testRefusesADescriptorThatIsNotAListeningSocket() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = open(directory + "/plain", O_CREAT | O_RDWR, 0o600)
        defer { close(file) }
        let server = TestServer(listenAddress: .inherited(fd: file))
        defer { server.removeDirectory() }
        XCTAssertEqual(
            server.runExpectingFailure() as? FastCGIServerError,
            .invalidConfiguration("descriptor \(file) is not a listening socket"))
    }

    func testPeersOutsideTheAllowListAreClosedUnanswered() throws {
        let port = try freePort()
        let server = try answeringServer(
            .tcp(host: "127.0.0.1", port: port), allowedPeers: try XCTUnwrap(PeerAllowList(["10.213.0.2", "fd00::/8"])))
        defer {
            XCTAssertNotNil(server.stop())
            server.removeDirectory()
        }
        let client = try FastCGITestClient.connect(host: "127.0.0.1", port: port)
        defer { client.close() }
        try client.write(FastCGITestClient.encodeRequest(params: Self.params.map { ($0.0, Array($0.1.utf8)) }, body: []))
        // Closed (EOF, or a reset if unread input was left), never answered.
        XCTAssertThrowsError(try client.readReply(), "a refused peer must get no answer")
    }

    func testPeersInsideTheAllowListAreServed() throws {
        let port = try freePort()
        let server = try answeringServer(
            .tcp(host: "127.0.0.1", port: port), allowedPeers: try XCTUnwrap(PeerAllowList(list: "10.213.0.2, 127.0.0.0/8")))
        defer {
            XCTAssertNotNil(server.stop())
            server.removeDirectory()
        }
        // Several requests on one kept connection: the check is per connection, not per request.
        let client = try FastCGITestClient.connect(host: "127.0.0.1", port: port)
        defer { client.close() }
        for id: UInt16 in 1...3 {
            try client.write(FastCGITestClient.encodeRequest(
                requestID: id, params: Self.params.map { ($0.0, Array($0.1.utf8)) }, body: [], keepConnection: true))
            XCTAssertEqual(try client.readReply(requestID: id).parsed().statusLine, "Status: 200 OK")
        }
    }

    /// nginx keeps FastCGI connections open (fastcgi_keep_conn). When such a connection ends,
    /// libfcgi accepts the next one inside the same FCGX_Accept_r call: a refused peer must not
    /// slip in that way.
    func testARefusedPeerCannotFollowAnAllowedKeptConnection() throws {
        let port = try freePort()
        let server = TestServer(workers: 1, listenAddress: .tcp(host: "0.0.0.0", port: port),
                                allowedPeers: try XCTUnwrap(PeerAllowList(["127.0.0.2"])))
        try server.start { _ in { _ in FastCGIResponse(status: 200, body: Array("ok".utf8)) } }
        defer {
            XCTAssertNotNil(server.stop())
            server.removeDirectory()
        }
        let params = Self.params.map { ($0.0, Array($0.1.utf8)) }
        let allowed = try FastCGITestClient.connect(host: "127.0.0.1", port: port, from: "127.0.0.2")
        try allowed.write(FastCGITestClient.encodeRequest(params: params, body: [], keepConnection: true))
        XCTAssertEqual(try allowed.readReply().parsed().statusLine, "Status: 200 OK")
        allowed.close()  // the one worker now waits on the kept connection, which ends

        let refused = try FastCGITestClient.connect(host: "127.0.0.1", port: port, from: "127.0.0.1")
        defer { refused.close() }
        try refused.write(FastCGITestClient.encodeRequest(params: params, body: []))
        XCTAssertThrowsError(try refused.readReply(), "127.0.0.1 is not on the allow-list but was served")
    }

    func testAllowListAndAddressParsing() throws {
        XCTAssertNil(PeerAllowList(["10.0.0.0/33"]))
        XCTAssertNil(PeerAllowList(["nginx.internal"]))
        XCTAssertNil(PeerAllowList(list: "10.0.0.1,,x"))
        XCTAssertEqual(PeerAllowList(list: "")?.allowsEveryone, true)
        XCTAssertEqual(PeerAllowList(list: "10.213.0.0/24, ::1")?.entries, ["10.213.0.0/24", "::1"])

        XCTAssertEqual(FastCGIListenAddress.parseTCP("10.213.0.21:9000"), .tcp(host: "10.213.0.21", port: 9000))
        XCTAssertEqual(FastCGIListenAddress.parseTCP("[::1]:9000"), .tcp(host: "::1", port: 9000))
        XCTAssertNil(FastCGIListenAddress.parseTCP("10.213.0.21"))
        XCTAssertNil(FastCGIListenAddress.parseTCP("10.213.0.21:0"))
        XCTAssertNil(FastCGIListenAddress.parseTCP("localhost:9000"))
        XCTAssertNil(FastCGIListenAddress.parseTCP("::1:9000"))
    }

    func testSystemdActivationIsOnlyTakenForThisProcess() {
        setenv("LISTEN_FDS", "1", 1)
        setenv("LISTEN_PID", "\(getpid() + 1)", 1)
        XCTAssertNil(FastCGIListenAddress.systemdSocket(), "LISTEN_PID names another process")
        setenv("LISTEN_PID", "\(getpid())", 1)
        XCTAssertEqual(FastCGIListenAddress.systemdSocket(), .inherited(fd: 3))
        XCTAssertNil(getenv("LISTEN_FDS"), "the variables must not leak to child processes")
        XCTAssertNil(getenv("LISTEN_PID"))
    }
}
