import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The SyncEngine's triggers and backoff rules (issue 22), in process: a fake server behind the
/// transport, a fake live stream and a clock that moves only when the test moves it.
final class SyncEngineTests: XCTestCase {
    var directory: URL!
    let day = Day("2026-11-24")!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("engine-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    struct Rig {
        let store: LocalStore
        let server: FakeServer
        let live: FakeLiveStream
        let clock: ManualClock
        let engine: SyncEngine
        let log: EventLog

        var pulls: Int { server.requests.filter { $0.hasSuffix("/sync/pull") }.count }
        /// Pushes the server answered.
        var pushes: Int { server.pushes.count }
    }

    /// A logged-in store, its engine (not started), and everything the test drives.
    func rig(transport: (any HTTPTransport)? = nil, settings: SyncEngine.Settings = SyncEngine.Settings(),
             reachability: AsyncStream<Bool>? = nil, random: @escaping @Sendable (ClosedRange<Double>) -> Double = { $0.upperBound },
             schemaVersion: Int = SchemaVersion.current) throws -> Rig {
        let store = try LocalStore(path: directory.appendingPathComponent("\(UUID().uuidString).sqlite").path)
        try store.signIn(userID: 1, email: "me@example.com", token: "token")
        let server = FakeServer()
        // No retries inside one sync: the engine's own backoff is what these tests pin.
        let client = TodoSyncClient(store: store, baseURL: URL(string: "http://fake.invalid")!, transport: transport ?? server,
                                    retry: RetryPolicy(maxAttempts: 1), clock: TestClock(), schemaVersion: schemaVersion)
        let live = FakeLiveStream()
        let clock = ManualClock()
        let engine = SyncEngine(client: client, settings: settings, live: live, reachability: reachability, clock: clock, random: random)
        return Rig(store: store, server: server, live: live, clock: clock, engine: engine, log: EventLog(engine))
    }

    func started(_ rig: Rig) async {
        await rig.engine.start()
        await waitFor("the first sync and the stream") { rig.log.synced.count >= 1 && rig.log.events.contains(.connected) }
        await settle(rig.engine)
    }

    func testStartSyncsOnceThenTheTimerPullsEveryInterval() async throws {
        let rig = try rig()
        await started(rig)
        let afterStart = rig.pulls
        XCTAssertGreaterThanOrEqual(afterStart, 1)
        rig.clock.advance(by: 59)
        await settle(rig.engine)
        XCTAssertEqual(rig.pulls, afterStart, "nothing before the interval")
        // The timer counts from the end of the last sync, which may have ended a moment after
        // `started` returned (the stream-opened sync): step the clock until the timer fires, at
        // most one more interval, instead of assuming its sleep began at exactly time 0.
        for _ in 0..<61 where rig.log.synced.last != .timer {
            rig.clock.advance(by: 1)
            await settle(rig.engine)
        }
        await waitFor("the periodic sync") { rig.log.synced.last == .timer }
        XCTAssertEqual(rig.log.synced.filter { $0 == .timer }.count, 1, "one periodic sync per interval")
        await rig.engine.stop()
    }

    func testManyLocalWritesAreDebouncedIntoOneSync() async throws {
        let rig = try rig()
        await started(rig)
        for index in 0..<5 {
            try rig.store.addTodo(NewTodo(title: "Todo \(index)", deadline: day))
            await rig.engine.localWrite()
        }
        await settle(rig.engine)
        XCTAssertEqual(rig.pushes, 0, "nothing before the debounce")
        rig.clock.advance(by: 0.3)
        await waitFor("one push") { rig.pushes == 1 }
        XCTAssertEqual(rig.server.pushes.first?.count, 5, "the five writes went in one push")
        await settle(rig.engine)
        XCTAssertEqual(rig.pushes, 1)
        XCTAssertEqual(try rig.store.pendingCount(), 0)
        await rig.engine.stop()
    }

