import Foundation
import GRDB
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// Windows and purge (issue 36) against the real stack: real SQLite files, the real server's
/// window pulls and windowed snapshots, the terminal client killed mid-change.
final class WindowStackTests: StackTestCase {
    /// The laptop (the whole account) fills 2026 with todos on 40 dates; returns it.
    func seededLaptop(perDate: Int = 3) async throws -> Device {
        let laptop = try await device("laptop")
        try await laptop.store.pool.write { db in
            for index in 0..<(40 * perDate) {
                let deadline = Day("2026-01-05")!.adding(days: (index % 40) * 9)
                _ = try LocalStore.insertTodo(db, try Validate.newTodo(NewTodo(title: "T\(index)", deadline: deadline)))
            }
        }
        try await laptop.client.sync()
        return laptop
    }

    /// The server's live todos with deadlines in `window` (within 2026), as "id title deadline".
    func serverTodos(_ window: SyncWindow, token: String) async throws -> Set<String> {
        let from = max(window.from ?? Day("2026-01-01")!, Day("2026-01-01")!), to = min(window.to ?? Day("2026-12-31")!, Day("2026-12-31")!)
        guard from <= to else { return [] }
        return Set(try await serverItems("/api/v1/todos?from=\(from)&to=\(to)", token: token).map {
            "\($0["id"]?.int64Value ?? 0) \($0["title"]?.stringValue ?? "") \($0["deadline"]?.stringValue ?? "")"
        })
    }

    /// The device holds exactly the server's todos of `window`.
    func assertHolds(_ device: Device, _ window: SyncWindow, _ message: String = "", line: UInt = #line) async throws {
        let server = try await serverTodos(window, token: device.token)
        XCTAssertEqual(try held(device), server, message, line: line)
    }

    func held(_ device: Device) throws -> Set<String> {
        Set(try device.store.allTodos().map { "\($0.serverID ?? 0) \($0.title) \($0.deadline)" })
    }

    func statDates(_ device: Device) throws -> Set<String> {
        Set(try device.store.dailyStats().map(\.date.description))
    }

    func testAWindowDeviceFollowsMovesAcrossItsEdges() async throws {
        let laptop = try await seededLaptop(perDate: 1)
        let phone = try await device("phone")
        let window = SyncWindow(from: Day("2026-06-01")!, to: Day("2026-08-31")!)!
        try phone.store.setWindowSetting(.dates(from: window.from, to: window.to))
        let first = try await phone.client.sync()
        XCTAssertEqual(first.window, window)
        try await assertHolds(phone, window)
        XCTAssertTrue(try statDates(phone).allSatisfy { window.contains(Day($0)!) })
        XCTAssertEqual(try phone.store.tags().count, try laptop.store.tags().count, "every tag")

        // The laptop moves todos across both edges, and deletes one inside.
        let todos = try laptop.store.allTodos()
        let inside = todos.filter { window.contains($0.deadline) }, outside = todos.filter { !window.contains($0.deadline) }
        try laptop.store.updateTodo(inside[0].localID, TodoChanges(deadline: Day("2026-02-02")!))   // out, before
        try laptop.store.updateTodo(inside[1].localID, TodoChanges(deadline: Day("2026-12-12")!))   // out, after
        try laptop.store.updateTodo(outside[0].localID, TodoChanges(deadline: Day("2026-07-07")!))  // in
        try laptop.store.updateTodo(outside[1].localID, TodoChanges(title: "Renamed outside"))      // stays out
        try laptop.store.deleteTodo(inside[2].localID)
        try await laptop.client.sync()

        try await phone.client.sync()
        try await assertHolds(phone, window)
        let stats = try await serverItems("/api/v1/daily-stats?month=2026-07", token: phone.token)
        XCTAssertTrue(try statDates(phone).isSuperset(of: stats.compactMap { $0["date"]?.stringValue }))
        XCTAssertTrue(try statDates(phone).allSatisfy { window.contains(Day($0)!) }, "no stat outside the window")

        // The phone moves one out itself: it goes once the server has the change.
        let mine = try XCTUnwrap(phone.store.allTodos().first)
        try phone.store.updateTodo(mine.localID, TodoChanges(deadline: Day("2026-10-10")!))
        try await phone.client.sync()
        XCTAssertNil(try phone.store.todo(mine.localID))
        try await assertHolds(phone, window)
    }

