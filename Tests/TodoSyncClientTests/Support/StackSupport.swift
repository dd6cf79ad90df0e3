import Foundation
import GRDB
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The real stack that `scripts/test.sh` starts (nginx → FastCGI responders → MariaDB).
enum Stack {
    /// The stack's base URL; the test is skipped (with the reason) when not run by test.sh.
    static func baseURL() throws -> URL {
        guard let text = ProcessInfo.processInfo.environment["TODOSYNC_TEST_BASE_URL"], let url = URL(string: text) else {
            throw XCTSkip("TODOSYNC_TEST_BASE_URL is not set: these tests run against the stack that ./scripts/test.sh starts")
        }
        return url
    }

    /// Runs `scripts/stack.sh ARGS` for the test stack (e.g. `purge --retention-seconds 0`).
    static func command(_ arguments: [String]) throws {
        _ = try output(arguments)
    }

    /// Runs `scripts/stack.sh ARGS` for the test stack; its output (stdout and stderr).
    static func output(_ arguments: [String]) throws -> String {
        guard let stack = ProcessInfo.processInfo.environment["TODOSYNC_TEST_STACK"] else {
            throw XCTSkip("TODOSYNC_TEST_STACK is not set")
        }
        let result = try runProcess(stack, arguments)
        guard result.status == 0 else { throw TestFailure("stack \(arguments) failed: \(result.output)") }
        return result.output
    }

    /// The client executable built next to the test bundle.
    static var clientBinary: String {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [bundleDirectory, bundleDirectory.deletingLastPathComponent()] {
            let path = candidate.appendingPathComponent("todosync-client").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return Bundle.main.bundleURL.appendingPathComponent("todosync-client").path
    }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

struct ProcessResult {
    var status: Int32
    var killedBySignal: Int32?
    var output: String
}

/// Runs a program to completion, capturing stdout and stderr together.
func runProcess(_ path: String, _ arguments: [String], environment: [String: String] = [:]) throws -> ProcessResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    env.merge(environment) { $1 }
    process.environment = env
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    let signal = process.terminationReason == .uncaughtSignal ? process.terminationStatus : nil
    return ProcessResult(status: process.terminationStatus, killedBySignal: signal, output: String(decoding: data, as: UTF8.self))
}

/// A transport that can lose responses after the server has handled the request, the way a
/// dropped connection does.
final class LossyTransport: HTTPTransport, @unchecked Sendable {
    private let inner = URLSessionTransport()
    private let lock = NSLock()
    private var toLose: [String: Int] = [:]
    private(set) var requests: [String] = []

    /// Loses the responses of the next `count` requests whose path contains `path`.
    func loseResponses(of path: String, count: Int = 1) {
        lock.lock()
        toLose[path, default: 0] += count
        lock.unlock()
    }

    /// Notes the request; true when its response is to be lost.
    private func record(_ request: URLRequest) -> Bool {
        let path = request.url?.path ?? ""
        lock.lock()
        defer { lock.unlock() }
        requests.append("\(request.httpMethod ?? "GET") \(path)")
        guard let lose = toLose.first(where: { path.contains($0.key) && $0.value > 0 }) else { return false }
        toLose[lose.key] = lose.value - 1
        return true
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let result = try await inner.send(request)
        if record(request) { throw URLError(.networkConnectionLost) }
        return result
    }
}

/// One simulated device: its own SQLite file and client.
final class Device: @unchecked Sendable {
    let name: String
    let path: String
    let store: LocalStore
    let client: TodoSyncClient

    init(_ name: String, directory: URL, baseURL: URL, transport: any HTTPTransport = URLSessionTransport(),
         hooks: SyncHooks = SyncHooks(), tokenRefresh: (@Sendable () async throws -> String?)? = nil,
         schemaVersion: Int = SchemaVersion.current, useSnapshot: Bool = true,
         retry: RetryPolicy = RetryPolicy(maxAttempts: 8, initialDelay: 0.1, maxDelay: 2)) throws {
        self.name = name
        path = directory.appendingPathComponent("\(name).sqlite").path
        store = try LocalStore(path: path)
        client = TodoSyncClient(
            store: store, baseURL: baseURL, transport: transport,
            retry: retry, tokenRefresh: tokenRefresh, hooks: hooks,
            schemaVersion: schemaVersion, useSnapshot: useSnapshot)
    }