    /// Issue 39, item 6: a lone write on an idle engine goes out after the quiet window (20 ms),
    /// not after the 0.3 s debounce that used to delay every write.
    func testALoneLocalWriteSyncsAfterTheQuietWindow() async throws {
        let rig = try rig()
        await started(rig)
        try rig.store.addTodo(NewTodo(title: "Lone", deadline: day))
        await rig.engine.localWrite()
        await settle(rig.engine)
        rig.clock.advance(by: 0.015)
        await settle(rig.engine)
        XCTAssertEqual(rig.pushes, 0, "nothing inside the quiet window")
        rig.clock.advance(by: 0.006)
        await waitFor("the push, 20 ms after the write") { rig.pushes == 1 }
        await waitFor("its acknowledgement") { (try? rig.store.pendingCount()) == 0 }
        await rig.engine.stop()
    }

    /// A burst (50 writes 5 ms apart) still goes out in one push, once it is over; a stream of
    /// writes that never pauses (10 ms apart) goes out `debounce` after its first write.
    func testABurstCoalescesIntoOnePushAndAStreamIsCappedByTheDebounce() async throws {
        let rig = try rig()
        await started(rig)
        for index in 0..<50 {
            try rig.store.addTodo(NewTodo(title: "Burst \(index)", deadline: day))
            await rig.engine.localWrite()
            await settle(rig.engine)
            if index < 49 { rig.clock.advance(by: 0.005) }
        }
        XCTAssertEqual(rig.pushes, 0, "nothing while the burst goes on (0.245 s < the 0.3 s cap)")
        rig.clock.advance(by: 0.02)
        await waitFor("one push for the burst") { rig.pushes == 1 }
        XCTAssertEqual(rig.server.pushes.first?.count, 50, "the whole burst in one push")
        await settle(rig.engine)

        // 0.01 s apart for 0.5 s: never quiet, so the cap (0.3 s after the first write) sends it.
        for index in 0..<30 {
            try rig.store.addTodo(NewTodo(title: "Stream \(index)", deadline: day))
            await rig.engine.localWrite()
            await settle(rig.engine)
            XCTAssertEqual(rig.pushes, 1, "not before the cap")
            rig.clock.advance(by: 0.01)
        }
        await waitFor("the capped push, 0.3 s after the stream's first write") { rig.pushes == 2 }
        XCTAssertEqual(rig.server.pushes[1].count, 30, "the writes of the first 0.3 s")
        await rig.engine.stop()
    }

    /// Issue 39, item 6: another process's write to the store file (here another connection on
    /// it, as another `todosync-client` invocation is) wakes the engine through the file's change
    /// (inotify), with no poll: the clock never moves, so a poll would never look. With
    /// `storeWake: .poll` (the engine before) this test fails: nothing wakes it.
    func testAWriteOfAnotherProcessWakesTheEngineThroughTheStoreFile() async throws {
        #if !os(Linux)
        throw XCTSkip("inotify is Linux's; elsewhere the engine polls (the next test)")
        #else
        let rig = try rig(settings: SyncEngine.Settings(storeCheckInterval: 3600, quiet: 0))
        await started(rig)
        await waitFor("the store watch") { await rig.engine.storeWatch == .onChange }
        let other = try LocalStore(path: rig.store.path)
        // A second write comes during the first one's sync, after its push: it is looked at once
        // that sync is over.
        let day = self.day
        rig.server.whileNextPull { _ = try? other.addTodo(NewTodo(title: "During the sync", deadline: day)) }
        try other.addTodo(NewTodo(title: "From another process", deadline: day))
        await waitFor("the other process's write pushed") { rig.pushes >= 1 }
        XCTAssertEqual(rig.server.pushes.first?.count, 1)
        await waitFor("the write made during that sync pushed too") { rig.pushes == 2 }
        await waitFor("both acknowledged") { (try? rig.store.pendingCount()) == 0 }
        XCTAssertEqual(rig.log.synced.last, .localWrite)
        await rig.engine.stop()
        #endif
    }

