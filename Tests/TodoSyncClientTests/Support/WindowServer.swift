import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// An in-process server of the contract's window pulls (API.md "Windows (partial sync)") behind
/// the library's `HTTPTransport`: tags and todos with one version sequence, tombstones, one
/// daily stat per date (its todo count), echo suppression, and `left` for live records changed
/// since the cursor that are outside the window now. A cursor names its window (another window
/// is 400). A pull without a cursor is one page; with one, `limit` pages it. No snapshot (404).
final class WindowServer: HTTPTransport, @unchecked Sendable {
    struct Record {
        var kind: String
        var fields: JSONObject
        var version: Int64
        var deleted: Bool
        /// The device whose push made the latest change (nil: another device or the server).
        var device: String?
        var deadline: String? { fields["deadline"]?.stringValue }
    }

    struct Stat {
        var id: Int64
        var version: Int64
        var count: Int
        var deleted: Bool { count == 0 }
    }

    private let lock = NSLock()
    private var records: [Int64: Record] = [:]
    private var stats: [String: Stat] = [:]
    private var nextID: Int64 = 100
    private var version: Int64 = 0
    /// The query of each pull, as sent (`from`, `to`, `cursor`, `deviceId`…).
    private(set) var pulls: [[String: String]] = []
    /// Every pull answered 400 (a cursor of another window).
    private(set) var refused = 0
    /// Runs once when the next pull arrives, before it is answered (a user's edit during a sync).
    var beforePull: (@Sendable () -> Void)?

    // MARK: Another device's writes

    /// Creates a todo as another device would; returns its id.
    @discardableResult
    func createTodo(_ title: String, deadline: String) -> Int64 {
        locked {
            let id = nextID
            nextID += 1
            write(id, Record(kind: "todo", fields: ["title": .string(title), "deadline": .string(deadline)], version: 0, deleted: false))
            return id
        }
    }

    /// Changes a todo's fields as another device would.
    func editTodo(_ id: Int64, _ fields: JSONObject) {
        locked {
            guard var record = records[id] else { return }
            record.fields.merge(fields) { $1 }
            record.device = nil
            write(id, record)
        }
    }

    func deleteTodo(_ id: Int64) {
        locked {
            guard var record = records[id] else { return }
            record.deleted = true
            record.device = nil
            write(id, record)
        }
    }

    /// Live todos in `window`, as (id, title, deadline).
    func liveTodos(in window: SyncWindow) -> Set<String> {
        locked {
            Set(records.filter { $0.value.kind == "todo" && !$0.value.deleted && Self.inside($0.value.deadline, window) }
                .map { "\($0.key) \($0.value.fields["title"]?.stringValue ?? "") \($0.value.deadline ?? "")" })
        }
    }