    var token: String { get throws { try XCTUnwrap(store.token()) } }
}

/// A fresh account per test; devices share a temporary directory.
class StackTestCase: XCTestCase {
    var directory: URL!
    var baseURL: URL!
    var email = ""
    let password = "correct horse battery"

    override func setUpWithError() throws {
        baseURL = try Stack.baseURL()
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        email = "client-\(UUID().uuidString.prefix(8).lowercased())@example.com"
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// A device logged in to this test's account (the first one registers it).
    func device(_ name: String, transport: any HTTPTransport = URLSessionTransport(), hooks: SyncHooks = SyncHooks(),
                tokenRefresh: (@Sendable () async throws -> String?)? = nil,
                schemaVersion: Int = SchemaVersion.current, useSnapshot: Bool = true,
                retry: RetryPolicy = RetryPolicy(maxAttempts: 8, initialDelay: 0.1, maxDelay: 2)) async throws -> Device {
        let device = try Device(name, directory: directory, baseURL: baseURL, transport: transport, hooks: hooks,
                                tokenRefresh: tokenRefresh, schemaVersion: schemaVersion, useSnapshot: useSnapshot, retry: retry)
        do {
            try await device.client.login(email: email, password: password)
        } catch SyncError.server(status: 401, _, _, _) {
            try await device.client.register(email: email, password: password)
        }
        return device
    }

    /// Runs the terminal client on the store at `path` against the stack (`crashAt`:
    /// `TODOSYNC_CLIENT_CRASH_AT`).
    func cli(_ arguments: [String], path: String, crashAt: String? = nil,
             environment extra: [String: String] = [:]) throws -> ProcessResult {
        var environment = ["TODOSYNC_SERVER": baseURL.absoluteString, "TODOSYNC_PASSWORD": password]
        if let crashAt { environment["TODOSYNC_CLIENT_CRASH_AT"] = crashAt }
        environment.merge(extra) { $1 }
        let binary = Stack.clientBinary
        guard FileManager.default.isExecutableFile(atPath: binary) else {
            throw TestFailure("todosync-client is not built at \(binary) (swift build builds it with the tests)")
        }
        return try runProcess(binary, arguments + ["--db", path], environment: environment)
    }

    // MARK: The server's view, through REST

    func get(_ path: String, token: String) async throws -> JSONObject {
        var request = URLRequest(url: URL(string: baseURL.absoluteString + path)!)
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, response) = try await URLSessionTransport().send(request)
        guard response.statusCode == 200 else {
            throw TestFailure("GET \(path): HTTP \(response.statusCode) \(String(decoding: data, as: UTF8.self))")
        }
        return try XCTUnwrap(JSONParser.parse(Array(data)).objectValue)
    }

    func serverItems(_ path: String, token: String) async throws -> [JSONObject] {
        try await get(path, token: token)["items"]?.arrayValue?.compactMap(\.objectValue) ?? []
    }

    /// Live tags, todos (2026-11-01…2026-12-31) and stats (those months) on the server.
    func serverState(token: String) async throws -> (tags: [JSONObject], todos: [JSONObject], stats: [JSONObject]) {
        let tags = try await serverItems("/api/v1/tags", token: token)
        // REST answers at the current schema version; these devices speak version 1, without `notes`.
        let todos = try await serverItems("/api/v1/todos?from=2026-11-01&to=2026-12-31", token: token)
            .map { $0.filter { $0.key != "notes" } }
        let stats = try await serverItems("/api/v1/daily-stats?month=2026-11", token: token)
            + serverItems("/api/v1/daily-stats?month=2026-12", token: token)
        return (tags, todos, stats)
    }