    /// `storeWake: .poll` (and any platform without inotify): the file is looked at every
    /// `storeCheckInterval`, and only then.
    func testWithStoreWakePollTheFileIsLookedAtEveryInterval() async throws {
        let rig = try rig(settings: SyncEngine.Settings(storeCheckInterval: 5, quiet: 0, storeWake: .poll))
        await started(rig)
        await waitFor("the poll") { await rig.engine.storeWatch == .poll }
        let other = try LocalStore(path: rig.store.path)
        try other.addTodo(NewTodo(title: "From another process", deadline: day))
        await settle(rig.engine)
        XCTAssertEqual(rig.pushes, 0, "not before the poll looks")
        rig.clock.advance(by: 5)
        await waitFor("the push after the poll") { rig.pushes == 1 }
        await rig.engine.stop()
    }

    func testAPokeFromAnotherDevicePullsAndOurOwnDoesNot() async throws {
        let rig = try rig()
        await started(rig)
        let before = rig.pulls
        rig.live.send(.poke(version: 7, deviceID: try rig.store.deviceID))
        await settle(rig.engine)
        try await Task.sleep(nanoseconds: 20_000_000)
        XCTAssertEqual(rig.pulls, before, "its own poke pulls nothing")
        rig.live.send(.poke(version: 8, deviceID: "another-device"))
        await waitFor("a pull after the poke") { rig.pulls == before + 1 }
        rig.live.send(.poke(version: 9, deviceID: nil))
        await waitFor("a pull after a REST write's poke") { rig.pulls == before + 2 }
        await waitFor("both synced") { rig.log.synced.suffix(2) == [.poke, .poke] }
        await rig.engine.stop()
    }

    func testTheStreamOpeningPullsAndAStreamThatBreaksReconnectsWithJitteredBackoff() async throws {
        let rig = try rig(random: { $0.upperBound / 2 })
        await started(rig)
        XCTAssertTrue(rig.log.synced.contains(.streamOpened) || rig.log.synced.contains(.start))
        let before = rig.pulls
        rig.live.drop()
        await waitFor("the reconnect wait") { rig.log.events.contains { if case .disconnected = $0 { return true } else { return false } } }
        guard case .disconnected(_, let retryIn)? = rig.log.events.last(where: { if case .disconnected = $0 { return true } else { return false } }) else {
            return XCTFail("no disconnect")
        }
        XCTAssertEqual(retryIn, 2.5, "half of the first ceiling (5 s), as the jitter said")
        XCTAssertEqual(rig.live.opens, 1, "no reconnect before the backoff")
        rig.clock.advance(by: 2.5)
        await waitFor("the reconnect and its pull") { rig.live.opens == 2 && rig.pulls == before + 1 }
        await waitFor("synced because the stream opened") { rig.log.synced.last == .streamOpened }
        await rig.engine.stop()
    }

    func testNetworkGoneHoldsSyncsAndItsReturnSyncsAtOnce() async throws {
        let (reachability, network) = AsyncStream.makeStream(of: Bool.self)
        let rig = try rig(reachability: reachability)
        await started(rig)
        network.yield(false)
        await waitFor("offline") { rig.log.events.contains(.reachability(false)) }
        try rig.store.addTodo(NewTodo(title: "Offline edit", deadline: day))
        await rig.engine.localWrite()
        rig.clock.advance(by: 120)
        await settle(rig.engine)
        XCTAssertEqual(rig.pushes, 0, "no attempt while the network is gone, not even the timer")
        network.yield(true)
        // At once, with no clock move: the held write (labelled by it) goes out now.
        await waitFor("a push on the network's return") { rig.pushes == 1 }
        await waitFor("synced") { rig.log.synced.count == 2 || rig.log.synced.count == 3 }
        await rig.engine.stop()
    }

