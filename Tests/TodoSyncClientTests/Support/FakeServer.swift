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

/// An in-process server behind the library's `HTTPTransport`: applies pushed operations (each
/// `applied` unless told otherwise), answers pulls with one empty page, and can hold pushes until
/// released, never answer, lose a response after applying, or fail as a network does.
final class FakeServer: HTTPTransport, @unchecked Sendable {
    enum Mode { case answer, hang, unreachable }
    /// How a pushed operation is answered.
    enum Answer { case applied, merged([String]), conflict, rejected(String) }

    private let lock = NSLock()
    private var mode: Mode
    private var holding = false
    private var held: [CheckedContinuation<Void, Never>] = []
    private var pushWaiters: [(count: Int, continuation: CheckedContinuation<Void, Never>)] = []
    private var records: [String: JSONObject] = [:]
    private var entities: [String: String] = [:]
    private var nextID: Int64 = 100
    private var version: Int64 = 0
    /// Every request as `METHOD path`, in arrival order.
    private(set) var requests: [String] = []
    /// The opIds of each push request, in arrival order.
    private(set) var pushes: [[String]] = []
    /// The body of each push request, as sent.
    private(set) var pushBodies: [String] = []
    private var answers: [Answer] = []
    private var whilePushing: [@Sendable () -> Void] = []
    private var whilePulling: [@Sendable () -> Void] = []
    private var responsesToLose = 0
    /// The oldest schema version served: a sync request naming an older one (absent: 1) gets 426.
    private var minimumSchemaVersion = 1
    /// The query of each pull request, as sent.
    private(set) var pullQueries: [String] = []

    func requireSchemaVersion(_ minimum: Int) { locked { minimumSchemaVersion = minimum } }

    /// The next pushed operations get these answers, in order (then `applied` again).
    func answer(_ next: Answer...) { locked { answers += next } }

    /// Runs `body` when the next push has arrived, before it is answered: its operations are
    /// `sending` on the device meanwhile.
    func whileNextPush(_ body: @escaping @Sendable () -> Void) { locked { whilePushing.append(body) } }

    /// Runs `body` when the next pull has arrived, before it is answered (the sync's push is over).
    func whileNextPull(_ body: @escaping @Sendable () -> Void) { locked { whilePulling.append(body) } }

    /// The next push is applied but its response is lost, as with a dropped connection.
    func loseNextResponse() { locked { responsesToLose += 1 } }

    /// Another device changes the record with this clientId: new values, a new version.
    func editOnServer(clientID: String, _ fields: JSONObject) {
        locked {
            guard var record = records[clientID.lowercased()] else { return }
            record.merge(fields) { $1 }
            version += 1
            record["version"] = .int(version)
            records[clientID.lowercased()] = record
        }
    }