    /// Widen, move, narrow, each with changes queued on the phone: nothing is lost.
    func testWindowChangesWithQueuedChangesLoseNothing() async throws {
        _ = try await seededLaptop()
        let phone = try await device("phone")
        try phone.store.setWindowSetting(.dates(from: Day("2026-09-01")!, to: nil))
        try await phone.client.sync()
        let windows = [SyncWindow(from: Day("2026-05-01")!, to: nil)!,                          // widen
                       SyncWindow(from: Day("2026-02-01")!, to: Day("2026-06-30")!)!,           // move
                       SyncWindow(from: Day("2026-03-01")!, to: Day("2026-03-31")!)!]           // narrow
        var edited: [String] = []
        for (index, window) in windows.enumerated() {
            // Queued: an edit of a held todo, a new todo outside the new window, one inside.
            let todo = try XCTUnwrap(phone.store.allTodos().first { $0.title.hasPrefix("T") })
            try phone.store.updateTodo(todo.localID, TodoChanges(title: "Edited \(index)"))
            try phone.store.addTodo(NewTodo(title: "New outside \(index)", deadline: Day("2026-12-30")!))
            try phone.store.addTodo(NewTodo(title: "New inside \(index)", deadline: window.from!))
            edited += ["Edited \(index)", "New outside \(index)", "New inside \(index)"]
            try phone.store.setWindowSetting(.dates(from: window.from, to: window.to))
            let report = try await phone.client.sync()
            XCTAssertTrue(report.windowChanged, "step \(index)")
            XCTAssertEqual(try phone.store.pendingCount(), 0)
            try await assertHolds(phone, window, "step \(index)")
        }
        let all = try await serverTodos(.whole, token: phone.token)
        for title in edited { XCTAssertTrue(all.contains { $0.contains(" \(title) ") }, "\(title) reached the server") }
    }

    /// kill -9 inside a page of the new window's pull, with a change queued: the next sync
    /// finishes the change of window, and the queued change reaches the server.
    func testAKillDuringAWindowChangeLosesNothing() async throws {
        _ = try await seededLaptop(perDate: 15)  // 600 todos
        let phone = try await device("phone")
        try await phone.client.sync()
        XCTAssertEqual(try phone.store.allTodos().count, 600)
        let old = try XCTUnwrap(phone.store.allTodos().first { $0.deadline < Day("2026-04-01")! })
        try phone.store.updateTodo(old.localID, TodoChanges(title: "Queued before the kill"))

        let crashed = try cli(["sync", "--from", "2026-06-01", "--page-size", "100", "--quiet"], path: phone.path,
                              crashAt: "page-written:2")
        XCTAssertEqual(crashed.killedBySignal, SIGKILL, crashed.output)
        let store = try LocalStore(path: phone.path)
        XCTAssertEqual(try store.windowSetting(), .dates(from: Day("2026-06-01")!, to: nil), "remembered before the sync began")
        XCTAssertEqual(try store.heldWindow(), .whole, "the change of window is not complete")
        XCTAssertNotNil(try store.todo(old.localID))

        let again = try cli(["sync", "--page-size", "100", "--quiet", "--json"], path: phone.path)
        XCTAssertEqual(again.status, 0, again.output)
        let window = SyncWindow(from: Day("2026-06-01")!, to: nil)!
        XCTAssertEqual(try store.heldWindow(), window)
        try await assertHolds(phone, window)
        XCTAssertEqual(try store.pendingCount(), 0)
        let all = try await serverTodos(.whole, token: phone.token)
        XCTAssertTrue(all.contains { $0.contains(" Queued before the kill ") })
    }