    func testAFailedSyncIsRetriedByItselfWithGrowingJitteredBackoff() async throws {
        let rig = try rig()
        rig.server.set(.unreachable)
        await rig.engine.start()
        await waitFor("the first failure") { rig.log.failures.count == 1 }
        try rig.store.addTodo(NewTodo(title: "Waits for the server", deadline: day))
        await rig.engine.localWrite()
        // random = the ceiling: 1, 2, 4, 8, … seconds.
        for (attempt, wait) in [1.0, 2, 4, 8, 16].enumerated() {
            await waitFor("failure \(attempt + 1)") { rig.log.failures.count == attempt + 1 }
            XCTAssertEqual(rig.log.failures[attempt], wait)
            await settle(rig.engine)
            rig.clock.advance(by: wait - 0.01)
            await settle(rig.engine)
            XCTAssertEqual(rig.log.attempts, attempt + 1, "no attempt before the backoff ends, not even for the local write")
            rig.clock.advance(by: 0.01)
        }
        await waitFor("attempt 6") { rig.log.failures.count == 6 }
        rig.server.set(.answer)
        await settle(rig.engine)
        rig.clock.advance(by: 32)
        await waitFor("the retry pushes without a new edit") { rig.pushes == 1 }
        await waitFor("synced") { rig.log.synced.last == .retry }
        XCTAssertEqual(try rig.store.pendingCount(), 0)
        await rig.engine.stop()
    }

    func testRetryAfterIsAFloorOfTheBackoff() async throws {
        final class Busy: HTTPTransport, @unchecked Sendable {
            func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
                (Data(#"{"error":{"code":"unavailable","message":"busy"}}"#.utf8),
                 HTTPURLResponse(url: request.url!, statusCode: 503, httpVersion: "HTTP/1.1", headerFields: ["Retry-After": "42"])!)
            }
        }
        let rig = try rig(transport: Busy(), random: { $0.lowerBound })
        await rig.engine.start()
        await waitFor("the failure") { rig.log.failures.count == 1 }
        XCTAssertEqual(rig.log.failures, [42])
        await rig.engine.stop()
    }

    /// Ten simulated minutes with the server down and pokes, writes and stream drops arriving:
    /// the engine tries a bounded number of times (the backoff), not once per trigger.
    func testNoSyncStormWhileTheServerIsDown() async throws {
        let rig = try rig(random: { Double.random(in: $0) })
        await started(rig)
        rig.server.set(.unreachable)
        rig.live.refuseWith = 502
        rig.live.drop()
        let start = rig.log.attempts
        for second in 0..<600 {
            if second % 3 == 0 {
                try rig.store.addTodo(NewTodo(title: "Edit \(second)", deadline: day))
                await rig.engine.localWrite()
            }
            await settle(rig.engine)
            rig.clock.advance(by: 1)
        }
        await settle(rig.engine)
        let attempts = rig.log.attempts - start
        XCTAssertGreaterThan(attempts, 2, "it kept trying by itself")
        XCTAssertLessThanOrEqual(attempts, 20, "backoff: about log2(600) + a few tries, not 200 (one per edit)")
        XCTAssertLessThanOrEqual(rig.live.opens, 25, "the stream reconnects with backoff too (about 14 expected)")
        await rig.engine.stop()
    }

    func testTriggersDuringASyncCoalesceIntoOneFollowUp() async throws {
        let rig = try rig()
        await started(rig)
        rig.server.holdPushes()
        try rig.store.addTodo(NewTodo(title: "Held", deadline: day))
        await rig.engine.localWrite()
        rig.clock.advance(by: 0.3)
        await rig.server.waitForPushes(1)
        let syncsBefore = rig.log.attempts
        for version in 10..<30 { rig.live.send(.poke(version: Int64(version), deviceID: "other")) }
        await rig.engine.appDidBecomeActive()
        try await Task.sleep(nanoseconds: 20_000_000)
        rig.server.release()
        await waitFor("the follow-up") { rig.log.attempts > syncsBefore && rig.log.synced.count == rig.log.attempts }
        await settle(rig.engine)
        try await Task.sleep(nanoseconds: 20_000_000)
        XCTAssertEqual(rig.log.attempts, syncsBefore + 1, "twenty pokes and an app activation during a sync: one follow-up")
        await rig.engine.stop()
    }

