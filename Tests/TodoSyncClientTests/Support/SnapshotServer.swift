import Foundation
import GRDB
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// Builds a snapshot file exactly as docs/SNAPSHOT.md describes it, from records as pull renders
/// them (the server's builder is not part of the client; this one lives in the tests only).
enum SnapshotBuilder {
    static let tagColumns = ["id", "clientId", "name", "color", "version", "createdAt", "updatedAt"]
    static func todoColumns(_ schemaVersion: Int) -> [String] {
        ["id", "clientId", "title", "raw"] + (schemaVersion >= 2 ? ["notes"] : []) + (schemaVersion >= 3 ? ["remindAt"] : [])
            + ["isImportant", "isLife", "tagId", "difficulty", "estimatedTime", "deadline", "isCompleted", "version", "createdAt", "updatedAt"]
    }
    static let statColumns = ["id", "date", "todoCount", "completedCount", "productivityNum", "balance", "tagStats", "center",
                              "version", "createdAt", "updatedAt"]

    static func build(tags: [JSONObject], todos: [JSONObject], stats: [JSONObject], meta: [String: String],
                      userVersion: Int) throws -> Data {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-\(UUID().uuidString).sqlite").path
        defer { unlink(path) }
        let queue = try DatabaseQueue(path: path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA user_version = \(userVersion)")
            try db.inTransaction {
                try create(db, "tags", tagColumns, tags)
                try create(db, "todos", todoColumns(userVersion), todos)
                try create(db, "daily_stats", statColumns, stats, json: true)
                try db.execute(sql: "CREATE TABLE snapshot_meta (key TEXT PRIMARY KEY, value TEXT)")
                for (key, value) in meta {
                    try db.execute(sql: "INSERT INTO snapshot_meta (key, value) VALUES (?, ?)", arguments: [key, value])
                }
                return .commit
            }
        }
        try queue.close()
        return try Data(contentsOf: URL(fileURLWithPath: path))
    }

    private static func create(_ db: Database, _ table: String, _ columns: [String], _ rows: [JSONObject], json: Bool = false) throws {
        let all = columns + (json ? ["json"] : [])
        let declared = all.map { $0 == "id" ? "id INTEGER PRIMARY KEY" : $0 == "json" ? "json TEXT NOT NULL" : $0 }
        try db.execute(sql: "CREATE TABLE \(table) (\(declared.joined(separator: ", ")))")
        for row in rows {
            var values: [DatabaseValue] = columns.map { sqliteValue(row[$0] ?? .null) }
            if json { values.append(JSONText.encode(.object(row)).databaseValue) }
            try db.execute(sql: "INSERT INTO \(table) (\(all.joined(separator: ", "))) VALUES (\(databaseQuestionMarks(count: all.count)))",
                           arguments: StatementArguments(values))
        }
    }

    /// docs/SNAPSHOT.md's type table.
    static func sqliteValue(_ value: JSONValue) -> DatabaseValue {
        switch value {
        case .null: return .null
        case .bool(let flag): return (flag ? 1 : 0).databaseValue
        case .string(let text): return text.databaseValue
        case .number(let number): return number.int64.map(\.databaseValue) ?? (number.double ?? 0).databaseValue
        case .array, .object: return JSONText.encode(value).databaseValue
        }
    }
}

