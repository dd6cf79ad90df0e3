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

/// One sync at a time per store file, and no silent hang (issue 20, item 4): in process with a
/// fake server and a clock that jumps, plus a real TCP server that never answers.
final class SyncConcurrencyTests: XCTestCase {
    var directory: URL!
    var path: String!
    let day = Day("2026-11-24")!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("sync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        path = directory.appendingPathComponent("store.sqlite").path
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A logged-in store on `path`.
    func openStore() throws -> LocalStore {
        let store = try LocalStore(path: path)
        try store.signIn(userID: 1, email: "me@example.com", token: "token")
        return store
    }

    func client(_ store: LocalStore, _ server: any HTTPTransport, timeouts: SyncTimeouts = SyncTimeouts(),
                clock: any SyncClock = TestClock(), retry: RetryPolicy = RetryPolicy()) -> TodoSyncClient {
        TodoSyncClient(store: store, baseURL: URL(string: "http://fake.invalid")!, transport: server, retry: retry,
                       timeouts: timeouts, clock: clock)
    }

    /// Whether `condition` holds within `seconds` (checked every millisecond).
    func eventually(within seconds: Double = 5, _ condition: () async -> Bool) async -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if await condition() { return true }
            try? await Task.sleep(nanoseconds: 1_000_000)
        }
        return false
    }

    // MARK: One sync at a time

    /// Syncs called while one is pushing, through two clients and two `LocalStore`s on the same
    /// file, share one follow-up: every operation is pushed exactly once.
    func testConcurrentSyncsShareOneFollowUpAndPushEachOperationOnce() async throws {
        let server = FakeServer()
        server.holdPushes()
        let store = try openStore()
        let phone = client(store, server)
        let sameFile = client(try LocalStore(path: path), server)
        let first = try store.addTodo(NewTodo(title: "First", deadline: day))
        let running = Task { try await phone.sync() }
        await server.waitForPushes(1)

        let second = try store.addTodo(NewTodo(title: "Second", deadline: day))
        let joined = [Task { try await phone.sync() }, Task { try await sameFile.sync() }, Task { try await phone.sync() }]
        // (Asserted by what reaches the server: were they not waiting, they would push now.)
        _ = await eventually { await store.syncRunner.followUpCallers == 3 }
        server.release()

        let firstReport = try await running.value
        var reports: [SyncReport] = []
        for task in joined { reports.append(try await task.value) }
        XCTAssertEqual(server.pushes, [[try XCTUnwrap(first.opID)], [try XCTUnwrap(second.opID)]], "each operation pushed once")
        // The running sync's push loop took the change made meanwhile as its next batch; the
        // follow-up found nothing left to push, and pulled once for the three callers.
        XCTAssertEqual(firstReport.operationsSent, 2)
        XCTAssertEqual(reports.map(\.operationsSent), [0, 0, 0])
        XCTAssertTrue(reports.allSatisfy { $0 == reports[0] }, "the three callers share the follow-up's report")
        XCTAssertEqual(server.requests.filter { $0.hasSuffix("/sync/pull") }.count, 2, "two syncs, not four")
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    /// Progress of a shared sync reaches every caller that joined it.
    func testEveryCallerOfASharedSyncSeesItsProgress() async throws {
        let server = FakeServer()
        server.holdPushes()
        let store = try openStore()
        let phone = client(store, server)
        try store.addTodo(NewTodo(title: "First", deadline: day))
        let running = Task { try await phone.sync() }
        await server.waitForPushes(1)
        try store.addTodo(NewTodo(title: "Second", deadline: day))
        let seen = [Counter(), Counter()]
        let joined = seen.map { counter in Task { try await phone.sync { _ in counter.increment() } } }
        _ = await eventually { await store.syncRunner.followUpCallers == 2 }
        server.release()
        _ = try await running.value
        for task in joined { _ = try await task.value }
        XCTAssertGreaterThan(seen[0].value, 0)
        XCTAssertEqual(seen[0].value, seen[1].value, "the same reports reach both callers")
    }

    /// Cancelling the only caller of a sync cancels the sync at once, even mid-request; the
    /// change stays queued.
    func testCancellingTheOnlyCallerCancelsTheSync() async throws {
        let server = FakeServer(.hang)
        let store = try openStore()
        let phone = client(store, server)
        try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let started = Date()
        let running = Task { try await phone.sync() }
        let sent = await eventually { !server.requests.isEmpty }
        XCTAssertTrue(sent)
        running.cancel()
        do {
            _ = try await running.value
            XCTFail("expected cancellation")
        } catch is CancellationError {}
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "not held until the 30 s request timeout")
        XCTAssertEqual(try store.pendingCount(), 1)
    }

    /// A sync of the same file in another process (here: its lock held through another open
    /// file) makes this one fail at once, sending nothing; once it ends, syncing works.
    func testASyncInAnotherProcessIsReportedNotRaced() async throws {
        let server = FakeServer()
        let store = try openStore()
        let phone = client(store, server)
        let added = try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let other = open(path + ".sync-lock", O_RDWR | O_CREAT, 0o600)
        XCTAssertEqual(flock(other, LOCK_EX | LOCK_NB), 0)

        do {
            try await phone.sync()
            XCTFail("expected alreadyRunning")
        } catch let error as SyncError {
            XCTAssertEqual(error, .alreadyRunning(store: path))
            XCTAssertEqual(error.description, "Sync already running on \(path!)")
        }
        XCTAssertEqual(server.requests, [], "nothing sent")
        XCTAssertEqual(try store.status(ofOperation: XCTUnwrap(added.opID)), .pending, "not frozen for sending either")
        XCTAssertNil(try store.status().lastSyncError, "the other sync's outcome is not this one's")

        close(other)
        try await phone.sync()
        XCTAssertEqual(server.pushes, [[try XCTUnwrap(added.opID)]])
    }

    // MARK: Time bounds

    /// Backoff waits run on the client's clock: six failed attempts cost no real time.
    func testBackoffWaitsOnTheClientsClock() async throws {
        let clock = TestClock()
        let store = try openStore()
        let phone = client(store, FakeServer(.unreachable), clock: clock,
                           retry: RetryPolicy(maxAttempts: 6, initialDelay: 1, maxDelay: 8))
        try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let started = Date()
        do {
            try await phone.sync()
            XCTFail("expected offline")
        } catch SyncError.offline {}
        XCTAssertEqual(clock.sleeps.count, 5)
        for (index, delay) in clock.sleeps.enumerated() {
            let ceiling = min(8, pow(2, Double(index)))
            XCTAssertTrue((ceiling / 2...ceiling).contains(delay), "wait \(index + 1): \(delay)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
    }

    /// The sync's overall bound ends retries that would go on for longer.
    func testTheSyncsBoundEndsRetriesThatWouldOutlastIt() async throws {
        let clock = TestClock()
        let store = try openStore()
        let phone = client(store, FakeServer(.unreachable), timeouts: SyncTimeouts(request: 30, sync: 120), clock: clock,
                           retry: RetryPolicy(maxAttempts: 1_000, initialDelay: 10, maxDelay: 60))
        try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let start = clock.now
        do {
            try await phone.sync()
            XCTFail("expected a timeout")
        } catch let error as SyncError {
            XCTAssertEqual(error, .timedOut(.sync, seconds: 120, queued: 1))
            XCTAssertEqual(error.description, "the sync did not finish within 120 s; 1 change(s) stay queued")
            XCTAssertTrue(error.isOffline)
        }
        XCTAssertLessThanOrEqual(clock.now - start, 120, "no wait runs past the bound")
        XCTAssertEqual(try store.status().lastSyncError, "the sync did not finish within 120 s; 1 change(s) stay queued")
    }

    /// A request the server never answers ends the sync after `SyncTimeouts.request`, is not
    /// resent, and leaves its operation to go out (same opId) with the next sync.
    func testARequestWithoutAnswerEndsTheSyncAfterTheRequestTimeout() async throws {
        let server = FakeServer(.hang)
        let store = try openStore()
        let phone = client(store, server, timeouts: SyncTimeouts(request: 0.2, sync: 300))
        let added = try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let started = Date()
        do {
            try await phone.sync()
            XCTFail("expected a timeout")
        } catch let error as SyncError {
            XCTAssertEqual(error, .timedOut(.request, seconds: 0.2, queued: 1))
            XCTAssertEqual(error.description, "the server did not answer within 0.2 s; 1 change(s) stay queued")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5)
        XCTAssertEqual(server.requests, ["POST /api/v1/sync/push"], "a timed-out request is not resent")

        server.set(.answer)
        try await phone.sync()
        XCTAssertEqual(server.pushes, [[try XCTUnwrap(added.opID)]])
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    /// The library's URLSession transport against a server that accepts and never answers.
    func testURLSessionAgainstASilentServerTimesOut() async throws {
        let silent = try SilentServer()
        defer { silent.stop() }
        let store = try openStore()
        try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let phone = TodoSyncClient(store: store, baseURL: silent.url, timeouts: SyncTimeouts(request: 0.5, sync: 300))
        let started = Date()
        do {
            try await phone.sync()
            XCTFail("expected a timeout")
        } catch let error as SyncError {
            XCTAssertEqual(error, .timedOut(.request, seconds: 0.5, queued: 1))
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)
        XCTAssertGreaterThanOrEqual(silent.accepted, 1)
    }

    /// The terminal client against a silent server: the plain message and the offline exit code;
    /// meanwhile a second process on the same store says a sync is running and exits 4.
    func testTheTerminalClientAgainstASilentServer() async throws {
        let silent = try SilentServer()
        defer { silent.stop() }
        let store = try openStore()
        try store.addTodo(NewTodo(title: "Queued", deadline: day))
        let environment = ["TODOSYNC_SERVER": silent.url.absoluteString, "TODOSYNC_CLIENT_REQUEST_TIMEOUT": "3"]

        let first = Process()
        first.executableURL = URL(fileURLWithPath: Stack.clientBinary)
        first.arguments = ["sync", "--quiet", "--db", path]
        first.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        let output = Pipe()
        first.standardOutput = output
        first.standardError = output
        let started = Date()
        try first.run()
        _ = await eventually(within: 10) { silent.accepted > 0 || !first.isRunning }

        let second = try runProcess(Stack.clientBinary, ["sync", "--quiet", "--db", path], environment: environment)
        XCTAssertEqual(second.status, 4, second.output)
        XCTAssertEqual(second.output, "Sync already running on \(path!)\n")

        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        first.waitUntilExit()
        XCTAssertEqual(first.terminationStatus, 3, text)
        XCTAssertEqual(text, "Not synced: the server did not answer within 3 s; 1 change(s) stay queued.\n")
        XCTAssertLessThan(Date().timeIntervalSince(started), 15)
        XCTAssertEqual(try store.pendingCount(), 1)
    }
}