    // MARK: The transport

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let path = request.url?.path ?? ""
        if path.hasSuffix("/sync/push") {
            let body = try JSONParser.parse(Array(request.httpBody ?? Data())).objectValue ?? [:]
            let results = locked { push(body) }
            return respond(request, ["results": .array(results)])
        }
        guard path.hasSuffix("/sync/pull") else { return respond(request, [:], status: 404) }
        if let beforePull = locked({ () -> (@Sendable () -> Void)? in defer { self.beforePull = nil }; return self.beforePull }) {
            beforePull()
        }
        var query: [String: String] = [:]
        for item in URLComponents(url: request.url!, resolvingAgainstBaseURL: false)?.queryItems ?? [] { query[item.name] = item.value }
        return locked {
            pulls.append(query)
            guard let page = pull(query) else {
                refused += 1
                return respond(request, ["error": .object(["code": .string("bad_request"), "message": .string("cursor of another window"),
                                                           "details": .array([.object(["field": .string("cursor"), "problem": .string("window")])])])],
                               status: 400)
            }
            return respond(request, page)
        }
    }

    private func pull(_ query: [String: String]) -> JSONObject? {
        let window = SyncWindow(from: query["from"].flatMap(Day.init), to: query["to"].flatMap(Day.init)) ?? .whole
        let limit = Int(query["limit"] ?? "500") ?? 500
        var since: Int64?
        if let cursor = query["cursor"] {
            // "VERSION@FROM..TO"
            let parts = cursor.split(separator: "@", maxSplits: 1).map(String.init)
            guard parts.count == 2, let position = Int64(parts[0]), parts[1] == window.stored else { return nil }
            since = position
        }
        var entries: [(version: Int64, kind: String, list: String, object: JSONObject)] = []
        for (id, record) in records {
            if let since { guard record.version > since else { continue } } else { guard !record.deleted else { continue } }
            if since != nil, record.device != nil, record.device == query["deviceId"] { continue }
            let list: String
            if record.deleted { list = "deleted" } else if record.kind == "tag" || Self.inside(record.deadline, window) { list = "upserted" } else {
                guard since != nil else { continue }
                list = "left"
            }
            entries.append((record.version, record.kind + "s", list, list == "upserted" ? full(id, record) : brief(id, record)))
        }
        for (date, stat) in stats {
            if let since { guard stat.version > since else { continue } } else { guard !stat.deleted else { continue } }
            let list = stat.deleted ? "deleted" : Self.inside(date, window) ? "upserted" : "left"
            if since == nil && list == "left" { continue }
            let object: JSONObject = list == "upserted"
                ? ["id": .int(stat.id), "date": .string(date), "todoCount": .int(Int64(stat.count)), "version": .int(stat.version),
                   "deletedAt": .null]
                : ["id": .int(stat.id), "clientId": .null, "version": .int(stat.version)]
                    .merging(list == "deleted" ? ["deletedAt": .string("2026-11-24T10:00:01.000Z")] : [:]) { $1 }
            entries.append((stat.version, "dailyStats", list, object))
        }
        entries.sort { $0.version < $1.version }
        let hasMore = since != nil && entries.count > limit
        if since != nil { entries = Array(entries.prefix(limit)) }
        let position = since == nil ? version : (hasMore ? entries.last!.version : version)
        var changes: JSONObject = [:]
        for kind in ["tags", "todos", "dailyStats"] {
            var lists: JSONObject = [:]
            for list in ["upserted", "deleted", "left"] {
                lists[list] = .array(entries.filter { $0.kind == kind && $0.list == list }.map { .object($0.object) })
            }
            changes[kind] = .object(lists)
        }
        return ["changes": .object(changes), "cursor": .string("\(position)@\(window.stored)"), "hasMore": .bool(hasMore),
                "schemaVersion": .int(Int64(SchemaVersion.current))]
    }

    private func push(_ body: JSONObject) -> [JSONValue] {
        let device = body["deviceId"]?.stringValue
        return (body["operations"]?.arrayValue ?? []).compactMap(\.objectValue).map { op in
            let clientID = op["clientId"]?.stringValue
            var id = op["id"]?.int64Value
            if id == nil, let clientID {
                id = records.first { $0.value.fields["clientId"]?.stringValue?.lowercased() == clientID.lowercased() }?.key
            }
            var record: Record
            if let id, let existing = records[id] {
                record = existing
            } else {
                id = nextID
                nextID += 1
                record = Record(kind: op["entity"]?.stringValue ?? "todo", fields: ["clientId": clientID.map { .string($0) } ?? .null],
                                version: 0, deleted: false)
            }
            for (field, value) in op["data"]?.objectValue ?? [:] { record.fields[field] = value }
            if op["action"]?.stringValue == "delete" { record.deleted = true }
            record.device = device
            let written = write(id!, record)
            return .object(["opId": op["opId"] ?? .null, "status": .string("applied"), "id": .int(id!),
                            "clientId": written.fields["clientId"] ?? .null, "version": .int(written.version),
                            "record": .object(full(id!, written))])
        }
    }

    /// Stores a record with the next version, and recounts the stats of the dates it left and entered.
    @discardableResult
    private func write(_ id: Int64, _ new: Record) -> Record {
        let old = records[id]
        var record = new
        version += 1
        record.version = version
        records[id] = record
        if record.kind == "todo" {
            for date in Set([old?.deadline, record.deadline].compactMap { $0 }) { recount(date) }
        }
        return record
    }

    private func recount(_ date: String) {
        let count = records.values.filter { $0.kind == "todo" && !$0.deleted && $0.deadline == date }.count
        var stat = stats[date] ?? Stat(id: nextID, version: 0, count: 0)
        if stats[date] == nil { nextID += 1 }
        guard stat.count != count else { return }
        stat.count = count
        version += 1
        stat.version = version
        stats[date] = stat
    }

    private func full(_ id: Int64, _ record: Record) -> JSONObject {
        var object: JSONObject = ["id": .int(id), "version": .int(record.version), "clientId": .null,
                                  "createdAt": .string("2026-11-24T10:00:00.000Z"), "updatedAt": .string("2026-11-24T10:00:00.000Z"),
                                  "deletedAt": record.deleted ? .string("2026-11-24T10:00:01.000Z") : .null]
        if record.kind == "todo" {
            object.merge(["raw": .string(""), "notes": .null, "isImportant": .bool(false), "isLife": .bool(false), "tagId": .null,
                          "difficulty": .int(0), "estimatedTime": .int(0), "isCompleted": .bool(false)]) { $1 }
        } else {
            object["color"] = .string("#000000")
        }
        object.merge(record.fields) { $1 }
        return object
    }

    private func brief(_ id: Int64, _ record: Record) -> JSONObject {
        var object: JSONObject = ["id": .int(id), "clientId": record.fields["clientId"] ?? .null, "version": .int(record.version)]
        if record.deleted { object["deletedAt"] = .string("2026-11-24T10:00:01.000Z") }
        return object
    }

    static func inside(_ date: String?, _ window: SyncWindow) -> Bool {
        guard let date, let day = Day(date) else { return false }
        return window.contains(day)
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
