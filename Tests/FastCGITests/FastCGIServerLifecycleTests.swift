#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import FastCGI
import Foundation
import XCTest

/// Startup checks on the socket path, and graceful shutdown.
final class FastCGIServerLifecycleTests: XCTestCase {
    private func fileExists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    func testInFlightRequestCompletesAfterShutdownAndRunReturnsPromptly() throws {
        let entered = DispatchSemaphore(value: 0)
        let server = TestServer(workers: 2, graceSeconds: 10)
        defer { server.removeDirectory() }
        try server.start { _ in
            { request in
                if request.path == "/slow" {
                    entered.signal()
                    usleep(1_000_000)
                }
                return FastCGIResponse(body: Array("done \(request.path)".utf8))
            }
        }

        let reply = Shared<Result<[UInt8], FastCGITestClient.Failure>?>(nil)
        let clientDone = DispatchSemaphore(value: 0)
        let path = server.socketPath
        Thread.detachNewThread {
            do {
                let response = try FastCGITestClient.send(to: path, params: [("REQUEST_URI", "/slow")]).parsed()
                reply.update { $0 = .success(response.body) }
            } catch {
                reply.update { $0 = .failure(.init(description: "\(error)")) }
            }
            clientDone.signal()
        }
        XCTAssertEqual(entered.wait(timeout: .now() + 5), .success, "slow request never reached the handler")

        let start = Date()
        server.server.requestShutdown()
        usleep(100_000)
        XCTAssertThrowsError(try FastCGITestClient.connect(to: path), "new connections are refused while draining")
        XCTAssertTrue(server.waitForRunToReturn(timeout: 5), "run() did not return")
        let stopTime = Date().timeIntervalSince(start)

        XCTAssertEqual(clientDone.wait(timeout: .now() + 5), .success)
        XCTAssertEqual(try reply.value?.get(), Array("done /slow".utf8))
        XCTAssertGreaterThan(stopTime, 0.7, "run() must wait for the in-flight request")
        XCTAssertLessThan(stopTime, 2.5, "run() must return soon after the last request")
        XCTAssertNil(server.runError)
        XCTAssertFalse(fileExists(path), "socket file is removed")
    }

    func testShutdownDuringAKeptRequestClosesWithoutLingering() throws {
        // Shutdown arrives while a kept connection's request is being answered, so the worker
        // decides about the connection while stopping: it must close it at once, not through
        // libfcgi's close, which lingers up to 2 s for an EOF a kept connection never sends.
        let server = TestServer(workers: 2, graceSeconds: 10)
        defer { server.removeDirectory() }
        try server.start { _ in { [server] _ in
            server.server.requestShutdown()
            return FastCGIResponse(body: Array("ok".utf8))
        } }
        let kept = try FastCGITestClient.connect(to: server.socketPath)
        defer { kept.close() }
        let start = Date()
        try kept.write(FastCGITestClient.encodeRequest(params: [("REQUEST_URI", Array("/".utf8))], body: [], keepConnection: true))
        XCTAssertEqual(try kept.readReply().parsed().body, Array("ok".utf8))
        XCTAssertTrue(server.waitForRunToReturn(timeout: 5), "run() did not return")
        XCTAssertLessThan(Date().timeIntervalSince(start), 1.0)
        XCTAssertTrue(kept.serverClosedConnection(), "the kept connection is closed on shutdown")
    }

    func testIdleServerStopsImmediatelyEvenWithAKeptConnectionOpen() throws {
        let server = TestServer(workers: 4, graceSeconds: 10)
        defer { server.removeDirectory() }
        try server.start { _ in { _ in FastCGIResponse(body: Array("ok".utf8)) } }

        // An nginx-style kept connection, idle after one request: its worker waits on it, not in accept.
        let kept = try FastCGITestClient.connect(to: server.socketPath)
        defer { kept.close() }
        try kept.write(FastCGITestClient.encodeRequest(params: [("REQUEST_URI", Array("/".utf8))], body: [], keepConnection: true))
        XCTAssertEqual(try kept.readReply().parsed().body, Array("ok".utf8))

        let elapsed = try XCTUnwrap(server.stop(timeout: 5), "run() did not return")
        XCTAssertLessThan(elapsed, 1.0)
        XCTAssertTrue(kept.serverClosedConnection(), "the idle kept connection is closed on shutdown")
        XCTAssertFalse(fileExists(server.socketPath))
    }

