import Foundation
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession
import XCTest

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client generated from `openapi.yaml` (Generated/, by scripts/generate-openapi-client.sh)
/// talks to the real test stack (nginx → responder → MariaDB) and decodes real answers of every
/// route, success and error alike. A field the document leaves out, mistypes or marks required
/// when the server omits it, a missing required header (ETag, WWW-Authenticate) or an
/// undocumented status fails here: the generated decoders are strict about what the document
/// says.
final class GeneratedClientTests: XCTestCase {
    private static let repoRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    // MARK: - The generated code is current

    func testGeneratedCodeIsFromTheCurrentOpenAPIYAML() throws {
        let spec = Self.repoRoot.appendingPathComponent("openapi.yaml").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
        process.arguments = [spec]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "sha256sum \(spec) failed")
        let sha = String(decoding: output, as: UTF8.self).split(separator: " ").first.map(String.init)
        XCTAssertEqual(
            sha, generatedFromOpenAPISHA256,
            "openapi.yaml changed since Tests/OpenAPIClientTests/Generated was made: run scripts/generate-openapi-client.sh")
    }

    // MARK: - Auth, health and errors

    func testAuthRoutesAndTheirErrors() async throws {
        let anonymous = try Self.client(token: nil)
        let health = try await anonymous.healthCheck()
        XCTAssertEqual(try health.ok.body.json.status, .ok)

        let email = "oapi-\(UUID().uuidString.prefix(8))@Example.com"
        let password = "correct horse battery"
        let registered = try await Self.riding429 { try await anonymous.register(body: .json(.init(email: email, password: password))) }
        let session = try registered.created.body.json
        XCTAssertGreaterThan(session.user.id, 0)
        XCTAssertFalse(session.token.isEmpty)

        // 409 email_taken: compared case-insensitively.
        let again = try await Self.riding429 {
            try await anonymous.register(body: .json(.init(email: email.lowercased(), password: password)))
        }
        XCTAssertEqual(try again.conflict.body.json.value1.error.code, "email_taken")

        // 422 with details naming the field.
        let short = try await Self.riding429 {
            try await anonymous.register(body: .json(.init(email: "x\(email)", password: "short")))
        }
        let problem = try short.unprocessableContent.body.json.value1.error
        XCTAssertEqual(problem.code, "validation_failed")
        XCTAssertEqual(problem.details?.map(\.field), ["password"])

        let loggedIn = try await Self.riding429 {
            try await anonymous.login(body: .json(.init(email: email.uppercased(), password: password)))
        }
        let login = try loggedIn.ok.body.json
        XCTAssertEqual(login.user.id, session.user.id)

        let wrong = try await Self.riding429 {
            try await anonymous.login(body: .json(.init(email: email, password: "not the password")))
        }
        let unauthorized = try wrong.unauthorized
        XCTAssertEqual(unauthorized.headers.wwwAuthenticate, .bearer)
        XCTAssertEqual(try unauthorized.body.json.value1.error.code, "unauthorized")

        let user = try Self.client(token: login.token)
        let loggedOut = try await user.logout()
        _ = try loggedOut.noContent
        let afterLogout = try await user.listTags()
        XCTAssertEqual(try afterLogout.unauthorized.body.json.value1.error.code, "unauthorized")
    }

    // MARK: - Tags, todos, quick-add, daily stats

    func testTagsTodosQuickAddAndDailyStats() async throws {
        let api = try await Self.newUser()
        let date = "2031-05-17"

        // Tags: create (201, ETag), the same clientId again (200, no duplicate), list, get.
        let tagClientId = UUID().uuidString.lowercased()
        let created = try await api.createTag(body: .json(.init(name: "Work", color: "#ff8800", clientId: tagClientId)))
        let createdTag = try created.created
        let tag = try createdTag.body.json.value1
        XCTAssertEqual(createdTag.headers.eTag, "\"\(tag.version)\"")
        XCTAssertEqual(tag.color, "#FF8800")
        XCTAssertEqual(tag.clientId, tagClientId)
        XCTAssertNil(tag.deletedAt)
        let retried = try await api.createTag(body: .json(.init(name: "Work", color: "#ff8800", clientId: tagClientId)))
        XCTAssertEqual(try retried.ok.body.json.id, tag.id)
        let listed = try await api.listTags()
        XCTAssertEqual(try listed.ok.body.json.items.map(\.value1.id), [tag.id])
        let got = try await api.getTag(path: .init(id: tag.id))
        XCTAssertEqual(try got.ok.body.json.value1.name, "Work")

        // PATCH with a stale If-Match: 412 with the current tag; with the right one: 200. The
        // bare form (`7`): the runtime percent-encodes header values, so `"7"` would arrive as
        // `%227%22`, which names no version (412).
        let stale = try await api.updateTag(
            path: .init(id: tag.id), headers: .init(ifMatch: "\(tag.version + 100)"), body: .json(.init(name: "Office")))
        let mismatch = try stale.preconditionFailed
        XCTAssertEqual(try mismatch.body.json.value1.error.value1.code, "version_mismatch")
        XCTAssertEqual(try mismatch.body.json.value2.current?.value1.name, "Work")
        let renamed = try await api.updateTag(
            path: .init(id: tag.id), headers: .init(ifMatch: "\(tag.version)"), body: .json(.init(name: "Office")))
        let office = try renamed.ok.body.json.value1
        XCTAssertEqual(office.name, "Office")
        XCTAssertGreaterThan(office.version, tag.version)

        // Todos: create with every field, list by date and by range, get, patch.
        let todoCreated = try await api.createTodo(
            body: .json(.init(
                title: "Write report", isImportant: true, isLife: false, tagId: tag.id, difficulty: 3,
                estimatedTime: 90, deadline: date)))
        let todo = try todoCreated.created.body.json.value1
        XCTAssertEqual(todo.raw, "Write report")
        XCTAssertEqual(todo.tagId, tag.id)
        XCTAssertNil(todo.clientId)
        XCTAssertEqual(todo.deadline, date)

        // Quick-add: one todo per non-blank line, tokens parsed.
        let quick = try await api.quickAddTodos(
            body: .json(.init(text: "!Call the bank 30m *2\n\nGym @life 1h\nRead #office", date: date)))
        let added = try quick.created.body.json.items.map(\.value1)
        XCTAssertEqual(added.map(\.title), ["Call the bank", "Gym", "Read"])
        XCTAssertEqual(added.map(\.isImportant), [true, false, false])
        XCTAssertEqual(added.map(\.estimatedTime), [30, 60, 0])
        XCTAssertEqual(added[1].isLife, true)
        XCTAssertEqual(added[2].tagId, tag.id)

        let byDate = try await api.listTodos(query: .init(date: date)).ok.body.json.items.map(\.value1)
        XCTAssertEqual(Set(byDate.map(\.id)), Set([todo.id] + added.map(\.id)))
        XCTAssertEqual(byDate.first?.isImportant, true)
        let byRange = try await api.listTodos(query: .init(from: "2031-05-01", to: "2031-05-31")).ok.body.json.items
        XCTAssertEqual(byRange.count, 4)
        let neither = try await api.listTodos(query: .init())
        XCTAssertEqual(try neither.badRequest.body.json.value1.error.code, "bad_request")

        let fetched = try await api.getTodo(path: .init(id: todo.id))
        XCTAssertEqual(try fetched.ok.headers.eTag, "\"\(todo.version)\"")
        let completed = try await api.updateTodo(path: .init(id: todo.id), body: .json(.init(isCompleted: true)))
        XCTAssertEqual(try completed.ok.body.json.value1.isCompleted, true)

        // Daily stats of that date and month: the completed todo counts (3 × 90 / 60 = 4.5).
        let stat = try await api.getDailyStat(path: .init(date: date)).ok.body.json.value1
        XCTAssertEqual(stat.todoCount, 4)
        XCTAssertEqual(stat.completedCount, 1)
        XCTAssertEqual(stat.productivityNum, 4.5)
        XCTAssertEqual(stat.balance.title, .workHeavy)
        XCTAssertEqual(stat.tagStats.map(\.tagId), [tag.id])
        XCTAssertEqual(stat.tagStats.first?.name, "Office")
        XCTAssertEqual(stat.center.x, -1)
        let month = try await api.listDailyStats(query: .init(month: "2031-05")).ok.body.json.items
        XCTAssertEqual(month.map(\.value1.date), [date])
        let noStat = try await api.getDailyStat(path: .init(date: "2031-06-01"))
        XCTAssertEqual(try noStat.notFound.body.json.value1.error.code, "not_found")

        // Deletes: 204, then 404; the tag's todos lose it.
        _ = try await api.deleteTodo(path: .init(id: todo.id)).noContent
        let gone = try await api.getTodo(path: .init(id: todo.id))
        XCTAssertEqual(try gone.notFound.body.json.value1.error.code, "not_found")
        _ = try await api.deleteTag(path: .init(id: tag.id)).noContent
        let untagged = try await api.getTodo(path: .init(id: added[2].id)).ok.body.json.value1
        XCTAssertNil(untagged.tagId)
    }

    // MARK: - Sync

    func testPushAndPullPages() async throws {
        let api = try await Self.newUser()
        let deviceId = UUID().uuidString.lowercased()
        let tagClientId = UUID().uuidString.lowercased()
        let todoClientId = UUID().uuidString.lowercased()
        let opIds = (0..<3).map { _ in UUID().uuidString.lowercased() }
        let operations: Components.Schemas.PushRequest.OperationsPayload = [
            .init(value1: .init(
                opId: opIds[0], entity: .tag, action: .create, clientId: tagClientId,
                data: .init(value1: .init(name: "Home", color: "#00aa55")))),
            .init(value1: .init(
                opId: opIds[1], entity: .todo, action: .create, clientId: todoClientId,
                data: .init(value3: .init(
                    value1: .init(title: "Water plants", deadline: "2031-07-01"),
                    value2: .init(tagClientId: tagClientId))))),
            .init(value1: .init(
                opId: opIds[2], entity: .todo, action: .update, id: 999_999_999,
                data: .init(value3: .init(value1: .init(isCompleted: true), value2: .init())))),
        ]
        let request = Components.Schemas.PushRequest(deviceId: deviceId, conflictPolicy: .reject, operations: operations)
        let results = try await api.syncPush(body: .json(request)).ok.body.json.results
        XCTAssertEqual(results.map(\.opId), opIds)
        XCTAssertEqual(results.map(\.status), [.applied, .applied, .rejected])
        let pushedTag = try XCTUnwrap(results[0].record?.value1, "a tag create's record decodes as a Tag")
        let pushedTodo = try XCTUnwrap(results[1].record?.value2, "a todo create's record decodes as a Todo")
        XCTAssertEqual(pushedTodo.tagId, pushedTag.id)
        XCTAssertEqual(results[1].id, pushedTodo.id)
        XCTAssertEqual(results[1].version, pushedTodo.version)
        XCTAssertNil(results[0].error)
        XCTAssertNil(results[2].record, "a rejected result's record is null")
        XCTAssertNil(results[2].version)
        XCTAssertEqual(results[2].error?.code, "not_found")

        // Replaying the same opIds returns the stored results.
        let replay = try await api.syncPush(body: .json(request)).ok.body.json.results
        XCTAssertEqual(replay, results)

        // A stale update: `reject` gives `conflict` with the server copy; `merge` without
        // `base` keeps the server's differing values and names them.
        let stale = Components.Schemas.PushOperation(
            opId: UUID().uuidString, entity: .tag, action: .update, id: pushedTag.id, baseVersion: 0,
            data: .init(value2: .init(name: "Garden")))
        let conflict = try await api.syncPush(
            body: .json(.init(deviceId: deviceId, operations: [.init(value1: stale)]))).ok.body.json.results[0]
        XCTAssertEqual(conflict.status, .conflict)
        XCTAssertEqual(conflict.record?.value1?.name, "Home")
        var mergeOp = stale
        mergeOp.opId = UUID().uuidString
        let merged = try await api.syncPush(
            body: .json(.init(deviceId: deviceId, conflictPolicy: .merge, operations: [.init(value1: mergeOp)])))
            .ok.body.json.results[0]
        XCTAssertEqual(merged.status, .merged)
        XCTAssertEqual(merged.conflictingFields, ["name"])

        // A first pull in pages of one record: tags, todos and the derived stat, then a cursor.
        var cursor: String?
        var tags: [Components.Schemas.Tag] = []
        var todos: [Components.Schemas.Todo] = []
        var stats: [Components.Schemas.DailyStat] = []
        for page in 1...10 {
            let body = try await api.syncPull(query: .init(cursor: cursor, limit: 1)).ok.body.json
            tags += body.changes.tags.upserted.map(\.value1)
            todos += body.changes.todos.upserted.map(\.value1)
            stats += body.changes.dailyStats.upserted.map(\.value1)
            XCTAssertTrue(body.changes.todos.deleted.isEmpty, "a first pull carries no tombstones")
            cursor = body.cursor
            if !body.hasMore { break }
            XCTAssertLessThan(page, 10, "pull did not finish in 10 pages of one record")
        }
        XCTAssertEqual(Set(tags.map(\.id)), [pushedTag.id])
        XCTAssertEqual(todos.map(\.id), [pushedTodo.id])
        XCTAssertEqual(stats.map(\.date), ["2031-07-01"])

        // After a delete, a pull from the cursor (with a deviceId) carries the tombstones.
        _ = try await api.deleteTodo(path: .init(id: pushedTodo.id)).noContent
        let changes = try await api.syncPull(query: .init(cursor: cursor, deviceId: UUID().uuidString)).ok.body.json
        XCTAssertEqual(changes.changes.todos.deleted.map(\.id), [pushedTodo.id])
        XCTAssertNotNil(changes.changes.todos.deleted.first?.deletedAt)
        XCTAssertEqual(changes.changes.dailyStats.deleted.count, 1)
        XCTAssertFalse(changes.hasMore)

        let garbage = try await api.syncPull(query: .init(cursor: "not-a-cursor"))
        XCTAssertEqual(try garbage.badRequest.body.json.value1.error.code, "bad_request")
        let badLimit = try await api.syncPull(query: .init(limit: 1001))
        XCTAssertEqual(try badLimit.badRequest.body.json.value1.error.code, "bad_request")
    }

    // MARK: - Account

    func testAccountRoutes() async throws {
        let anonymous = try Self.client(token: nil)
        let email = "oapi-\(UUID().uuidString.prefix(12))@example.com"
        let password = "correct horse battery"
        let registered = try await Self.riding429 { try await anonymous.register(body: .json(.init(email: email, password: password))) }
        let phone = try Self.client(token: try registered.created.body.json.token)
        let loggedIn = try await Self.riding429 { try await anonymous.login(body: .json(.init(email: email, password: password))) }
        let laptop = try Self.client(token: try loggedIn.ok.body.json.token)
        _ = try await phone.createTodo(body: .json(.init(title: "Export me", deadline: "2031-05-18"))).created

        // Sessions: two, newest first; the laptop's is current for it.
        let sessions = try await laptop.listSessions().ok.body.json.items
        XCTAssertEqual(sessions.map(\.current), [true, false])
        XCTAssertGreaterThanOrEqual(sessions[0].createdAt, sessions[1].createdAt)
        let unknown = try await phone.revokeSession(path: .init(id: String(repeating: "f", count: 32)))
        XCTAssertEqual(try unknown.notFound.body.json.value1.error.code, "not_found")

        // Wrong current password: 401 naming the field; a short new one: 422.
        let wrong = try await phone.changePassword(body: .json(.init(currentPassword: "nope", newPassword: "long enough")))
        XCTAssertEqual(try wrong.unauthorized.body.json.value1.error.details?.map(\.field), ["currentPassword"])
        let short = try await phone.changePassword(body: .json(.init(currentPassword: password, newPassword: "short")))
        XCTAssertEqual(try short.unprocessableContent.body.json.value1.error.details?.map(\.field), ["newPassword"])

        // Export: the user and the live todo.
        let export = try await phone.exportAccount().ok.body.json
        XCTAssertEqual(export.user.email, email)
        XCTAssertEqual(export.todos.map(\.value1.title), ["Export me"])
        XCTAssertEqual(export.dailyStats.count, 1)
        XCTAssertEqual(export.tags.count, 0)

        // Revoke the laptop, change the password, delete the account.
        _ = try await phone.revokeSession(path: .init(id: sessions[0].id)).noContent
        _ = try await laptop.listTags().unauthorized
        _ = try await phone.changePassword(body: .json(.init(currentPassword: password, newPassword: "new long password")))
            .noContent
        let wrongDelete = try await phone.deleteAccount(body: .json(.init(password: password)))
        XCTAssertEqual(try wrongDelete.unauthorized.body.json.value1.error.details?.map(\.field), ["password"])
        _ = try await phone.deleteAccount(body: .json(.init(password: "new long password"))).noContent
        _ = try await phone.exportAccount().unauthorized
    }

    // MARK: - Helpers

    /// The stack's base URL, or a skip when the suite runs without one.
    private static func baseURL() throws -> URL {
        guard let value = ProcessInfo.processInfo.environment["TODOSYNC_TEST_BASE_URL"], !value.isEmpty,
            let url = URL(string: value)
        else {
            throw XCTSkip(
                "TODOSYNC_TEST_BASE_URL is not set: the generated client needs the real stack (run ./scripts/test.sh)")
        }
        return url
    }

    private static func client(token: String?) throws -> Client {
        Client(
            serverURL: try baseURL(),
            configuration: Configuration(dateTranscoder: .iso8601WithFractionalSeconds),
            transport: URLSessionTransport(),
            middlewares: token.map { [BearerToken(token: $0)] } ?? [])
    }

    /// A client for a newly registered user.
    private static func newUser() async throws -> Client {
        let anonymous = try client(token: nil)
        let body = Components.Schemas.RegisterRequest(
            email: "oapi-\(UUID().uuidString.prefix(12))@example.com", password: "correct horse battery")
        let output = try await riding429 { try await anonymous.register(body: .json(body)) }
        return try client(token: output.created.body.json.token)
    }

    /// Calls an auth route again while nginx's per-address limit or the server's hash limiter
    /// answers 429.
    private static func riding429<Output: RateLimitedOutput>(_ call: () async throws -> Output) async throws -> Output {
        var output = try await call()
        for attempt in 1...10 where output.isRateLimited {
            try await Task.sleep(nanoseconds: UInt64(attempt) * 300_000_000)
            output = try await call()
        }
        return output
    }
}

/// Adds `Authorization: Bearer <token>` to every request.
private struct BearerToken: ClientMiddleware {
    let token: String

    func intercept(
        _ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
        next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)
    ) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        request.headerFields[.authorization] = "Bearer \(token)"
        return try await next(request, body, baseURL)
    }
}

/// The outputs of the auth routes, which nginx's per-address limit may answer with 429.
private protocol RateLimitedOutput { var isRateLimited: Bool { get } }

extension Operations.Register.Output: RateLimitedOutput {
    var isRateLimited: Bool { if case .tooManyRequests = self { true } else { false } }
}

extension Operations.Login.Output: RateLimitedOutput {
    var isRateLimited: Bool { if case .tooManyRequests = self { true } else { false } }
}