    func testStatusSaysIdleOfflineAndNeedsAttention() async throws {
        let rig = try rig()
        await started(rig)
        guard case .idle = await rig.engine.status else { return XCTFail("\(await rig.engine.status)") }
        rig.server.answer(.rejected("validation_failed"))
        try rig.store.addTodo(NewTodo(title: "Refused", deadline: day))
        await rig.engine.localWrite()
        rig.clock.advance(by: 0.3)
        await waitFor("a sync with the rejection") { rig.pushes == 1 && rig.log.synced.last == .localWrite }
        let attention = await rig.engine.status
        XCTAssertEqual(attention, .needsAttention(conflicts: 0, rejected: 1))
        rig.server.set(.unreachable)
        await rig.engine.appDidBecomeActive()
        await waitFor("the failure") { rig.log.failures.count == 1 }
        guard case .offline = await rig.engine.status else { return XCTFail("\(await rig.engine.status)") }
        await rig.engine.stop()
        let stopped = await rig.engine.status
        XCTAssertEqual(stopped, .stopped(.requested))
    }

    func testA426StopsTheEngineAndKeepsTheQueue() async throws {
        let rig = try rig(schemaVersion: 1)
        rig.server.requireSchemaVersion(2)
        try rig.store.addTodo(NewTodo(title: "Kept", deadline: day))
        await rig.engine.start()
        await waitFor("stopped") { rig.log.events.last.map { if case .stopped = $0 { return true } else { return false } } ?? false }
        XCTAssertEqual(rig.log.events.last, .stopped(.upgradeRequired(UpgradeRequired(minimum: 2, current: 2))))
        XCTAssertEqual(try rig.store.pendingCount(), 1)
        let requests = rig.server.requests.count
        rig.clock.advance(by: 3600)
        await rig.engine.localWrite()
        try await Task.sleep(nanoseconds: 20_000_000)
        XCTAssertEqual(rig.server.requests.count, requests, "nothing more is sent")
    }

    func testA401StopsTheEngine() async throws {
        let rig = try rig(transport: RefusingTransport(status: 401))
        await rig.engine.start()
        await waitFor("stopped") { rig.log.events.last.map { if case .stopped = $0 { return true } else { return false } } ?? false }
        XCTAssertEqual(rig.log.events.last, .stopped(.loginRequired))
        XCTAssertEqual(rig.log.attempts, 1)
        let status = await rig.engine.status
        XCTAssertEqual(status, .stopped(.loginRequired))
        XCTAssertTrue(try rig.store.status().signedOut, "the store says: signed out, log in again")
    }

    func testStopEndsEverythingAndLaterTriggersDoNothing() async throws {
        let rig = try rig()
        await started(rig)
        await rig.engine.stop()
        XCTAssertEqual(rig.log.events.last, .stopped(.requested))
        XCTAssertEqual(rig.clock.waiting.count, 0, "no wait left behind")
        let requests = rig.server.requests.count
        await rig.engine.localWrite()
        rig.live.send(.poke(version: 99, deviceID: "other"))
        rig.clock.advance(by: 3600)
        try await Task.sleep(nanoseconds: 20_000_000)
        XCTAssertEqual(rig.server.requests.count, requests)
    }
}

/// The Server-Sent Events reader, fed the way the network delivers: in arbitrary chunks.
final class SSEParserTests: XCTestCase {
    func testPokesSplitAcrossChunksCommentsAndCRLF() {
        var parser = SSEParser()
        let stream = ": hi\n\nid: 1:0\ndata: {\"version\": 7, \"deviceId\": \"dev-a\"}\n\n: ping\r\n\r\ndata: {\"version\":8,\"deviceId\":null}\r\n\r\ndata: not json\n\n"
        var events: [LiveEvent] = []
        var bytes = Array(stream.utf8)[...]
        while !bytes.isEmpty {
            let chunk = bytes.prefix(5)
            bytes = bytes.dropFirst(5)
            events += parser.feed(chunk)
        }
        XCTAssertEqual(events, [.poke(version: 7, deviceID: "dev-a"), .poke(version: 8, deviceID: nil)])
    }
}