    func testGracePeriodBoundsShutdownButTheRequestStillCompletes() throws {
        let entered = DispatchSemaphore(value: 0)
        let server = TestServer(workers: 1, graceSeconds: 0.2)
        defer { server.removeDirectory() }
        try server.start { _ in
            { _ in
                entered.signal()
                usleep(1_500_000)
                return FastCGIResponse(body: Array("late".utf8))
            }
        }
        let client = try FastCGITestClient.connect(to: server.socketPath)
        defer { client.close() }
        try client.write(FastCGITestClient.encodeRequest(params: [("REQUEST_URI", Array("/".utf8))], body: []))
        XCTAssertEqual(entered.wait(timeout: .now() + 5), .success)

        let elapsed = try XCTUnwrap(server.stop(timeout: 5))
        XCTAssertLessThan(elapsed, 1.0, "run() returns after the grace period, not after the request")
        XCTAssertFalse(fileExists(server.socketPath))
        XCTAssertEqual(try client.readReply().parsed().body, Array("late".utf8), "the straggler still answers")
    }

    func testShutdownRequestedBeforeRunMakesRunReturnRightAway() throws {
        let server = TestServer(workers: 2)
        defer { server.removeDirectory() }
        server.server.requestShutdown()
        let start = Date()
        XCTAssertNil(server.runExpectingFailure())
        XCTAssertLessThan(Date().timeIntervalSince(start), 1.0)
        XCTAssertFalse(fileExists(server.socketPath))
        XCTAssertEqual(server.runExpectingFailure() as? FastCGIServerError, .alreadyStarted)
    }

    func testRefusesASocketServedByALiveProcess() throws {
        let first = TestServer(workers: 1)
        defer { first.removeDirectory() }
        try first.start { _ in { _ in FastCGIResponse(body: Array("first".utf8)) } }
        defer { XCTAssertNotNil(first.stop()) }

        let second = TestServer(workers: 1, directory: first.directory)
        XCTAssertEqual(
            second.runExpectingFailure() as? FastCGIServerError, .socketInUse(path: first.socketPath))
        let reply = try FastCGITestClient.send(to: first.socketPath, params: [("REQUEST_URI", "/")])
        XCTAssertEqual(try reply.parsed().body, Array("first".utf8), "the running server keeps its socket")
    }

    func testReplacesAStaleSocketButNeverAnotherKindOfFile() throws {
        let directory = TestServer.makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/fcgi.sock"

        // A socket file left behind by a crashed process: bound, nobody listening.
        let stale = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(stale, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        close(stale)

        let server = TestServer(workers: 1, directory: directory)
        try server.start { _ in { _ in FastCGIResponse(body: Array("fresh".utf8)) } }
        XCTAssertEqual(try FastCGITestClient.send(to: path, params: [("REQUEST_URI", "/")]).parsed().body, Array("fresh".utf8))
        XCTAssertNotNil(server.stop())

        // A regular file at the path is left alone.
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data("keep me".utf8)))
        let refused = TestServer(workers: 1, directory: directory)
        XCTAssertEqual(refused.runExpectingFailure() as? FastCGIServerError, .socketPathOccupied(path: path))
        XCTAssertEqual(FileManager.default.contents(atPath: path), Data("keep me".utf8))
    }

    func testSocketModeIsApplied() throws {
        let server = TestServer(workers: 1, socketMode: 0o660)
        defer { server.removeDirectory() }
        try server.start { _ in { _ in FastCGIResponse() } }
        var status = stat()
        XCTAssertEqual(lstat(server.socketPath, &status), 0)
        XCTAssertEqual(status.st_mode & 0o7777, 0o660)
        XCTAssertEqual(status.st_mode & S_IFMT, S_IFSOCK)
        XCTAssertNotNil(server.stop())
    }

    func testInvalidConfigurationIsRejectedBeforeAnythingHappens() {
        let long = TestServer(workers: 1, directory: "/tmp/" + String(repeating: "d", count: 120))
        guard case .invalidConfiguration(let message)? = long.runExpectingFailure() as? FastCGIServerError else {
            return XCTFail("expected invalidConfiguration")
        }
        XCTAssertTrue(message.contains("socketPath"), message)

        let noWorkers = TestServer(workers: 0)
        defer { noWorkers.removeDirectory() }
        guard case .invalidConfiguration(let workersMessage)? = noWorkers.runExpectingFailure() as? FastCGIServerError
        else { return XCTFail("expected invalidConfiguration") }
        XCTAssertTrue(workersMessage.contains("workerCount"), workersMessage)
    }
}

/// Round 3, item 10: readiness for systemd's Type=notify (sd_notify's datagram protocol).
final class SystemdNotifyTests: XCTestCase {
    func testReadyIsOneDatagramToTheNotifySocket() throws {
        let path = "/tmp/todosync-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd); unlink(path) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in path.utf8.enumerated() { raw[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertTrue(SystemdNotify.send("READY=1", environment: path))
        var buffer = [UInt8](repeating: 0, count: 64)
        let received = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        XCTAssertEqual(String(decoding: buffer.prefix(max(received, 0)), as: UTF8.self), "READY=1")
    }

    func testWithoutANotifySocketNothingIsSent() {
        XCTAssertFalse(SystemdNotify.send("READY=1", environment: nil))
        XCTAssertFalse(SystemdNotify.send("READY=1", environment: ""))
    }
}
