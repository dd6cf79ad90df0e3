import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The account calls of the library in process (issue 24, client side), over a transport that
/// answers what each test says: a wrong password is not a sign-out, a refused token signs the
/// store out and keeps its queue, the store's files go only after the server's 204, an export
/// replaces its file whole or not at all. `AccountStackTests` runs the same through the stack.
final class AccountClientTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("account-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A store signed in as user 7 with token `t1`, and one todo queued.
    func signedInStore() throws -> LocalStore {
        let store = try LocalStore(path: directory.appendingPathComponent("me.sqlite").path)
        try store.signIn(userID: 7, email: "me@example.com", token: "t1")
        try store.addTodo(NewTodo(title: "queued", deadline: Day("2026-11-26")!))
        return store
    }

    func client(_ store: LocalStore, _ transport: ScriptedTransport) -> TodoSyncClient {
        TodoSyncClient(store: store, baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                       retry: RetryPolicy(maxAttempts: 3, initialDelay: 0.001, maxDelay: 0.01))
    }

    func files(_ store: LocalStore) -> [String] {
        [store.path, store.path + "-wal", store.path + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
    }

    static func wrongPassword(_ field: String) -> ScriptedTransport.Answer {
        ScriptedTransport.Answer(status: 401, body: #"{"error":{"code":"unauthorized","message":"The password is incorrect.","details":[{"field":""#
            + field + #"","problem":"is incorrect"}]}}"#)
    }
    static let refused = ScriptedTransport.Answer(status: 401, body: #"{"error":{"code":"unauthorized","message":"Authentication required."}}"#)

    func testAWrongPasswordIsItsOwnErrorAndKeepsTheDeviceSignedIn() async throws {
        let store = try signedInStore()
        let transport = ScriptedTransport { request in
            request.url!.path.hasSuffix("/password") ? Self.wrongPassword("currentPassword") : Self.wrongPassword("password")
        }
        let client = client(store, transport)
        do {
            try await client.changePassword(current: "not it", new: "a new password")
            XCTFail("a wrong current password changed it")
        } catch SyncError.wrongPassword(let field) {
            XCTAssertEqual(field, "currentPassword")
        }
        do {
            try await client.deleteAccount(password: "not it")
            XCTFail("a wrong password deleted the account")
        } catch let error as SyncError {
            XCTAssertEqual(error, .wrongPassword(field: "password"))
            XCTAssertTrue(error.description.hasPrefix("wrong password"), error.description)
        }
        XCTAssertEqual(try store.token(), "t1", "still signed in")
        XCTAssertFalse(try store.status().signedOut)
        XCTAssertEqual(files(store).count, 3, "the store, its -wal and -shm are all kept")
        XCTAssertEqual(try store.pendingCount(), 1)
        XCTAssertEqual(transport.requests, ["POST /api/v1/account/password", "POST /api/v1/account/delete"],
                       "a wrong password is an answer, not a reason to retry")
    }

    func testARefusedTokenSignsTheStoreOutAndKeepsItsQueue() async throws {
        let store = try signedInStore()
        let client = client(store, ScriptedTransport { _ in Self.refused })
        for attempt in 1...2 {
            do {
                try await client.sync()
                XCTFail("synced with a refused token")
            } catch let error as SyncError {
                XCTAssertEqual(error, .unauthorized, "attempt \(attempt)")
                XCTAssertEqual(error.description, "signed out: log in again (changes stay queued)")
            }
        }
        let status = try store.status()
        XCTAssertTrue(status.signedOut)
        XCTAssertNil(try store.token(), "the dead token is forgotten")
        XCTAssertEqual(status.pending, 1, "the queued change stays")
        XCTAssertEqual(try store.allTodos().map(\.title), ["queued"])
        let calls: [() async throws -> Void] = [{ try await client.changePassword(current: "x", new: "yyyyyyyy") },
                                                { _ = try await client.sessions() }]
        for call in calls {
            do {
                try await call()
                XCTFail("an account call went through signed out")
            } catch let error as SyncError {
                XCTAssertEqual(error, .unauthorized)
            }
        }
        // A store that never logged in is not "signed out".
        let fresh = try LocalStore(path: directory.appendingPathComponent("new.sqlite").path)
        XCTAssertFalse(try fresh.status().signedOut)
    }

    func testDeleteAccountRemovesTheStoreOnlyAfterTheServersAnswer() async throws {
        let store = try signedInStore()
        XCTAssertEqual(files(store).count, 3)
        // The connection breaks: the request is not resent (a repeat cannot tell a lost 204),
        // and nothing local goes.
        let broken = ScriptedTransport { _ in throw URLError(.networkConnectionLost) }
        do {
            try await client(store, broken).deleteAccount(password: "right")
            XCTFail("deleted without an answer")
        } catch let error as SyncError {
            XCTAssertTrue(error.isOffline, "\(error)")
        }
        XCTAssertEqual(broken.requests.count, 1, "not resent")
        for answer in [ScriptedTransport.Answer(status: 502, body: ""), Self.refused] {
            let transport = ScriptedTransport { _ in answer }
            do {
                try await client(store, transport).deleteAccount(password: "right")
                XCTFail("deleted on \(answer.status)")
            } catch {}
            XCTAssertEqual(transport.requests.count, 1, "\(answer.status): not resent")
        }
        XCTAssertEqual(files(store).count, 3, "every failure keeps the store, its -wal and -shm")
        XCTAssertEqual(try store.pendingCount(), 1)

        try store.setToken("t2")
        let server = ScriptedTransport { request in
            XCTAssertEqual(String(decoding: request.httpBody ?? Data(), as: UTF8.self), #"{"password":"right"}"#)
            XCTAssertEqual(request.value(forHTTPHeaderField: "Authorization"), "Bearer t2")
            return ScriptedTransport.Answer(status: 204, body: "")
        }
        try await client(store, server).deleteAccount(password: "right")
        XCTAssertEqual(files(store), [], "after the 204 the store, its -wal and -shm are gone")
        XCTAssertFalse(FileManager.default.fileExists(atPath: store.path + ".sync-lock"))
    }

    func testAnExportReplacesItsFileWholeOrNotAtAll() async throws {
        let store = try signedInStore()
        let target = directory.appendingPathComponent("export.json")
        try Data("an earlier export".utf8).write(to: target)
        let export = #"{"user":{"id":7,"email":"me@example.com","createdAt":"2026-11-26T10:00:00.000Z"},"tags":[],"todos":[],"dailyStats":[]}"#
        for failing in [ScriptedTransport { _ in throw URLError(.networkConnectionLost) },
                        ScriptedTransport { _ in ScriptedTransport.Answer(status: 500, body: #"{"error":{"code":"internal","message":"x"}}"#) }] {
            do {
                try await client(store, failing).exportAccount(to: target)
                XCTFail("an export that failed succeeded")
            } catch {}
            XCTAssertEqual(try String(contentsOf: target, encoding: .utf8), "an earlier export", "the earlier file is untouched")
        }
        let bytes = try await client(store, ScriptedTransport { _ in ScriptedTransport.Answer(status: 200, body: export) }).exportAccount(to: target)
        XCTAssertEqual(try String(contentsOf: target, encoding: .utf8), export)
        XCTAssertEqual(bytes, Int64(export.utf8.count))
        let left = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".part") }
        XCTAssertEqual(left, [], "no temporary file is left behind")
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: target.path)[.posixPermissions] as? Int, 0o600)
    }

    func testSessionsAreTypedAndAnUnknownIDIsNotFound() async throws {
        let store = try signedInStore()
        let transport = ScriptedTransport { request in
            if request.httpMethod == "GET" {
                return ScriptedTransport.Answer(status: 200, body: #"{"items":[{"id":"ab12","createdAt":"2026-11-26T10:00:01.000Z","lastUsedAt":"2026-11-26T10:05:00.000Z","current":true},{"id":"cd34","createdAt":"2026-11-25T09:00:00.000Z","lastUsedAt":"2026-11-25T09:00:00.000Z","current":false}]}"#)
            }
            if request.url!.path.hasSuffix("/cd34") { return ScriptedTransport.Answer(status: 204, body: "") }
            return ScriptedTransport.Answer(status: 404, body: #"{"error":{"code":"not_found","message":"No such session."}}"#)
        }
        let client = client(store, transport)
        let sessions = try await client.sessions()
        XCTAssertEqual(sessions, [
            AccountSession(id: "ab12", createdAt: "2026-11-26T10:00:01.000Z", lastUsedAt: "2026-11-26T10:05:00.000Z", current: true),
            AccountSession(id: "cd34", createdAt: "2026-11-25T09:00:00.000Z", lastUsedAt: "2026-11-25T09:00:00.000Z", current: false),
        ])
        try await client.revokeSession(id: "cd34")
        do {
            try await client.revokeSession(id: "ef/56")
            XCTFail("an unknown session was revoked")
        } catch SyncError.server(let status, let code, _, _) {
            XCTAssertEqual(status, 404)
            XCTAssertEqual(code, "not_found")
        }
        let path = try XCTUnwrap(transport.requests.last)
        XCTAssertTrue(path.hasPrefix("DELETE /api/v1/account/sessions/ef%"), path)
        XCTAssertFalse(path.dropFirst("DELETE /api/v1/account/sessions/".count).contains("/"), "the id stays one path segment: \(path)")
        XCTAssertEqual(try store.token(), "t1")
    }
}

/// A transport whose answers come from the test: each request is recorded, then `answer` says
/// what comes back (or throws, as a broken connection).
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    struct Answer {
        var status: Int
        var body: String
    }

    private let lock = NSLock()
    private var seen: [String] = []
    private let answer: @Sendable (URLRequest) throws -> Answer

    init(_ answer: @escaping @Sendable (URLRequest) throws -> Answer) { self.answer = answer }

    /// Every request as `METHOD path` (the path as sent, percent-encoding kept).
    var requests: [String] { lock.withLock { seen } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let path = URLComponents(url: request.url!, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? ""
        lock.withLock { seen.append("\(request.httpMethod ?? "GET") \(path)") }
        let answer = try answer(request)
        let response = HTTPURLResponse(url: request.url!, statusCode: answer.status, httpVersion: "HTTP/1.1",
                                       headerFields: ["Content-Type": "application/json"])!
        return (Data(answer.body.utf8), response)
    }
}
