import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The friends calls of the library in process (issue 37, client side): the answers decoded into
/// their values, each refusal its typed error, POSTs made safe to resend, the live stream's
/// events routed by name, and a friend's month view that refreshes on `friend` events while the
/// engine's stream is open (and asks for `friends=1` only while a view watches).
/// `FriendsStackTests` runs the same against the real stack.
final class FriendsClientTests: XCTestCase {
    var directory: URL!
    let month = CalendarMonth("2026-11")!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("friends-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    func signedInStore() throws -> LocalStore {
        let store = try LocalStore(path: directory.appendingPathComponent("\(UUID().uuidString).sqlite").path)
        try store.signIn(userID: 7, email: "me@example.com", token: "t1")
        return store
    }

    func client(_ store: LocalStore, _ transport: any HTTPTransport, attempts: Int = 3) -> TodoSyncClient {
        TodoSyncClient(store: store, baseURL: URL(string: "http://127.0.0.1:9")!, transport: transport,
                       retry: RetryPolicy(maxAttempts: attempts, initialDelay: 0.001, maxDelay: 0.01))
    }

    // MARK: Values

    func testAFriendsMonthIsDecodedDayByDayWithItsStats() async throws {
        let server = FriendsFakeServer()
        server.todos = [
            FriendsFakeServer.todo(41, "Write report", "2026-11-03", done: true, tag: ##"{"name":"Work","color":"#ff8800"}"##),
            FriendsFakeServer.todo(42, "Gym 🏋️", "2026-11-03"),
            FriendsFakeServer.todo(43, "Call mum", "2026-11-20"),
        ]
        let month = try await client(try signedInStore(), server).friendMonth(5, month: month)
        XCTAssertEqual(month.todos.map(\.id), [41, 42, 43], "the server's order is kept")
        XCTAssertEqual(month.todos[0].tag, FriendTodo.Tag(name: "Work", color: "#ff8800"))
        XCTAssertNil(month.todos[1].tag)
        XCTAssertEqual(month.todos[1].title, "Gym 🏋️")
        XCTAssertEqual(month.days.count, 30, "every day of November")
        XCTAssertEqual(month.busyDays.map(\.day.description), ["2026-11-03", "2026-11-20"])
        let third = month.busyDays[0]
        XCTAssertEqual(third.todos.map(\.id), [41, 42])
        XCTAssertEqual(third.stat?.todoCount, 2)
        XCTAssertEqual(third.stat?.completedCount, 1)
        XCTAssertEqual(third.stat?.balanceTitle, "Balanced")
        XCTAssertEqual(third.stat?.tagStats.map(\.name), ["Work"])
        XCTAssertEqual(server.requests.sorted(), ["GET /api/v1/friends/5/daily-stats?month=2026-11", "GET /api/v1/friends/5/todos?month=2026-11"])
    }

    func testFriendsRequestsAndTheAccountAreDecoded() async throws {
        let server = FriendsFakeServer()
        let client = client(try signedInStore(), server)
        let friends = try await client.friends()
        XCTAssertEqual(friends, [Friend(person: Person(id: 5, email: "ada@example.com", nickname: "Ada"), since: "2026-11-01T08:00:00.000Z")])
        let requests = try await client.friendRequests()
        XCTAssertEqual(requests.incoming.map(\.id), [9])
        XCTAssertEqual(requests.incoming.first?.from, Person(id: 8, email: "bob@example.com", nickname: nil))
        XCTAssertEqual(requests.outgoing.map(\.email), ["nobody@example.com"])
        let account = try await client.setNickname("  Me ")
        XCTAssertEqual(account.nickname, "Me", "the server's trimmed value")
        XCTAssertEqual(server.bodies.last, #"{"nickname":"  Me "}"#)
        _ = try await client.setNickname(nil)
        XCTAssertEqual(server.bodies.last, #"{"nickname":null}"#)
        let accepted = try await client.acceptFriendRequest(9)
        XCTAssertEqual(accepted.person.email, "bob@example.com")
    }

    // MARK: Errors

    func testEachRefusalIsItsTypedErrorAndOfflineIsSyncErrorOffline() async throws {
        let server = FriendsFakeServer()
        let client = client(try signedInStore(), server)
        await assertThrows(FriendsError.notFound) { _ = try await client.friendMonth(99, month: self.month) }
        await assertThrows(FriendsError.notFound) { try await client.removeFriend(99) }
        await assertThrows(FriendsError.notFound) { try await client.cancelFriendRequest(12345) }
        server.acceptAnswer = (409, #"{"error":{"code":"friend_limit","message":"Too many friends."}}"#, [:])
        await assertThrows(FriendsError.friendLimit) { try await client.acceptFriendRequest(9) }
        await assertThrows(FriendsError.invalid(message: "Validation failed.", details: [ServerProblem(field: "email", problem: "is your own")])) {
            try await client.sendFriendRequest(to: "me@example.com")
        }
        // The hour's limit: a Retry-After longer than the retry policy's longest wait is not waited for.
        server.requestAnswer = (429, #"{"error":{"code":"rate_limited","message":"Too many requests."}}"#, ["Retry-After": "1800"])
        await assertThrows(FriendsError.rateLimited(retryAfter: 1800)) { try await client.sendFriendRequest(to: "x@example.com") }
        XCTAssertEqual(server.requests.filter { $0 == "POST /api/v1/friends/requests" }.count, 2, "the 429 was not retried")

        let offline = self.client(try signedInStore(), BrokenTransport(), attempts: 2)
        do {
            _ = try await offline.friends()
            XCTFail("listed friends offline")
        } catch let error as SyncError {
            XCTAssertTrue(error.isOffline, "\(error)")
        }
    }

    func testPostsCarryAnIdempotencyKeyAndAreResentWithItDeletesAreNot() async throws {
        let server = FriendsFakeServer()
        server.loseNext = 1
        try await client(try signedInStore(), server).sendFriendRequest(to: "ada@example.com")
        let keys = server.keys.filter { $0.0 == "POST /api/v1/friends/requests" }.map(\.1)
        XCTAssertEqual(keys.count, 2, "the lost answer was resent")
        XCTAssertNotNil(keys[0])
        XCTAssertEqual(keys[0], keys[1], "with the same key: the server answers the stored 202")

        server.loseNext = 1
        do {
            try await client(try signedInStore(), server).removeFriend(5)
            XCTFail("a lost answer to a DELETE passed for done")
        } catch let error as SyncError {
            XCTAssertTrue(error.isOffline)
        }
        XCTAssertEqual(server.requests.filter { $0 == "DELETE /api/v1/friends/5" }.count, 1, "not resent")
    }

    // MARK: The live stream

    func testTheParserRoutesEventsByName() {
        var parser = SSEParser()
        let stream = "data: {\"version\": 7, \"deviceId\": null}\n\nevent: friend\ndata: {\"friendId\": 5}\n\n"
            + ": ping\n\nevent: friend\r\ndata: {\"friendId\":null}\r\n\r\nevent: something-new\ndata: {\"version\": 8}\n\n"
            + "event: friend\ndata: {\"version\": 9}\n\nevent: message\ndata: {\"version\": 10}\n\n"
        var events: [LiveEvent] = []
        var bytes = Array(stream.utf8)[...]
        while !bytes.isEmpty {
            events += parser.feed(bytes.prefix(3))
            bytes = bytes.dropFirst(3)
        }
        XCTAssertEqual(events, [.poke(version: 7, deviceID: nil), .friend(friendID: 5), .friend(friendID: nil),
                                .poke(version: 10, deviceID: nil)],
                       "an unknown event name and a friend event without friendId are skipped; the name ends with its event")
    }

    func testTheStreamAsksForFriendsOnlyWhileAViewWatches() async throws {
        let rig = try engineRig()
        await rig.engine.start()
        await waitFor("the stream opened") { rig.live.opens == [false] }
        let view = rig.engine.friendMonthView(friendID: 5, month: month)
        await view.start()
        await waitFor("the stream reopened with friends=1") { rig.live.opens == [false, true] }
        await view.stop()
        await waitFor("the stream went back to no friends") { rig.live.opens == [false, true, false] }
        let watching = await rig.engine.watchesFriends
        XCTAssertFalse(watching)
        await rig.engine.stop()
    }

    func testTheMonthViewRefreshesOnItsFriendsEventsAndWhenTheStreamReopens() async throws {
        let rig = try engineRig()
        rig.server.todos = [FriendsFakeServer.todo(41, "First", "2026-11-03")]
        await rig.engine.start()
        let view = rig.engine.friendMonthView(friendID: 5, month: month)
        let seen = StateLog(view)
        await view.start()
        let first = await view.state.value?.todos.map(\.title)
        XCTAssertEqual(first, ["First"])
        await waitFor("the friends stream is open") { rig.live.opens.last == true && rig.live.isOpen }
        await waitFor("the view settled") { await view.refreshes >= 1 && rig.server.monthReads >= 1 }
        try await Task.sleep(nanoseconds: 50_000_000)
        let before = await view.refreshes

        // Another friend's change, and a poke of the user's own data: no refresh.
        rig.live.send(.friend(friendID: 6))
        rig.live.send(.poke(version: 3, deviceID: nil))
        try await Task.sleep(nanoseconds: 100_000_000)
        let unmoved = await view.refreshes
        XCTAssertEqual(unmoved, before, "only friend 5's events refresh friend 5's month")

        // Friend 5 edits: the view shows it.
        rig.server.todos.append(FriendsFakeServer.todo(42, "Second", "2026-11-04"))
        rig.live.send(.friend(friendID: 5))
        await waitFor("the view shows the edit") { await view.state.value?.todos.map(\.title) == ["First", "Second"] }
        XCTAssertEqual(seen.titles.last, ["First", "Second"], "published on states")

        // The stream breaks and reopens: what changed meanwhile (no event came) is read again.
        rig.server.todos.removeFirst()
        rig.live.drop()
        await waitFor("reopened and refreshed", timeout: 10) { await view.state.value?.todos.map(\.title) == ["Second"] }

        // The friendship ends ({"friendId": null}): the view says so and keeps what it showed.
        rig.server.friendship = false
        rig.live.send(.friend(friendID: nil))
        await waitFor("the view failed with notFound") {
            if case .failed(let error, let last) = await view.state {
                return (error as? FriendsError) == .notFound && last?.todos.map(\.title) == ["Second"]
            }
            return false
        }
        await view.stop()
        await rig.engine.stop()
    }

    func testEventsDuringARefreshCoalesceIntoOneMore() async throws {
        let rig = try engineRig()
        await rig.engine.start()
        let view = rig.engine.friendMonthView(friendID: 5, month: month)
        await view.start()
        await waitFor("the friends stream is open") { rig.live.opens.last == true && rig.live.isOpen }
        try await Task.sleep(nanoseconds: 100_000_000)
        let before = await view.refreshes
        rig.server.delay = 0.2
        for _ in 0..<20 { rig.live.send(.friend(friendID: 5)) }
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let after = await view.refreshes
        XCTAssertGreaterThanOrEqual(after - before, 1)
        XCTAssertLessThanOrEqual(after - before, 2, "20 events during a refresh: the refresh, then one more")
        await view.stop()
        await rig.engine.stop()
    }

    // MARK: Support

    struct EngineRig {
        let server: FriendsFakeServer
        let live: RecordingLiveStream
        let engine: SyncEngine
    }

    func engineRig() throws -> EngineRig {
        let store = try signedInStore()
        let server = FriendsFakeServer()
        let live = RecordingLiveStream()
        let client = TodoSyncClient(store: store, baseURL: URL(string: "http://fake.invalid")!, transport: server,
                                    retry: RetryPolicy(maxAttempts: 1))
        let engine = SyncEngine(client: client, settings: SyncEngine.Settings(interval: 3600, liveInitialBackoff: 0.05, liveMaxBackoff: 0.1),
                                live: live)
        return EngineRig(server: server, live: live, engine: engine)
    }

    func assertThrows<E: Error & Equatable>(_ expected: E, file: StaticString = #filePath, line: UInt = #line,
                                            _ body: () async throws -> Void) async {
        do {
            try await body()
            XCTFail("no error; expected \(expected)", file: file, line: line)
        } catch let error as E {
            XCTAssertEqual(error, expected, file: file, line: line)
        } catch {
            XCTFail("\(error); expected \(expected)", file: file, line: line)
        }
    }
}

/// The states a view published, as titles (nil: a failure).
final class StateLog: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [[String]?] = []

    init(_ view: FriendsLiveView<FriendMonth>) {
        Task { [weak self] in
            for await state in view.states {
                let titles: [String]? = if case .loaded(let month) = state { month.todos.map(\.title) } else { nil }
                self?.lock.withLock { self?.list.append(titles) }
            }
        }
    }

    var titles: [[String]?] { lock.withLock { list } }
}

/// A network that is down.
struct BrokenTransport: HTTPTransport {
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) { throw URLError(.cannotConnectToHost) }
}

/// A live stream that records whether each open asked for friends events; the test feeds events.
final class RecordingLiveStream: LiveStream, @unchecked Sendable {
    private let lock = NSLock()
    private var current: AsyncThrowingStream<LiveEvent, Error>.Continuation?
    private var asked: [Bool] = []

    var opens: [Bool] { lock.withLock { asked } }
    var isOpen: Bool { lock.withLock { current != nil } }

    func open(token: String, schemaVersion: Int) -> AsyncThrowingStream<LiveEvent, Error> {
        open(token: token, schemaVersion: schemaVersion, friends: false)
    }

    func open(token: String, schemaVersion: Int, friends: Bool) -> AsyncThrowingStream<LiveEvent, Error> {
        AsyncThrowingStream { continuation in
            lock.withLock {
                asked.append(friends)
                current = continuation
            }
            continuation.onTermination = { [weak self] _ in
                self?.lock.withLock { if self?.current != nil { self?.current = nil } }
            }
            continuation.yield(.opened)
        }
    }

    func send(_ event: LiveEvent) { _ = lock.withLock { current }?.yield(event) }

    func drop() {
        let continuation = lock.withLock { () -> AsyncThrowingStream<LiveEvent, Error>.Continuation? in
            defer { current = nil }
            return current
        }
        continuation?.finish(throwing: LiveStreamError.ended("connection lost"))
    }
}

/// The friends routes of one user (7) whose friend is 5 (ada) and who has an incoming request 9
/// from 8 (bob); sync routes answer an empty pull. Friend 5's todos are what the test sets;
/// their stats are computed from them as the contract says (enough of it for these tests).
final class FriendsFakeServer: HTTPTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var state = (todos: [String](), friendship: true, requests: [String](), bodies: [String](),
                         keys: [(String, String?)](), loseNext: 0, monthReads: 0, delay: 0.0)
    var acceptAnswer: (Int, String, [String: String])?
    var requestAnswer: (Int, String, [String: String])?

    var todos: [String] { get { lock.withLock { state.todos } } set { lock.withLock { state.todos = newValue } } }
    var friendship: Bool { get { lock.withLock { state.friendship } } set { lock.withLock { state.friendship = newValue } } }
    var loseNext: Int { get { lock.withLock { state.loseNext } } set { lock.withLock { state.loseNext = newValue } } }
    var delay: Double { get { lock.withLock { state.delay } } set { lock.withLock { state.delay = newValue } } }
    var requests: [String] { lock.withLock { state.requests } }
    var bodies: [String] { lock.withLock { state.bodies } }
    var keys: [(String, String?)] { lock.withLock { state.keys } }
    var monthReads: Int { lock.withLock { state.monthReads } }

    static func todo(_ id: Int, _ title: String, _ deadline: String, done: Bool = false, tag: String = "null") -> String {
        #"{"id":\#(id),"title":"\#(title)","deadline":"\#(deadline)","isCompleted":\#(done),"isImportant":false,"isLife":false,"difficulty":2,"estimatedTime":60,"tag":\#(tag)}"#
    }

    static let notFound = #"{"error":{"code":"not_found","message":"Not found."}}"#

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let components = URLComponents(url: request.url!, resolvingAgainstBaseURL: false)!
        let method = request.httpMethod ?? "GET"
        let line = "\(method) \(components.percentEncodedPath)" + (components.percentEncodedQuery.map { "?\($0)" } ?? "")
        let body = request.httpBody.map { String(decoding: $0, as: UTF8.self) }
        let (lose, delay) = lock.withLock { () -> (Bool, Double) in
            state.requests.append(line)
            if let body { state.bodies.append(body) }
            state.keys.append(("\(method) \(components.percentEncodedPath)", request.value(forHTTPHeaderField: "Idempotency-Key")))
            let lose = state.loseNext > 0
            if lose { state.loseNext -= 1 }
            return (lose, state.delay)
        }
        if delay > 0 { try await Task.sleep(nanoseconds: UInt64(delay * 1e9)) }
        let (status, text, headers) = answer(method, components.percentEncodedPath, body ?? "")
        if lose { throw URLError(.networkConnectionLost) }
        var fields = headers
        fields["Content-Type"] = "application/json"
        return (Data(text.utf8), HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: fields)!)
    }