    /// Every field of every live record on the device equals the server's, and neither has
    /// records the other lacks.
    func assertEqualsServer(_ device: Device, file: StaticString = #filePath, line: UInt = #line) async throws {
        let server = try await serverState(token: try device.token)
        let tags = try device.store.tags()
        XCTAssertEqual(tags.count, server.tags.count, "\(device.name): tag count", file: file, line: line)
        for record in server.tags {
            guard let tag = tags.first(where: { $0.serverID == record["id"]?.int64Value }) else {
                XCTFail("\(device.name): missing tag \(record)", file: file, line: line)
                continue
            }
            XCTAssertEqual(tag.name, record["name"]?.stringValue, "\(device.name) tag \(tag.localID)", file: file, line: line)
            XCTAssertEqual(tag.color, record["color"]?.stringValue, file: file, line: line)
            XCTAssertEqual(tag.version, record["version"]?.int64Value, file: file, line: line)
            XCTAssertEqual(tag.clientID, record["clientId"]?.stringValue, file: file, line: line)
            XCTAssertEqual(tag.createdAt, record["createdAt"]?.stringValue, file: file, line: line)
            XCTAssertEqual(tag.updatedAt, record["updatedAt"]?.stringValue, file: file, line: line)
        }
        let todos = try device.store.todos(from: Day("2026-11-01")!, to: Day("2026-12-31")!)
        XCTAssertEqual(todos.count, server.todos.count, "\(device.name): todo count", file: file, line: line)
        let serverIDs = Set(server.todos.compactMap { $0["id"]?.int64Value })
        for todo in todos where todo.serverID.map({ !serverIDs.contains($0) }) ?? true {
            let log = try await device.store.pool.read { db in
                try Row.fetchAll(db, sql: "SELECT * FROM operationLog WHERE recordLocalId = ? AND entity = 'todo' ORDER BY rowid", arguments: [todo.localID])
                    .map { "\($0["action"] as String) \($0["status"] as String) \($0["fields"] as String)" }
            }
            XCTFail("\(device.name): todo \(todo) is not on the server; its operations: \(log)", file: file, line: line)
        }
        XCTAssertEqual(todos.map(\.serverID), server.todos.map { $0["id"]?.int64Value }, "\(device.name): same todos in the same order",
                       file: file, line: line)
        for record in server.todos {
            guard let todo = todos.first(where: { $0.serverID == record["id"]?.int64Value }) else { continue }
            let local: JSONObject = [
                "id": .optionalInt(todo.serverID), "clientId": .optionalString(todo.clientID), "title": .string(todo.title),
                "raw": .string(todo.raw), "remindAt": .optionalString(todo.remindAt), "isImportant": .bool(todo.isImportant),
                "isLife": .bool(todo.isLife),
                "tagId": .optionalInt(todo.tagServerID), "difficulty": .int(todo.difficulty),
                "estimatedTime": .int(todo.estimatedTime), "deadline": .string(todo.deadline.description),
                "isCompleted": .bool(todo.isCompleted), "version": .optionalInt(todo.version),
                "createdAt": .string(todo.createdAt), "updatedAt": .optionalString(todo.updatedAt), "deletedAt": .null,
            ]
            if local != record {
                let differing = record.keys.filter { local[$0] != record[$0] }.sorted()
                let log = try await device.store.pool.read { db in
                    try Row.fetchAll(db, sql: "SELECT * FROM operationLog WHERE recordLocalId = ? AND entity = 'todo' ORDER BY rowid", arguments: [todo.localID])
                        .map { "\($0["action"] as String) \($0["status"] as String) \($0["fields"] as String) \($0["conflictingFields"] as String)" }
                }
                let tagRows = try await device.store.pool.read { db in
                    try Row.fetchAll(db, sql: "SELECT localId, id, name, isDeleted, deletedAt, version FROM tag WHERE id = ? OR localId = ?",
                                     arguments: [record["tagId"]?.int64Value, todo.tagLocalID]).map(\.description)
                }
                let tagLog = try await device.store.pool.read { db in
                    try Row.fetchAll(db, sql: "SELECT action, status, fields FROM operationLog WHERE entity = 'tag' AND recordLocalId IN (SELECT localId FROM tag WHERE id = ?)",
                                     arguments: [record["tagId"]?.int64Value]).map(\.description)
                }
                XCTFail("\(device.name): tag rows \(tagRows), tag ops \(tagLog)", file: file, line: line)
                XCTFail("\(device.name): todo \(todo.localID) differs in \(differing): local \(differing.map { local[$0]! }) server \(differing.map { record[$0]! }); its operations: \(log)",
                        file: file, line: line)
            }
        }
        let stats = try device.store.dailyStats()
        XCTAssertEqual(stats.count, server.stats.count, "\(device.name): stat count", file: file, line: line)
        for record in server.stats {
            guard let stat = stats.first(where: { $0.serverID == record["id"]?.int64Value }) else {
                XCTFail("\(device.name): missing stat \(record["date"] ?? .null)", file: file, line: line)
                continue
            }
            XCTAssertEqual(JSONText.object(stat.json), record, "\(device.name): stat \(stat.date)", file: file, line: line)
        }
        XCTAssertEqual(try device.store.pendingCount(), 0, "\(device.name): nothing left to send", file: file, line: line)
    }
}
