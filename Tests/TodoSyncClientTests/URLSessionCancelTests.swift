import Dispatch
import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// FoundationNetworking's cancel deadlock (`URLSessionCancel`): requests cancelled just as they
/// complete. Each request goes to a loopback port where nothing listens, so URLSession's work
/// queue fails it within a millisecond, and the cancels land on those completions: through a
/// task group's `cancelAll` (as `async let` and `SyncEngine.stop()` cancel) and through
/// `APIClient`'s race of a request against its timer (`Race.finish` cancels the loser). Before
/// `URLSessionCall` these runs hung for good (and with the cancel moved off the handler, the
/// process stopped: "…a task that in not in the registry"); a hang fails the test after a minute.
final class URLSessionCancelTests: XCTestCase {
    /// A loopback port nothing listens on (bound, then closed).
    func closedPort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EBADF) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw POSIXError(.EADDRNOTAVAIL) }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Runs `body` off the test's thread; fails when it has not finished within `seconds`
    /// (a deadlock: the threads stay stuck, the test goes on).
    func finishes(within seconds: Double, _ what: String, _ body: @escaping @Sendable () async -> Void) {
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await body()
            done.signal()
        }
        XCTAssertEqual(done.wait(timeout: .now() + seconds), .success, "\(what): hung (a cancel met the request's completion)")
    }

    /// 40 rounds of 50 requests at once to a closed port; with `cancelling`, each round's group is
    /// cancelled within 0.4 ms, as the requests fail. Returns how many requests ended.
    func rounds(_ what: String, cancelling: Bool,
                _ request: @escaping @Sendable (URLRequest, URLSessionTransport) async -> Void) throws -> Int {
        let url = URL(string: "http://127.0.0.1:\(try closedPort())/api/v1/sync/pull")!
        let transport = URLSessionTransport()
        let ended = Counter()
        finishes(within: 60, what) {
            for _ in 0..<40 {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<50 {
                        group.addTask {
                            await request(URLRequest(url: url), transport)
                            ended.add()
                        }
                    }
                    guard cancelling else { return }
                    try? await Task.sleep(nanoseconds: UInt64.random(in: 0...400_000))
                    group.cancelAll()
                }
            }
        }
        return ended.value
    }

    func testCancellingRequestsAsTheyCompleteNeverHangs() throws {
        let ended = try rounds("task groups cancelled as their requests fail", cancelling: true) { request, transport in
            _ = try? await transport.send(request)
        }
        XCTAssertEqual(ended, 40 * 50, "every request ended (failed or cancelled)")
    }

    func testARequestLosingToItsTimerAsItCompletesNeverHangs() throws {
        let ended = try rounds("requests raced against timers of about their own length", cancelling: false) { request, transport in
            // Timed out or refused: either is an answer.
            _ = try? await APIClient.send(request, over: transport, within: Double.random(in: 0...0.002))
        }
        XCTAssertEqual(ended, 40 * 50)
    }

    /// A cancel before the task exists cancels it as it starts, and the caller hears
    /// `CancellationError`, not a network error.
    func testACancelBeforeTheRequestStartsEndsItAsCancelled() throws {
        let url = URL(string: "http://127.0.0.1:\(try closedPort())/")!
        let transport = URLSessionTransport()
        let cancelled = Counter()
        finishes(within: 30, "a request cancelled before it started") {
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await transport.send(URLRequest(url: url))
            }
            if case .failure(let error) = await task.result, error is CancellationError { cancelled.add() }
        }
        XCTAssertEqual(cancelled.value, 1, "ended with CancellationError")
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var count = 0
        func add() { lock.withLock { count += 1 } }
        var value: Int { lock.withLock { count } }
    }
}
