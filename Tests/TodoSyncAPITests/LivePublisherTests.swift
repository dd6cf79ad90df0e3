#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Foundation
import Logging
@testable import TodoSyncAPI
import XCTest

/// The live-sync publisher against real Unix sockets (issue 22): what it sends, and that a
/// publisher that is missing, silent or refusing costs a bounded time and only a `false`.
final class LivePublisherTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "live-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func publisher(_ path: String, timeoutMilliseconds: Int = 100) -> LivePublisher {
        LivePublisher(socketPath: path, timeoutMilliseconds: timeoutMilliseconds, logger: Logger(label: "test"))
    }

    /// A listener at `path` that reads one request and answers `answer` (nil: never answers).
    /// Returns the request it read, once `publish` has run.
    private func listen(at path: String, answer: String?) throws -> () -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(Glibc.listen(fd, 4), 0)
        let received = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var request = ""
        Thread.detachNewThread {
            let client = accept(fd, nil, nil)
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(client, &buffer, buffer.count, 0)
            request = String(decoding: buffer[0..<max(n, 0)], as: UTF8.self)
            if let answer { _ = answer.withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) } }
            received.signal()
            if answer == nil { usleep(500_000) }
            close(client)
            close(fd)
        }
        return {
            received.wait()
            return request
        }
    }

    func testPostsThePokeAndTakesNchansAnswer() throws {
        let path = directory + "/pub.sock"
        let request = try listen(at: path, answer: "HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        XCTAssertTrue(publisher(path).publish(userID: 42, version: 17, deviceID: "phone \"1\""))
        let text = request()
        XCTAssertTrue(text.hasPrefix("POST /__live/publish/42 HTTP/1.0\r\n"), text)
        XCTAssertTrue(text.hasSuffix("\r\n\r\n{\"version\":17,\"deviceId\":\"phone \\\"1\\\"\"}"), text)
    }

    func testARestWritesPokeNamesNoDevice() throws {
        let path = directory + "/pub.sock"
        let request = try listen(at: path, answer: "HTTP/1.1 202 Accepted\r\n\r\n")
        XCTAssertTrue(publisher(path).publish(userID: 7, version: 3, deviceID: nil))
        XCTAssertTrue(request().hasSuffix("{\"version\":3,\"deviceId\":null}"))
    }

    func testAMissingPublisherFailsAtOnce() {
        let start = DispatchTime.now().uptimeNanoseconds
        XCTAssertFalse(publisher(directory + "/nobody.sock").publish(userID: 1, version: 1, deviceID: nil))
        XCTAssertLessThan(DispatchTime.now().uptimeNanoseconds - start, 50_000_000)
    }

    func testASilentPublisherCostsAtMostTheTimeout() throws {
        let path = directory + "/pub.sock"
        let request = try listen(at: path, answer: nil)
        let start = DispatchTime.now().uptimeNanoseconds
        XCTAssertFalse(publisher(path, timeoutMilliseconds: 100).publish(userID: 1, version: 1, deviceID: nil))
        let elapsed = DispatchTime.now().uptimeNanoseconds - start
        XCTAssertGreaterThanOrEqual(elapsed, 90_000_000)
        XCTAssertLessThan(elapsed, 400_000_000)
        _ = request()
    }

    func testAnErrorAnswerIsAFailure() throws {
        let path = directory + "/pub.sock"
        let request = try listen(at: path, answer: "HTTP/1.1 403 Forbidden\r\n\r\n")
        XCTAssertFalse(publisher(path).publish(userID: 1, version: 1, deviceID: nil))
        _ = request()
    }
}
