import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

@testable import TodoSyncClient

/// An in-process server behind the library's `HTTPTransport`: applies pushed todo creates and
/// updates (every one `applied`), answers pulls with one empty page, and can hold pushes until
/// released, never answer, or fail as a network does.
final class FakeServer: HTTPTransport, @unchecked Sendable {
    enum Mode { case answer, hang, unreachable }

    private let lock = NSLock()
    private var mode: Mode
    private var holding = false
    private var held: [CheckedContinuation<Void, Never>] = []
    private var pushWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var records: [String: JSONObject] = [:]
    private var nextID: Int64 = 100
    private var version: Int64 = 0
    /// Every request as `METHOD path`, in arrival order.
    private(set) var requests: [String] = []
    /// The opIds of each push request, in arrival order.
    private(set) var pushes: [[String]] = []

    init(_ mode: Mode = .answer) { self.mode = mode }

    func set(_ mode: Mode) { locked { self.mode = mode } }

    /// Pushes wait (after they arrived) until `release()`.
    func holdPushes() { locked { holding = true } }

    func release() {
        let waiting = locked { () -> [CheckedContinuation<Void, Never>] in
            holding = false
            defer { held = [] }
            return held
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Returns once `count` push requests have arrived.
    func waitForPushes(_ count: Int) async {
        await withCheckedContinuation { continuation in
            let ready = locked { () -> Bool in
                if pushes.count >= count { return true }
                pushWaiters.append((count, continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let path = request.url?.path ?? ""
        let isPush = path.hasSuffix("/sync/push")
        let body = request.httpBody.flatMap { try? JSONParser.parse(Array($0)).objectValue } ?? [:]
        let (mode, ready) = locked { () -> (Mode, [CheckedContinuation<Void, Never>]) in
            requests.append("\(request.httpMethod ?? "GET") \(path)")
            guard isPush, self.mode == .answer else { return (self.mode, []) }
            pushes.append((body["operations"]?.arrayValue ?? []).compactMap { $0.objectValue?["opId"]?.stringValue })
            let ready = pushWaiters.filter { $0.count <= pushes.count }
            pushWaiters.removeAll { $0.count <= pushes.count }
            return (self.mode, ready.map(\.continuation))
        }
        for continuation in ready { continuation.resume() }
        switch mode {
        case .unreachable:
            throw URLError(.cannotConnectToHost)
        case .hang:
            while true { try await Task.sleep(nanoseconds: 3_600_000_000_000) }
        case .answer:
            break
        }
        if isPush {
            await withCheckedContinuation { continuation in
                let wait = locked { () -> Bool in
                    if holding { held.append(continuation) }
                    return holding
                }
                if !wait { continuation.resume() }
            }
            return respond(request, ["results": .array(locked { applyPush(body) })])
        }
        if path.hasSuffix("/sync/pull") {
            let empty: JSONObject = ["upserted": .array([]), "deleted": .array([])]
            return respond(request, ["changes": .object(["tags": .object(empty), "todos": .object(empty), "dailyStats": .object(empty)]),
                                     "cursor": .string("c1"), "hasMore": .bool(false)])
        }
        return respond(request, [:], status: 404)
    }

    private func applyPush(_ body: JSONObject) -> [JSONValue] {
        (body["operations"]?.arrayValue ?? []).compactMap(\.objectValue).map { op in
            let key = op["clientId"]?.stringValue?.lowercased() ?? op["id"].map { JSONText.encode($0) } ?? ""
            var record = records[key] ?? [
                "id": .int(nextID), "clientId": op["clientId"] ?? .null, "createdAt": .string("2026-11-24T10:00:00.000Z"),
                "deletedAt": .null, "isImportant": .bool(false), "isLife": .bool(false), "tagId": .null, "difficulty": .int(0),
                "estimatedTime": .int(0), "isCompleted": .bool(false),
            ]
            if records[key] == nil { nextID += 1 }
            for (field, value) in op["data"]?.objectValue ?? [:] { record[field] = value }
            version += 1
            record["version"] = .int(version)
            record["updatedAt"] = .string("2026-11-24T10:00:00.000Z")
            records[key] = record
            return .object(["opId": op["opId"] ?? .null, "status": .string("applied"), "id": record["id"]!,
                            "clientId": record["clientId"]!, "version": .int(version), "record": .object(record)])
        }
    }

    private func respond(_ request: URLRequest, _ object: JSONObject, status: Int = 200) -> (Data, HTTPURLResponse) {
        let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Type": "application/json"])!
        return (Data(JSONText.encode(.object(object)).utf8), response)
    }

    private func locked<T>(_ body: () -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body()
    }
}

/// A clock that jumps instead of sleeping: waits cost no real time, and are recorded.
final class TestClock: SyncClock, @unchecked Sendable {
    private let lock = NSLock()
    private var time: Double = 1_000
    private var slept: [Double] = []

    var now: Double {
        lock.lock()
        defer { lock.unlock() }
        return time
    }

    /// Every wait so far, in seconds.
    var sleeps: [Double] {
        lock.lock()
        defer { lock.unlock() }
        return slept
    }

    func sleep(seconds: Double) async throws {
        try Task.checkCancellation()
        advance(by: seconds)
        await Task.yield()
    }

    private func advance(by seconds: Double) {
        lock.lock()
        time += seconds
        slept.append(seconds)
        lock.unlock()
    }
}

/// A TCP server that accepts connections and never answers (nor reads, nor closes).
final class SilentServer: @unchecked Sendable {
    let port: UInt16
    private let listener: Int32
    private let lock = NSLock()
    private var connections: [Int32] = []

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        guard listener >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw -> Int32 in
                guard bind(listener, raw, length) == 0, listen(listener, 16) == 0 else { return -1 }
                return getsockname(listener, raw, &length)
            }
        }
        guard bound == 0 else { throw TestFailure("bind/listen: errno \(errno)") }
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [listener] in
            while true {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { return }  // the listener was closed
                self.lock.lock()
                self.connections.append(connection)
                self.lock.unlock()
            }
        }
        thread.start()
    }

    var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Connections accepted so far.
    var accepted: Int {
        lock.lock()
        defer { lock.unlock() }
        return connections.count
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        lock.lock()
        for connection in connections { close(connection) }
        connections = []
        lock.unlock()
    }
}
