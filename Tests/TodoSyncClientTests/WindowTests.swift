import Foundation
import GRDB
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// A device that holds a window of its account (issue 36), in process: the engine's window
/// logic against `WindowServer`, a fake of the contract's window pulls, on real SQLite files.
final class WindowTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("window-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// Today, as the device's clock says (tests move it).
    final class Today: @unchecked Sendable {
        private let lock = NSLock()
        private var day: Day
        init(_ day: Day) { self.day = day }
        var value: Day {
            get { lock.lock(); defer { lock.unlock() }; return day }
            set { lock.lock(); day = newValue; lock.unlock() }
        }
    }

    func device(_ server: WindowServer, window: WindowSetting? = nil, today: Today = Today(Day("2026-11-24")!),
                hooks: SyncHooks = SyncHooks()) throws -> TodoSyncClient {
        let store = try LocalStore(path: directory.appendingPathComponent("\(UUID().uuidString).sqlite").path)
        try store.signIn(userID: 1, email: "me@example.com", token: "token")
        return TodoSyncClient(store: store, baseURL: URL(string: "http://fake.invalid")!, transport: server,
                              retry: RetryPolicy(maxAttempts: 1), clock: TestClock(), hooks: hooks, useSnapshot: false,
                              window: window, today: { today.value })
    }

    /// The device's todos as the server lists them: "id title deadline".
    func held(_ client: TodoSyncClient) throws -> Set<String> {
        Set(try client.store.allTodos().map { "\($0.serverID ?? 0) \($0.title) \($0.deadline)" })
    }

    /// The dates of the daily stats the device holds (tombstones included).
    func statDates(_ client: TodoSyncClient) throws -> Set<String> {
        try client.store.pool.read { Set(try DailyStatRecord.fetchAll($0).filter { $0.deletedAt == nil }.map(\.date)) }
    }

    func day(_ text: String) -> Day { Day(text)! }

    func testAWindowDeviceHoldsItsWindowAndForgetsWhatLeavesIt() async throws {
        let server = WindowServer()
        let old = server.createTodo("Tax return 2019", deadline: "2019-04-30")
        let near = server.createTodo("Dentist", deadline: "2026-11-20")
        server.createTodo("Call mum", deadline: "2026-11-24")
        let window = SyncWindow(from: day("2026-11-01"), to: nil)!
        let phone = try device(server, window: .dates(from: window.from, to: nil))

        let first = try await phone.sync()
        XCTAssertEqual(first.window, window)
        XCTAssertEqual(try held(phone), server.liveTodos(in: window))
        XCTAssertEqual(try statDates(phone), ["2026-11-20", "2026-11-24"])
        XCTAssertEqual(server.pulls.last?["from"], "2026-11-01")
        XCTAssertNil(server.pulls.last?["to"])

        // Another device moves one todo out and an old one in, and deletes nothing.
        server.editTodo(near, ["deadline": .string("2019-05-05")])
        server.editTodo(old, ["deadline": .string("2026-11-30"), "title": .string("Tax return, late")])
        let second = try await phone.sync()
        XCTAssertFalse(second.windowChanged)
        XCTAssertNotNil(server.pulls.last?["cursor"], "the same window goes on with its cursor")
        XCTAssertEqual(try held(phone), server.liveTodos(in: window))
        XCTAssertEqual(try statDates(phone), ["2026-11-24", "2026-11-30"], "the stat of a date outside is not held")
        XCTAssertEqual(try phone.store.heldWindow(), window)
        XCTAssertEqual(server.refused, 0)
    }

    /// A todo this device moves out of its window stays until the server has its change, then
    /// goes (echo suppression keeps it out of `left`, so the device must do it itself).
    func testATodoTheDeviceMovesOutLeavesOnceItsChangeIsAcknowledged() async throws {
        let server = WindowServer()
        server.createTodo("Call mum", deadline: "2026-11-24")
        let phone = try device(server, window: .lastDays(30))
        try await phone.sync()
        let todo = try XCTUnwrap(phone.store.allTodos().first)
        try phone.store.updateTodo(todo.localID, TodoChanges(deadline: day("2020-01-01")))
        XCTAssertEqual(try phone.store.allTodos().count, 1, "queued: still shown")
        try await phone.sync()
        XCTAssertEqual(try phone.store.allTodos(), [], "acknowledged and outside: forgotten")
        XCTAssertEqual(server.liveTodos(in: .whole).count, 1, "the server still has it")
        XCTAssertEqual(try phone.store.pendingCount(), 0)
    }

    /// Widen, move, narrow, each while a change is queued: the window is pulled anew without a
    /// cursor, what falls outside is forgotten, the queued change never is, and it reaches the server.
    func testWindowChangesWithQueuedChangesLoseNothing() async throws {
        let server = WindowServer()
        for (title, date) in [("A", "2026-01-10"), ("B", "2026-06-15"), ("C", "2026-11-20"), ("D", "2026-11-24")] {
            server.createTodo(title, deadline: date)
        }
        let phone = try device(server)
        // Set on the store (as `sync --from` does): a window given to the client would win at each sync.
        try phone.store.setWindowSetting(.dates(from: day("2026-11-01"), to: nil))
        try await phone.sync()
        XCTAssertEqual(try Set(phone.store.allTodos().map(\.title)), ["C", "D"])

        // (window, the held todo edited during the sync, what the device holds after that sync,
        // and after the next one, which sends the edit)
        let steps: [(SyncWindow, String, Set<String>, Set<String>)] = [
            (SyncWindow(from: day("2026-06-01"), to: nil)!, "D", ["B", "C", "D0"], ["B", "C", "D0"]),            // widen
            (SyncWindow(from: day("2026-01-01"), to: day("2026-06-30"))!, "C", ["A", "B", "C1"], ["A", "B"]),    // move
            (SyncWindow(from: day("2026-06-10"), to: day("2026-06-20"))!, "A", ["B", "A2"], ["B"]),               // narrow
        ]
        for (index, (window, target, during, after)) in steps.enumerated() {
            let todo = try XCTUnwrap(phone.store.allTodos().first { $0.title == target }, "step \(index)")
            // The user edits while the sync runs, after its push, before its pull answers.
            let store = phone.store, title = "\(target)\(index)"
            server.beforePull = { _ = try? store.updateTodo(todo.localID, TodoChanges(title: title)) }
            // And something went out with the push before it.
            try phone.store.addTodo(NewTodo(title: "N\(index)", deadline: day("2026-06-15")))
            try phone.store.setWindowSetting(.dates(from: window.from, to: window.to))
            let report = try await phone.sync()
            XCTAssertTrue(report.windowChanged, "step \(index)")
            let anew = try XCTUnwrap(server.pulls.last { $0["cursor"] == nil })
            XCTAssertEqual(anew["from"], window.from?.description)
            XCTAssertEqual(anew["to"], window.to?.description)
            let news = Set((0...index).map { "N\($0)" })
            XCTAssertEqual(try phone.store.pendingCount(), 1, "step \(index): the edit made during the sync is queued")
            XCTAssertEqual(try Set(phone.store.allTodos().map(\.title)), during.union(news),
                           "step \(index): the window's todos, and the queued one")
            // The next sync sends it; then a todo outside goes.
            try await phone.sync()
            XCTAssertEqual(try phone.store.pendingCount(), 0)
            XCTAssertEqual(try Set(phone.store.allTodos().map(\.title)), after.union(news), "step \(index)")
            XCTAssertTrue(server.liveTodos(in: .whole).contains { $0.contains(" \(target)\(index) ") }, "step \(index): the edit arrived")
            XCTAssertEqual(try held(phone), server.liveTodos(in: window), "step \(index)")
        }
        XCTAssertEqual(server.refused, 0, "no cursor was ever sent with another window")
        // Back to the whole account: everything again.
        try phone.store.setWindowSetting(.whole)
        let whole = try await phone.sync()
        XCTAssertTrue(whole.windowChanged)
        XCTAssertEqual(try held(phone), server.liveTodos(in: .whole))
        XCTAssertNil(server.pulls.last?["from"])
    }

    /// A window of the last N days moves with the date without being pulled anew each day: the
    /// device goes on with its cursor (the window it belongs to still contains the moved one),
    /// forgets the days that slid out, and treats what the cursor brings there as `left`. Once
    /// the cursor's start is more than N days behind, the moved window is pulled anew (once
    /// every N days, not every day).
    func testAWindowOfTheLastDaysMovesWithTheDateWithoutPullingItAnew() async throws {
        let server = WindowServer()
        let early = server.createTodo("Early", deadline: "2026-10-26")
        server.createTodo("Later", deadline: "2026-11-20")
        let today = Today(day("2026-11-24"))
        let phone = try device(server, window: .lastDays(30), today: today)
        try await phone.sync()
        XCTAssertEqual(server.pulls.last?["from"], "2026-10-25")
        XCTAssertEqual(try Set(phone.store.allTodos().map(\.title)), ["Early", "Later"])
        let again = try await phone.sync()
        XCTAssertFalse(again.windowChanged, "the same day: the same window, its cursor")

        today.value = day("2026-11-28")
        let moved = try await phone.sync()
        XCTAssertFalse(moved.windowChanged, "four days later: the same cursor, not the whole window again")
        XCTAssertNotNil(server.pulls.last?["cursor"])
        XCTAssertEqual(server.pulls.last?["from"], "2026-10-25", "the cursor's window")
        XCTAssertEqual(moved.window, SyncWindow(from: day("2026-10-29"), to: nil)!, "the window held")
        XCTAssertEqual(try phone.store.heldWindow(), moved.window)
        XCTAssertEqual(try Set(phone.store.allTodos().map(\.title)), ["Later"], "the day that slid out is forgotten")
        XCTAssertEqual(try statDates(phone), ["2026-11-20"])

        // Another device edits the todo that slid out (the cursor brings it: it stays out) and
        // moves an old one in.
        server.editTodo(early, ["title": .string("Early, edited")])
        server.createTodo("Old", deadline: "2020-01-01")
        let old = server.createTodo("Old, moved in", deadline: "2020-01-02")
        server.editTodo(old, ["deadline": .string("2026-11-27")])
        let edited = try await phone.sync()
        XCTAssertFalse(edited.windowChanged)
        XCTAssertEqual(try held(phone), server.liveTodos(in: edited.window))
        XCTAssertTrue(edited.changes.contains { $0.left && $0.label == "Early, edited" }, "reported as left")
        XCTAssertGreaterThanOrEqual(edited.recordsLeft, 1)

        // More than 30 days after the cursor's start: the moved window is pulled anew, once.
        today.value = day("2026-12-26")
        let far = try await phone.sync()
        XCTAssertTrue(far.windowChanged)
        let anew = try XCTUnwrap(server.pulls.last)
        XCTAssertNil(anew["cursor"])
        XCTAssertEqual(anew["from"], "2026-11-26")
        XCTAssertEqual(try held(phone), server.liveTodos(in: far.window))
        today.value = day("2026-12-27")
        let next = try await phone.sync()
        XCTAssertFalse(next.windowChanged)
        XCTAssertEqual(server.pulls.last?["from"], "2026-11-26")
        XCTAssertEqual(try phone.store.windowSetting(), .lastDays(30), "remembered by the store")
        XCTAssertEqual(server.refused, 0)
    }

    /// Random histories (client side of issue 36's property): another device creates, edits,
    /// moves deadlines across both edges and deletes; this device edits and moves its own,
    /// changes its window at random (fixed dates, the last N days, the whole account) while
    /// days pass. After each sync with nothing queued, the device holds exactly the server's
    /// live todos in its window, and the daily stats of those dates.
    func testRandomHistoriesAndWindowsLeaveTheDeviceHoldingExactlyItsWindow() async throws {
        for seed in 1...6 {
            var random = ConvergenceTests.Generator(state: UInt64(seed))  // SplitMix64: a seed replays
            let server = WindowServer()
            let today = Today(day("2026-06-15"))
            let phone = try device(server, today: today)
            try phone.store.setWindowSetting(.lastDays(20))
            var ids: [Int64] = []
            func someDate() -> String {
                // Mostly near the windows' edges (2026-05-10 … 2026-07-20), sometimes far.
                let offset = Int.random(in: 0..<10, using: &random) == 0 ? Int.random(in: -2000..<400, using: &random) : Int.random(in: -36..<35, using: &random)
                return day("2026-06-15").adding(days: offset).description
            }
            for step in 0..<30 {
                for _ in 0..<Int.random(in: 1..<5, using: &random) {
                    switch Int.random(in: 0..<10, using: &random) {
                    case 0...2: ids.append(server.createTodo("t\(seed).\(step).\(ids.count)", deadline: someDate()))
                    case 3...5 where !ids.isEmpty: server.editTodo(ids[Int.random(in: 0..<ids.count, using: &random)], ["deadline": .string(someDate())])
                    case 6 where !ids.isEmpty: server.editTodo(ids[Int.random(in: 0..<ids.count, using: &random)], ["title": .string("e\(seed).\(step)")])
                    case 7 where !ids.isEmpty: server.deleteTodo(ids[Int.random(in: 0..<ids.count, using: &random)])
                    case 8:
                        // This device moves one of its own (a move out leaves once acknowledged).
                        let mine = try phone.store.allTodos()
                        if !mine.isEmpty {
                            let todo = mine[Int.random(in: 0..<mine.count, using: &random)]
                            try phone.store.updateTodo(todo.localID, TodoChanges(deadline: Day(someDate())!))
                        }
                    default:
                        try phone.store.addTodo(NewTodo(title: "m\(seed).\(step)", deadline: Day(someDate())!))
                    }
                }
                switch Int.random(in: 0..<12, using: &random) {
                case 0: try phone.store.setWindowSetting(.lastDays(Int.random(in: 0..<40, using: &random)))
                case 1:
                    let from = day(someDate()), to = day(someDate())
                    try phone.store.setWindowSetting(.dates(from: min(from, to), to: Int.random(in: 0..<3, using: &random) == 0 ? nil : max(from, to)))
                case 2: try phone.store.setWindowSetting(.whole)
                case 3...5: today.value = today.value.adding(days: Int.random(in: 1..<8, using: &random))
                default: break
                }
                let report = try await phone.sync()
                XCTAssertEqual(try phone.store.pendingCount(), 0, "seed \(seed) step \(step)")
                let window = report.window
                XCTAssertEqual(try held(phone), server.liveTodos(in: window), "seed \(seed) step \(step): the todos of \(window)")
                let dates = Set(try phone.store.allTodos().map(\.deadline.description))
                XCTAssertEqual(try statDates(phone), dates, "seed \(seed) step \(step): the stats of the held dates")
                if try held(phone) != server.liveTodos(in: window) { return }
            }
            XCTAssertEqual(server.refused, 0, "seed \(seed): no cursor was sent with another window")
        }
    }

    func testPurgeRefusesQueuedChangesUnlessForcedAndNarrowsTheWindow() async throws {
        let server = WindowServer()
        server.createTodo("2019", deadline: "2019-03-01")
        server.createTodo("2025", deadline: "2025-06-01")
        server.createTodo("Now", deadline: "2026-11-24")
        let phone = try device(server)
        try await phone.sync()
        XCTAssertEqual(try phone.store.allTodos().count, 3)
        let old = try XCTUnwrap(phone.store.allTodos().first { $0.title == "2019" })
        try phone.store.updateTodo(old.localID, TodoChanges(isCompleted: true))
        try phone.store.addTodo(NewTodo(title: "Offline, old", deadline: day("2024-01-01")))

        XCTAssertThrowsError(try phone.purge(before: day("2026-01-01"))) { error in
            guard case PurgeError.queuedChanges(let changes) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(Set(changes.map(\.title)), ["2019", "Offline, old"])
        }
        XCTAssertEqual(try phone.store.allTodos().count, 4, "refused: nothing removed")
        XCTAssertEqual(try phone.store.pendingCount(), 2)

        let report = try phone.purge(before: day("2026-01-01"), force: true)
        XCTAssertEqual(report.changesDropped, 2)
        XCTAssertEqual(report.todosRemoved, 3)
        XCTAssertEqual(report.window, SyncWindow(from: day("2026-01-01"), to: nil)!)
        XCTAssertEqual(try phone.store.allTodos().map(\.title), ["Now"])
        XCTAssertEqual(try statDates(phone), ["2026-11-24"])
        XCTAssertEqual(try phone.store.pendingCount(), 0)

        // The next pull is of the narrowed window: nothing purged comes back.
        let sync = try await phone.sync()
        XCTAssertTrue(sync.windowChanged)
        XCTAssertEqual(server.pulls.last?["from"], "2026-01-01")
        XCTAssertEqual(try phone.store.allTodos().map(\.title), ["Now"])
        XCTAssertEqual(server.liveTodos(in: .whole).count, 3, "a purge changes nothing on the server")
        XCTAssertFalse(server.liveTodos(in: .whole).contains { $0.contains("Offline") }, "the dropped create was never sent")

        // Setting another window lifts the purge's floor.
        try phone.store.setWindowSetting(.dates(from: day("2025-01-01"), to: nil))
        try await phone.sync()
        XCTAssertEqual(try Set(phone.store.allTodos().map(\.title)), ["2025", "Now"])
    }

    func testAPurgeWithoutQueuedChangesNeedsNoForce() async throws {
        let server = WindowServer()
        server.createTodo("Old", deadline: "2020-03-01")
        server.createTodo("Now", deadline: "2026-11-24")
        let phone = try device(server, window: .lastDays(3650))
        try await phone.sync()
        let report = try phone.purge(before: day("2021-01-01"))
        XCTAssertEqual(report.todosRemoved, 1)
        XCTAssertEqual(report.changesDropped, 0)
        XCTAssertEqual(try phone.store.heldWindow()?.from, day("2021-01-01"))
        try await phone.sync()
        XCTAssertEqual(server.pulls.last?["from"], "2021-01-01", "the purge's date, not the setting's 2016-11-26")
        XCTAssertEqual(try phone.store.allTodos().map(\.title), ["Now"])
    }

    /// The live engine keeps the window: its first sync pulls the window, and a poke for another
    /// device's change that moves a todo out leads to a pull whose `left` forgets it.
    func testTheSyncEngineFollowsTheWindowThroughPokes() async throws {
        let server = WindowServer()
        server.createTodo("Old", deadline: "2020-01-01")
        let now = server.createTodo("Now", deadline: "2026-11-24")
        let phone = try device(server, window: .lastDays(30))
        let live = FakeLiveStream()
        let engine = SyncEngine(client: phone, live: live, clock: ManualClock())
        let log = EventLog(engine)
        await engine.start()
        await waitFor("the first sync") { log.synced.count >= 1 }
        await settle(engine)
        XCTAssertEqual(try phone.store.allTodos().map(\.title), ["Now"])
        XCTAssertEqual(server.pulls.first?["from"], "2026-10-25")

        // (The stream's opening may have brought a second sync already: count from here.)
        let synced = log.synced.count
        server.editTodo(now, ["deadline": .string("2019-01-01")])
        live.send(.poke(version: 99, deviceID: nil))
        await waitFor("the poke's sync") { log.synced.count > synced }
        await settle(engine)
        XCTAssertEqual(try phone.store.allTodos(), [], "left: forgotten")
        XCTAssertNotNil(server.pulls.last?["cursor"])
        XCTAssertEqual(server.pulls.last?["from"], "2026-10-25")
        await engine.stop()
    }

    func testTheWindowIsStoredAndResolved() throws {
        for setting in [WindowSetting.whole, .lastDays(90), .dates(from: day("2026-01-01"), to: nil),
                        .dates(from: nil, to: day("2026-12-31")), .dates(from: day("2026-01-01"), to: day("2026-03-31"))] {
            XCTAssertEqual(WindowSetting(stored: setting.stored), setting)
        }
        XCTAssertEqual(WindowSetting.lastDays(90).window(today: day("2026-03-01")).from, day("2025-12-01"))
        XCTAssertEqual(day("2024-03-01").adding(days: -1), day("2024-02-29"))
        XCTAssertEqual(day("2000-01-05").adding(days: -30), Day.minimum)
        XCTAssertFalse(SyncWindow(from: day("2026-01-01"), to: day("2026-01-31"))!.contains(day("2026-02-01")))
    }
}