    /// A todo another device made (on the server only): `fields` over the defaults.
    func seedTodo(id: Int64, clientID: String, title: String, fields: JSONObject = [:]) {
        locked {
            version += 1
            var record: JSONObject = [
                "id": .int(id), "clientId": .string(clientID), "title": .string(title), "raw": .string(title),
                "deadline": .string("2026-11-26"), "isImportant": .bool(false), "isLife": .bool(false), "tagId": .null,
                "difficulty": .int(0), "estimatedTime": .int(0), "isCompleted": .bool(false), "version": .int(version),
                "createdAt": .string("2026-11-24T10:00:00.000Z"), "updatedAt": .string("2026-11-24T10:00:00.000Z"), "deletedAt": .null,
            ]
            record.merge(fields) { $1 }
            records[clientID.lowercased()] = record
            entities[clientID.lowercased()] = "todo"
        }
    }

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
            pushBodies.append(String(decoding: request.httpBody ?? Data(), as: UTF8.self))
            let ready = pushWaiters.filter { $0.count <= pushes.count }
            pushWaiters.removeAll { $0.count <= pushes.count }
            return (self.mode, ready.map(\.continuation))
        }
        for continuation in ready { continuation.resume() }
        if path.hasSuffix("/sync/pull") { locked { pullQueries.append(request.url?.query ?? "") } }
        if isPush || path.hasSuffix("/sync/pull") {
            let query = URLComponents(url: request.url!, resolvingAgainstBaseURL: false)?.queryItems ?? []
            let named = isPush ? body["schemaVersion"]?.int64Value.map(Int.init)
                : query.first { $0.name == "schemaVersion" }?.value.flatMap { Int($0) }
            let minimum = locked { minimumSchemaVersion }
            if mode == .answer, (named ?? 1) < minimum {
                return respond(request, ["error": .object([
                    "code": .string("upgrade_required"), "message": .string("this app is too old"),
                    "minimum": .int(Int64(minimum)), "current": .int(2),
                ])], status: 426)
            }
        }
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
            for body in locked({ () -> [@Sendable () -> Void] in defer { whilePushing = [] }; return whilePushing }) { body() }
            let (results, lose) = locked { () -> ([JSONValue], Bool) in
                let results = applyPush(body)
                defer { responsesToLose = max(0, responsesToLose - 1) }
                return (results, responsesToLose > 0)
            }
            if lose { throw URLError(.networkConnectionLost) }
            return respond(request, ["results": .array(results)])
        }
        if path.hasSuffix("/sync/pull") {
            for body in locked({ () -> [@Sendable () -> Void] in defer { whilePulling = [] }; return whilePulling }) { body() }
            // A pull without cursor (a full pull) gets every record in one page; later pulls get none.
            let full = !(request.url?.query ?? "").contains("cursor=")
            let page = locked { () -> JSONObject in
                var changes: JSONObject = ["dailyStats": .object(["upserted": .array([]), "deleted": .array([])])]
                for entity in ["tag", "todo"] {
                    let kept = full ? records.filter { entities[$0.key] == entity }.values.sorted { $0["version"]?.int64Value ?? 0 < $1["version"]?.int64Value ?? 0 } : []
                    changes[entity + "s"] = .object([
                        "upserted": .array(kept.filter { $0["deletedAt"]?.isNull ?? true }.map(JSONValue.object)),
                        "deleted": .array(kept.filter { !($0["deletedAt"]?.isNull ?? true) }.map {
                            .object(["id": $0["id"]!, "clientId": $0["clientId"]!, "version": $0["version"]!, "deletedAt": $0["deletedAt"]!])
                        }),
                    ])
                }
                return changes
            }
            return respond(request, ["changes": .object(page), "cursor": .string("c1"), "hasMore": .bool(false)])
        }
        return respond(request, [:], status: 404)
    }

    private func applyPush(_ body: JSONObject) -> [JSONValue] {
        (body["operations"]?.arrayValue ?? []).compactMap(\.objectValue).map { op in
            let key = op["clientId"]?.stringValue?.lowercased()
                ?? records.first { $0.value["id"] == op["id"] }?.key ?? op["id"].map { JSONText.encode($0) } ?? ""
            let answer = answers.isEmpty ? .applied : answers.removeFirst()
            if case .rejected(let code) = answer {
                return .object(["opId": op["opId"] ?? .null, "status": .string("rejected"),
                                "error": .object(["code": .string(code), "message": .string("refused by the fake server")])])
            }
            var record = records[key] ?? [
                "id": .int(nextID), "clientId": op["clientId"] ?? .null, "createdAt": .string("2026-11-24T10:00:00.000Z"),
                "deletedAt": .null, "isImportant": .bool(false), "isLife": .bool(false), "tagId": .null, "difficulty": .int(0),
                "estimatedTime": .int(0), "isCompleted": .bool(false), "version": .int(0),
            ]
            if records[key] == nil {
                nextID += 1
                entities[key] = op["entity"]?.stringValue
            }
            if case .conflict = answer {
                return .object(["opId": op["opId"] ?? .null, "status": .string("conflict"), "id": record["id"]!,
                                "clientId": record["clientId"]!, "version": record["version"]!, "record": .object(record)])
            }
            for (field, value) in op["data"]?.objectValue ?? [:] {
                if field == "tagClientId" {
                    record["tagId"] = value.stringValue.flatMap { records[$0.lowercased()]?["id"] } ?? .null
                } else {
                    record[field] = value
                }
            }
            if op["action"]?.stringValue == "delete" { record["deletedAt"] = .string("2026-11-24T10:00:01.000Z") }
            version += 1
            record["version"] = .int(version)
            record["updatedAt"] = .string("2026-11-24T10:00:00.000Z")
            records[key] = record
            var result: JSONObject = ["opId": op["opId"] ?? .null, "status": .string("applied"), "id": record["id"]!,
                                      "clientId": record["clientId"]!, "version": .int(version), "record": .object(record)]
            if case .merged(let fields) = answer {
                result["status"] = .string("merged")
                result["conflictingFields"] = .array(fields.map { .string($0) })
            }
            return .object(result)
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