    private func answer(_ method: String, _ path: String, _ body: String) -> (Int, String, [String: String]) {
        let ada = #"{"id":5,"email":"ada@example.com","nickname":"Ada","since":"2026-11-01T08:00:00.000Z"}"#
        switch (method, path) {
        case ("GET", "/api/v1/sync/pull"):
            return (200, #"{"changes":{"tags":{"upserted":[],"deleted":[]},"todos":{"upserted":[],"deleted":[]},"dailyStats":{"upserted":[],"deleted":[]}},"cursor":"c1","hasMore":false,"schemaVersion":3}"#, [:])
        case ("GET", "/api/v1/friends"):
            return (200, friendship ? #"{"items":[\#(ada)]}"# : #"{"items":[]}"#, [:])
        case ("GET", "/api/v1/friends/requests"):
            return (200, #"{"incoming":[{"id":9,"from":{"id":8,"email":"bob@example.com","nickname":null},"createdAt":"2026-11-02T08:00:00.000Z"}],"outgoing":[{"id":10,"email":"nobody@example.com","createdAt":"2026-11-02T07:00:00.000Z"}]}"#, [:])
        case ("POST", "/api/v1/friends/requests"):
            if let requestAnswer { return requestAnswer }
            if body.contains("me@example.com") {
                return (422, #"{"error":{"code":"validation_failed","message":"Validation failed.","details":[{"field":"email","problem":"is your own"}]}}"#, [:])
            }
            return (202, "{}", [:])
        case ("POST", "/api/v1/friends/requests/9/accept"):
            return acceptAnswer ?? (200, #"{"id":8,"email":"bob@example.com","nickname":null,"since":"2026-11-03T08:00:00.000Z"}"#, [:])
        case ("PATCH", "/api/v1/account"):
            let nickname = body.contains("null") ? "null" : #""Me""#
            return (200, #"{"id":7,"email":"me@example.com","nickname":\#(nickname),"createdAt":"2026-10-01T08:00:00.000Z"}"#, [:])
        case ("DELETE", "/api/v1/friends/5"):
            return friendship ? (204, "", [:]) : (404, Self.notFound, [:])
        case ("GET", "/api/v1/friends/5/todos"):
            lock.withLock { state.monthReads += 1 }
            return friendship ? (200, #"{"items":[\#(todos.joined(separator: ","))]}"#, [:]) : (404, Self.notFound, [:])
        case ("GET", "/api/v1/friends/5/daily-stats"):
            return friendship ? (200, #"{"items":[\#(stats().joined(separator: ","))]}"#, [:]) : (404, Self.notFound, [:])
        default:
            return (404, Self.notFound, [:])
        }
    }

    /// One stat per date of the todos: counts, and the rest fixed (these tests read the counts).
    private func stats() -> [String] {
        let parsed = todos.compactMap { try? JSONParser.parse(Array($0.utf8)).objectValue }
        let byDate = Dictionary(grouping: parsed) { $0["deadline"]?.stringValue ?? "" }
        return byDate.keys.sorted().enumerated().map { index, date in
            let items = byDate[date]!
            let done = items.filter { $0["isCompleted"]?.boolValue == true }
            let tags = done.compactMap { $0["tag"]?.objectValue }.map { ##"{"tagId":1,"name":"\##($0["name"]?.stringValue ?? "")","color":"#ff8800","count":1}"## }
            return #"{"id":\#(index + 1),"date":"\#(date)","todoCount":\#(items.count),"completedCount":\#(done.count),"productivityNum":0,"balance":{"num":50,"title":"Balanced","message":"A good balance between work and life."},"tagStats":[\#(tags.joined(separator: ","))],"center":{"x":0,"y":0},"version":1,"createdAt":"2026-11-01T08:00:00.000Z","updatedAt":"2026-11-01T08:00:00.000Z","deletedAt":null}"#
        }
    }
}
