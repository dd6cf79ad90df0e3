import Foundation
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// A clock that moves only when the test says: `advance(by:)` wakes the sleepers whose time
/// has come. Nothing waits for real time.
final class ManualClock: SyncClock, @unchecked Sendable {
    private let lock = NSLock()
    private var time: Double = 1_000
    private var sleepers: [(id: Int, until: Double, continuation: CheckedContinuation<Void, Error>)] = []
    private var nextID = 0

    var now: Double {
        lock.lock()
        defer { lock.unlock() }
        return time
    }

    /// How many waits are pending, and the soonest one's end.
    var waiting: (count: Int, soonest: Double?) {
        lock.lock()
        defer { lock.unlock() }
        return (sleepers.count, sleepers.map(\.until).min())
    }

    func sleep(seconds: Double) async throws {
        let id = lock.withLock { () -> Int in
            nextID += 1
            return nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                lock.lock()
                if Task.isCancelled {
                    lock.unlock()
                    continuation.resume(throwing: CancellationError())
                    return
                }
                if seconds <= 0 {
                    lock.unlock()
                    continuation.resume()
                    return
                }
                sleepers.append((id, time + seconds, continuation))
                lock.unlock()
            }
        } onCancel: {
            lock.lock()
            let index = sleepers.firstIndex { $0.id == id }
            let sleeper = index.map { sleepers.remove(at: $0) }
            lock.unlock()
            sleeper?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward and wakes every wait that ends by then.
    func advance(by seconds: Double) {
        lock.lock()
        time += seconds
        let due = sleepers.filter { $0.until <= time + 1e-9 }
        sleepers.removeAll { $0.until <= time + 1e-9 }
        lock.unlock()
        for sleeper in due { sleeper.continuation.resume() }
    }
}

/// Pokes on demand: each `open` is one stream the test feeds with `send` and ends with `drop`.
final class FakeLiveStream: LiveStream, @unchecked Sendable {
    private let lock = NSLock()
    private var current: AsyncThrowingStream<LiveEvent, Error>.Continuation?
    private(set) var opens = 0
    /// Answer the next opens with this status instead of a stream.
    var refuseWith: Int?

    func open(token: String, schemaVersion: Int) -> AsyncThrowingStream<LiveEvent, Error> {
        AsyncThrowingStream { continuation in
            lock.lock()
            opens += 1
            let refused = refuseWith
            if refused == nil { current = continuation }
            lock.unlock()
            if let refused {
                continuation.finish(throwing: LiveStreamError.refused(status: refused, retryAfter: nil, body: Data()))
            } else {
                continuation.yield(.opened)
            }
        }
    }

    func send(_ event: LiveEvent) {
        lock.lock()
        let continuation = current
        lock.unlock()
        continuation?.yield(event)
    }

    /// The connection breaks (a server restart).
    func drop() {
        lock.lock()
        let continuation = current
        current = nil
        lock.unlock()
        continuation?.finish(throwing: LiveStreamError.ended("connection lost"))
    }
}

/// Answers every request with one status (401: a revoked token).
struct RefusingTransport: HTTPTransport {
    let status: Int

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Type": "application/json"])!
        return (Data(#"{"error":{"code":"unauthorized","message":"no"}}"#.utf8), response)
    }
}

/// Collects an engine's events as they come.
final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [SyncEngine.Event] = []
    private var task: Task<Void, Never>?

    init(_ engine: SyncEngine) {
        task = Task { [weak self] in
            for await event in engine.events {
                guard let self else { return }
                self.lock.withLock { self.list.append(event) }
            }
        }
    }

    var events: [SyncEngine.Event] { lock.withLock { list } }

    var synced: [SyncEngine.Trigger] {
        events.compactMap { if case .synced(_, let trigger) = $0 { return trigger } else { return nil } }
    }

    var failures: [Double] {
        events.compactMap { if case .failed(_, _, let retryIn) = $0 { return retryIn } else { return nil } }
    }

    var attempts: Int { events.filter { if case .syncing = $0 { return true } else { return false } }.count }
}

/// Waits (real time, polled every millisecond, at most `timeout` s) until `condition` holds.
func waitFor(_ what: String, timeout: Double = 5, file: StaticString = #filePath, line: UInt = #line,
                _ condition: () async throws -> Bool) async rethrows {
    let end = Date().addingTimeInterval(timeout)
    while Date() < end {
        if try await condition() { return }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    XCTFail("timed out waiting for: \(what)", file: file, line: line)
}

/// Lets the engine run until its loop waits (for a trigger or a time) with no sync running.
func settle(_ engine: SyncEngine) async {
    for _ in 0..<20 { await Task.yield() }
    for _ in 0..<5000 {
        if await engine.isWaiting { return }
        try? await Task.sleep(nanoseconds: 1_000_000)
    }
    XCTFail("the engine did not settle")
}
