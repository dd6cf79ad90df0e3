import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The retry rules of the HTTP layer, with a scripted transport (the real server's 429 and 503
/// are exercised by the stack tests; these pin the timing rules).
final class RetryTests: XCTestCase {
    /// Answers from a script, one per request, recording when each request came.
    final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
        private let lock = NSLock()
        private var script: [(status: Int, headers: [String: String])]
        private(set) var times: [Date] = []

        init(_ script: [(status: Int, headers: [String: String])]) { self.script = script }

        private func next() -> (Int, [String: String]) {
            lock.lock()
            defer { lock.unlock() }
            times.append(Date())
            return script.isEmpty ? (200, [:]) : script.removeFirst()
        }

        func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
            let (status, headers) = next()
            if status == 0 { throw URLError(.cannotConnectToHost) }
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
            return (Data("{}".utf8), response)
        }
    }

    func testRetryAfterIsAFloorForTheBackoff() async throws {
        let transport = ScriptedTransport([(429, ["Retry-After": "1"]), (503, [:]), (200, [:])])
        let clock = TestClock()
        let api = APIClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                            retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.01, maxDelay: 2), clock: clock)
        let response = try await api.send("GET", "/api/v1/sync/pull", token: "t")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(transport.times.count, 3)
        XCTAssertEqual(clock.sleeps.count, 2)
        XCTAssertEqual(clock.sleeps[0], 1, "waited Retry-After")
        XCTAssertLessThan(clock.sleeps[1], 0.5, "503 without Retry-After: short backoff")
    }

    func testNetworkErrorsAreRetriedThenReportedAsOffline() async throws {
        let transport = ScriptedTransport([(0, [:]), (0, [:]), (0, [:])])
        let clock = TestClock()
        let api = APIClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                            retry: RetryPolicy(maxAttempts: 3, initialDelay: 0.01, maxDelay: 0.05), clock: clock)
        do {
            _ = try await api.send("GET", "/api/v1/tags", token: "t")
            XCTFail("expected offline")
        } catch let error as SyncError {
            guard case .offline = error else { return XCTFail("\(error)") }
        }
        XCTAssertEqual(transport.times.count, 3)
        XCTAssertEqual(clock.sleeps.count, 2)
    }

    func testOtherErrorsAreNotRetried() async throws {
        let transport = ScriptedTransport([(422, [:]), (200, [:])])
        let api = APIClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport, retry: RetryPolicy(), clock: TestClock())
        let response = try await api.send("POST", "/api/v1/sync/push", body: Data("{}".utf8), token: "t")
        XCTAssertEqual(response.status, 422)
        XCTAssertEqual(transport.times.count, 1)
    }

    func testBackoffGrowsExponentiallyWithJitterUpToTheCap() {
        let policy = RetryPolicy(maxAttempts: 10, initialDelay: 0.25, maxDelay: 4)
        for attempt in 1...8 {
            let ceiling = min(4, 0.25 * pow(2, Double(attempt - 1)))
            for _ in 0..<20 {
                let delay = policy.delay(afterAttempt: attempt, retryAfter: nil)
                XCTAssertGreaterThanOrEqual(delay, ceiling / 2)
                XCTAssertLessThanOrEqual(delay, ceiling)
            }
        }
        XCTAssertEqual(policy.delay(afterAttempt: 1, retryAfter: 3), 3)
    }

    func testALongRetryAfterEndsTheAttemptInsteadOfSleeping() async throws {
        let transport = ScriptedTransport([(429, ["Retry-After": "3600"]), (200, [:])])
        let api = APIClient(baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                            retry: RetryPolicy(maxAttempts: 5, initialDelay: 0.01, maxDelay: 10), clock: TestClock())
        let response = try await api.send("POST", "/api/v1/sync/push", body: Data("{}".utf8), token: "t")
        XCTAssertEqual(response.status, 429)
        XCTAssertEqual(transport.times.count, 1)
        guard case .unavailable(429, 3600) = TodoSyncClient.failure(response) else {
            return XCTFail("a quota answer reaches the app with its Retry-After")
        }
    }
}