    /// The terminal client: sync --window-days / --from, list --date outside, purge with and
    /// without --force, --json.
    func testTheTerminalClientsWindowAndPurge() async throws {
        _ = try await seededLaptop(perDate: 1)
        let phone = try await device("phone")
        let synced = try cli(["sync", "--from", "2026-06-01", "--to", "2026-09-30", "--json"], path: phone.path)
        XCTAssertEqual(synced.status, 0, synced.output)
        let report = try XCTUnwrap(JSONParser.parse(Array(synced.output.utf8)).objectValue)
        XCTAssertEqual(report["window"], .object(["from": .string("2026-06-01"), "to": .string("2026-09-30")]))

        let outside = try cli(["list", "--date", "2026-03-01"], path: phone.path)
        XCTAssertEqual(outside.status, 0, outside.output)
        XCTAssertTrue(outside.output.contains("outside this device's window (from 2026-06-01 to 2026-09-30)"), outside.output)
        let inside = try cli(["list", "--date", "2026-06-05"], path: phone.path)
        XCTAssertFalse(inside.output.contains("outside"), inside.output)

        // A queued change of a todo before the purge's date: refused, listed, nothing removed.
        let early = try XCTUnwrap(phone.store.allTodos().first { $0.deadline < Day("2026-07-01")! })
        try phone.store.updateTodo(early.localID, TodoChanges(isCompleted: true))
        let count = try phone.store.allTodos().count
        let refused = try cli(["purge", "--before", "2026-07-01", "--json"], path: phone.path)
        XCTAssertEqual(refused.status, 1, refused.output)
        XCTAssertTrue(refused.output.contains("queued_changes") && refused.output.contains(early.title), refused.output)
        XCTAssertEqual(try phone.store.allTodos().count, count)

        let forced = try cli(["purge", "--before", "2026-07-01", "--force"], path: phone.path)
        XCTAssertEqual(forced.status, 0, forced.output)
        XCTAssertTrue(forced.output.contains("Dropped 1 queued change(s)"), forced.output)
        XCTAssertTrue(try phone.store.allTodos().allSatisfy { $0.deadline >= Day("2026-07-01")! })
        XCTAssertEqual(try phone.store.pendingCount(), 0)
        let after = try cli(["sync", "--json"], path: phone.path)
        XCTAssertEqual(after.status, 0, after.output)
        XCTAssertTrue(try phone.store.allTodos().allSatisfy { $0.deadline >= Day("2026-07-01")! }, "the purge stays purged")
        try await assertHolds(phone, SyncWindow(from: Day("2026-07-01")!, to: Day("2026-09-30")!)!)
        let server = try await serverItems("/api/v1/todos?date=\(early.deadline)", token: phone.token)
        XCTAssertEqual(server.first { $0["id"]?.int64Value == early.serverID }?["isCompleted"], .bool(false), "the dropped change never went")

        // Without queued changes no --force is needed; --window-days moves the window.
        let plain = try cli(["purge", "--before", "2026-08-01", "--json"], path: phone.path)
        XCTAssertEqual(plain.status, 0, plain.output)
        let days = try cli(["sync", "--window-days", "30", "--json"], path: phone.path)
        XCTAssertEqual(days.status, 0, days.output)
        XCTAssertEqual(try phone.store.windowSetting(), .lastDays(30))
    }

    /// A new device with a window starts from the server's snapshot of that window.
    func testANewWindowDeviceStartsFromTheWindowsSnapshot() async throws {
        _ = try await seededLaptop(perDate: 2)
        let phone = try await device("phone")
        let window = SyncWindow(from: Day("2026-10-01")!, to: nil)!
        try phone.store.setWindowSetting(.dates(from: window.from, to: nil))
        let report = try await phone.client.sync()
        guard case .installed(let records, _) = report.snapshot else { return XCTFail("\(String(describing: report.snapshot))") }
        XCTAssertEqual(records, try phone.store.allTodos().count + phone.store.tags().count + phone.store.dailyStats().count)
        try await assertHolds(phone, window)
        XCTAssertEqual(try phone.store.heldWindow(), window)
    }
}