/// SHA-256 computed outside the library (coreutils), so a digest test is not the code checking itself.
func independentSHA256(_ data: Data) throws -> Data {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("digest-\(UUID().uuidString)").path
    defer { unlink(path) }
    try data.write(to: URL(fileURLWithPath: path))
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    process.arguments = [path]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let hex = String(decoding: output, as: UTF8.self).prefix(64)
    var bytes = Data()
    var index = hex.startIndex
    while index < hex.endIndex {
        let next = hex.index(index, offsetBy: 2)
        bytes.append(UInt8(hex[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

/// A server of one user's tags, todos and daily stats behind the library's `HTTPTransport`:
/// pull (no cursor: every live record; cursor `vN`: every change after version N, tombstones
/// included) and `GET /sync/snapshot` (a file from `SnapshotBuilder` with ETag, Repr-Digest
/// and Range), with switches for each way a snapshot can go wrong.
final class SnapshotServer: HTTPTransport, @unchecked Sendable {
    static let userID: Int64 = 42
    private let lock = NSLock()
    private var tags: [Int64: JSONObject] = [:]
    private var todos: [Int64: JSONObject] = [:]
    private var stats: [Int64: JSONObject] = [:]
    private var version: Int64 = 0
    private var nextID: Int64 = 1

    /// false: the snapshot route is 404 (a server before snapshots).
    var snapshotRoute = true
    /// The snapshot route answers this status (503: an account too large to build in time).
    var snapshotStatus: Int?
    /// One byte of the served file is flipped after its digest was taken.
    var tamper = false
    var snapshotUserID = String(SnapshotServer.userID)
    var snapshotUserVersion = SchemaVersion.current
    /// Pulls with a cursor answer 410 (the database was restored: a new epoch).
    var newEpoch = false
    /// Pulls without a cursor answer this status (to see that a refused snapshot installed nothing).
    var fullPullStatus: Int?
    /// The first snapshot request for a range starting at or after this offset fails as a lost
    /// connection does (after the server did the work).
    var breakFirstDownloadAt: Int?
    /// Every snapshot request's `Range` and `If-Range` (nil when absent).
    private(set) var snapshotRequests: [(range: String?, ifRange: String?)] = []
    /// Every pull's query, as sent.
    private(set) var pullQueries: [String] = []
    private var cached: (version: Int64, bytes: Data, digest: Data)?
    /// Serves the file last built even when the data moved on since (writes committed while
    /// the snapshot was being built and downloaded).
    var useCachedSnapshot = false
    /// The size and the ETag of the file last built.
    var servedBytes: Int? { locked { cached?.bytes.count } }
    var etag: String? { locked { cached.map { "\"s\($0.version)\"" } } }

    func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }

    // MARK: The user's data

    private func bump() -> Int64 {
        version += 1
        return version
    }

    @discardableResult
    func addTag(name: String, color: String, clientID: String? = UUID().uuidString) -> Int64 {
        locked {
            let id = nextID
            nextID += 1
            tags[id] = ["id": .int(id), "clientId": .optionalString(clientID), "name": .string(name), "color": .string(color),
                        "version": .int(bump()), "createdAt": .string("2026-11-20T08:00:00.000Z"),
                        "updatedAt": .string("2026-11-20T08:00:00.000Z"), "deletedAt": .null]
            return id
        }
    }

    @discardableResult
    func addTodo(title: String, notes: String? = nil, tagID: Int64? = nil, day: Int = 1, important: Bool = false,
                 clientID: String? = UUID().uuidString) -> Int64 {
        locked {
            let id = nextID
            nextID += 1
            todos[id] = ["id": .int(id), "clientId": .optionalString(clientID), "title": .string(title), "raw": .string(title + " #raw"),
                         "notes": .optionalString(notes),
                         "remindAt": id % 4 == 0 ? .string(String(format: "2026-11-%02dT07:30:00.000Z", day)) : .null,
                         "isImportant": .bool(important), "isLife": .bool(id % 3 == 0),
                         "tagId": .optionalInt(tagID), "difficulty": .int(id % 6), "estimatedTime": .int(id * 5 % 1440),
                         "deadline": .string(String(format: "2026-11-%02d", day)), "isCompleted": .bool(id % 2 == 0),
                         "version": .int(bump()), "createdAt": .string(String(format: "2026-11-20T08:%02d:00.000Z", id % 60)),
                         "updatedAt": .string("2026-11-21T08:00:00.000Z"), "deletedAt": .null]
            return id
        }
    }

    func addStat(day: Int, todoCount: Int, productivity: String) {
        locked {
            let id = nextID
            nextID += 1
            stats[id] = ["id": .int(id), "date": .string(String(format: "2026-11-%02d", day)), "todoCount": .int(todoCount),
                         "completedCount": .int(todoCount / 2), "productivityNum": .number(JSONNumber(literal: productivity)),
                         "balance": .object(["num": .int(2), "title": .string("Steady"), "message": .string("Keep going ✨")]),
                         "tagStats": .array([.object(["tagId": .int(1), "name": .string("Work"), "color": .string("#112233"), "count": .int(3)])]),
                         "center": .object(["x": .number(JSONNumber(literal: "0.25")), "y": .number(JSONNumber(literal: "-1.5"))]),
                         "version": .int(bump()), "createdAt": .string("2026-11-21T00:00:00.000Z"),
                         "updatedAt": .string("2026-11-21T00:00:00.000Z"), "deletedAt": .null]
        }
    }

    func editTodo(_ id: Int64, _ fields: JSONObject) {
        locked {
            todos[id]?.merge(fields) { $1 }
            todos[id]?["version"] = .int(bump())
        }
    }

    func deleteTodo(_ id: Int64) {
        locked {
            todos[id]?["deletedAt"] = .string("2026-11-22T08:00:00.000Z")
            todos[id]?["version"] = .int(bump())
        }
    }

    /// Deletes a tag and un-tags its todos (their versions bump), as the contract says.
    func deleteTag(_ id: Int64) {
        locked {
            tags[id]?["deletedAt"] = .string("2026-11-22T08:00:00.000Z")
            tags[id]?["version"] = .int(bump())
            for (todoID, todo) in todos where todo["tagId"]?.int64Value == id {
                todos[todoID]?["tagId"] = .null
                todos[todoID]?["version"] = .int(bump())
            }
        }
    }

    var recordCount: Int { locked { live(tags).count + live(todos).count + live(stats).count } }

    private func live(_ records: [Int64: JSONObject]) -> [JSONObject] {
        records.values.filter { $0["deletedAt"] == .null }.sorted { $0["id"]!.int64Value! < $1["id"]!.int64Value! }
    }

    // MARK: HTTP

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let path = request.url?.path ?? ""
        let query = URLComponents(url: request.url!, resolvingAgainstBaseURL: false)?.queryItems ?? []
        if path.hasSuffix("/sync/pull") { return locked { pull(request, query) } }
        if path.hasSuffix("/sync/push") { return locked { push(request) } }
        if path.hasSuffix("/sync/snapshot") {
            let (status, headers, body) = try snapshot(request)
            let broken = locked { () -> Bool in
                guard let at = breakFirstDownloadAt, let range = headers["Content-Range"],
                      let start = Int(range.dropFirst(6).prefix { $0 != "-" }), start >= at else { return false }
                breakFirstDownloadAt = nil
                return true
            }
            if broken { throw URLError(.networkConnectionLost) }
            return (body, HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!)
        }
        return (Data(#"{"error":{"code":"not_found","message":"no such route"}}"#.utf8), Self.head(request, 404, [:]))
    }

    private static func head(_ request: URLRequest, _ status: Int, _ headers: [String: String]) -> HTTPURLResponse {
        HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
    }

    private func pull(_ request: URLRequest, _ query: [URLQueryItem]) -> (Data, HTTPURLResponse) {
        pullQueries.append(request.url?.query ?? "")
        let cursor = query.first { $0.name == "cursor" }?.value
        let schemaVersion = query.first { $0.name == "schemaVersion" }?.value.flatMap(Int.init) ?? 1
        if cursor == nil, let status = fullPullStatus {
            return (Data(#"{"error":{"code":"internal","message":"down"}}"#.utf8), Self.head(request, status, ["Content-Type": "application/json"]))
        }
        if cursor != nil && newEpoch {
            return (Data(#"{"error":{"code":"cursor_expired","message":"start again"}}"#.utf8), Self.head(request, 410, ["Content-Type": "application/json"]))
        }
        let after = cursor.flatMap { Int64($0.dropFirst()) }
        func changes(_ records: [Int64: JSONObject]) -> JSONValue {
            let sorted = records.values.sorted { $0["version"]!.int64Value! < $1["version"]!.int64Value! }
            let changed = after.map { since in sorted.filter { $0["version"]!.int64Value! > since } } ?? sorted.filter { $0["deletedAt"] == .null }
            return .object([
                "upserted": .array(changed.filter { $0["deletedAt"] == .null }.map { record in
                    var shown = record
                    if schemaVersion < 2 { shown["notes"] = nil }
                    if schemaVersion < 3 { shown["remindAt"] = nil }
                    return .object(shown)
                }),
                "deleted": .array(changed.filter { $0["deletedAt"] != .null }.map {
                    .object(["id": $0["id"]!, "clientId": $0["clientId"] ?? .null, "version": $0["version"]!, "deletedAt": $0["deletedAt"]!])
                }),
            ])
        }
        let page: JSONObject = [
            "changes": .object(["tags": changes(tags), "todos": changes(todos), "dailyStats": changes(stats)]),
            "cursor": .string("v\(version)"), "hasMore": .bool(false), "schemaVersion": .int(schemaVersion),
        ]
        return (Data(JSONText.encode(.object(page)).utf8), Self.head(request, 200, ["Content-Type": "application/json"]))
    }

    /// Todo creates only (what the tests push): each applied as sent.
    private func push(_ request: URLRequest) -> (Data, HTTPURLResponse) {
        let body = request.httpBody.flatMap { try? JSONParser.parse(Array($0)).objectValue } ?? [:]
        var results: [JSONValue] = []
        for op in (body["operations"]?.arrayValue ?? []).compactMap(\.objectValue) {
            let id = nextID
            nextID += 1
            var record: JSONObject = ["id": .int(id), "clientId": op["clientId"] ?? .null, "raw": .string(""), "notes": .null, "remindAt": .null,
                                      "isImportant": .bool(false), "isLife": .bool(false), "tagId": .null, "difficulty": .int(0),
                                      "estimatedTime": .int(0), "isCompleted": .bool(false), "createdAt": .string("2026-11-24T10:00:00.000Z"),
                                      "updatedAt": .string("2026-11-24T10:00:00.000Z"), "deletedAt": .null]
            record.merge(op["data"]?.objectValue ?? [:]) { $1 }
            record["version"] = .int(bump())
            todos[id] = record
            results.append(.object(["opId": op["opId"] ?? .null, "status": .string("applied"), "id": .int(id),
                                    "clientId": record["clientId"]!, "version": record["version"]!, "record": .object(record)]))
        }
        return (Data(JSONText.encode(.object(["results": .array(results)])).utf8), Self.head(request, 200, ["Content-Type": "application/json"]))
    }

    private func snapshot(_ request: URLRequest) throws -> (Int, [String: String], Data) {
        let range = request.value(forHTTPHeaderField: "Range")
        let ifRange = request.value(forHTTPHeaderField: "If-Range")
        let (route, file) = try locked { () -> (Bool, (version: Int64, bytes: Data, digest: Data)?) in
            snapshotRequests.append((range, ifRange))
            guard snapshotRoute else { return (false, nil) }
            if cached == nil || (cached?.version != version && !useCachedSnapshot) {
                let meta = ["userId": snapshotUserID, "cursor": "v\(version)", "schemaVersion": String(snapshotUserVersion),
                            "createdAt": "2026-11-26T10:00:00.000Z", "recordCount": String(live(tags).count + live(todos).count + live(stats).count),
                            "format": "todosync-snapshot"]
                let bytes = try SnapshotBuilder.build(tags: live(tags), todos: live(todos), stats: live(stats), meta: meta,
                                                      userVersion: snapshotUserVersion)
                cached = (version, bytes, try independentSHA256(bytes))
            }
            return (true, cached)
        }
        if let status = locked({ snapshotStatus }) {
            return (status, ["Content-Type": "application/json", "Retry-After": "3600"],
                    Data(#"{"error":{"code":"unavailable","message":"too large to build in time"}}"#.utf8))
        }
        guard route, let file else { return (404, ["Content-Type": "application/json"], Data(#"{"error":{"code":"not_found","message":"no such route"}}"#.utf8)) }
        var bytes = file.bytes
        if tamper { bytes[bytes.count / 2] ^= 0x01 }
        let etag = "\"s\(file.version)\""
        var headers = ["Content-Type": "application/vnd.sqlite3", "ETag": etag, "Accept-Ranges": "bytes",
                       "Repr-Digest": "sha-256=:\(file.digest.base64EncodedString()):"]
        // `Range: bytes=START-[END]`, honoured when If-Range is absent or names this file.
        if let range, range.hasPrefix("bytes="), ifRange == nil || ifRange == etag {
            let parts = range.dropFirst(6).split(separator: "-", omittingEmptySubsequences: false)
            if parts.count == 2, let start = Int(parts[0]), start < bytes.count {
                let end = min(bytes.count - 1, Int(parts[1]) ?? bytes.count - 1)
                headers["Content-Range"] = "bytes \(start)-\(end)/\(bytes.count)"
                headers["Content-Length"] = String(end - start + 1)
                return (206, headers, bytes.subdata(in: start..<(end + 1)))
            }
        }
        headers["Content-Length"] = String(bytes.count)
        return (200, headers, bytes)
    }
}
