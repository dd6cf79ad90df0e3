import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// Friends through the real stack (issue 37, client half): two real clients become friends; one
/// watches the other's month through a `FriendsLiveView` while the other edits, and the view
/// matches the friend's own list (`GET /todos?from&to` with the friend's token) within 5 s,
/// before and after nginx is restarted. `FriendsClientTests` pins the rules in process.
final class FriendsStackTests: StackTestCase {
    let month = CalendarMonth("2026-11")!

    /// A device of a new account of its own.
    func account(_ name: String) async throws -> (device: Device, email: String) {
        let email = "\(name.lowercased())-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let device = try Device(name, directory: directory, baseURL: baseURL)
        try await device.client.register(email: email, password: password)
        return (device, email)
    }

    /// `a` asks `b` and `b` accepts: returns a's user id as b sees it.
    func befriend(_ a: (device: Device, email: String), _ b: (device: Device, email: String)) async throws -> Int64 {
        try await a.device.client.sendFriendRequest(to: b.email)
        let incoming = try await b.device.client.friendRequests().incoming
        let request = try XCTUnwrap(incoming.first { $0.from.email == a.email }, "\(incoming)")
        return try await b.device.client.acceptFriendRequest(request.id).id
    }

    /// The friend's own todos of the month, as (id, title, done), in the server's order.
    func ownList(_ device: Device) async throws -> [String] {
        try await serverItems("/api/v1/todos?from=2026-11-01&to=2026-11-30", token: device.token).map {
            "\($0["id"]?.int64Value ?? 0) \($0["title"]?.stringValue ?? "") \($0["isCompleted"]?.boolValue ?? false)"
        }
    }

    static func shown(_ month: FriendMonth?) -> [String] {
        (month?.todos ?? []).map { "\($0.id) \($0.title) \($0.isCompleted)" }
    }

    func testAWatchersViewOfAFriendsMonthFollowsTheFriendsEditsAcrossAnNginxRestart() async throws {
        let friend = try await account("Ada")
        let watcher = try await account("Bob")
        let friendID = try await befriend(friend, watcher)
        let listed = try await watcher.device.client.friends().map(\.id)
        XCTAssertEqual(listed, [friendID])
        try await friend.device.client.setNickname("Ada 🌿")

        // The watcher's own sync engine; its timer is an hour away, so only the stream can help.
        let engine = SyncEngine(client: watcher.device.client,
                                settings: SyncEngine.Settings(interval: 3600, liveInitialBackoff: 1, liveMaxBackoff: 2))
        let log = EventLog(engine)
        await engine.start()
        let view = engine.friendMonthView(friendID: friendID, month: month)
        await view.start()
        await waitFor("the stream with friends events is open", timeout: 10) { log.events.contains(.connected) }
        let watching = await engine.watchesFriends
        XCTAssertTrue(watching)

        func edit(_ what: String, _ change: () throws -> Void) async throws {
            try change()
            try await friend.device.client.sync()
            let expected = try await ownList(friend.device)
            await waitFor("the watcher's view shows \(what)", timeout: 5) { Self.shown(await view.state.value) == expected }
        }
        let day = Day("2026-11-24")!
        var first: Int64 = 0
        try await edit("a new todo") { first = try friend.device.store.addTodo(NewTodo(title: "Write report", deadline: day)).localID }
        try await edit("a second todo") { _ = try friend.device.store.addTodo(NewTodo(title: "Gym", deadline: Day("2026-11-03")!)) }
        try await edit("a todo done") { _ = try friend.device.store.updateTodo(first, TodoChanges(isCompleted: true)) }
        let stat = await view.state.value?.busyDays.first { $0.day == day }?.stat
        XCTAssertEqual(stat?.completedCount, 1, "the day's stat came with the month")
        XCTAssertTrue(log.events.contains(.friend(friendID: friendID)), "refreshed by friend events")

        // nginx restarts: the stream ends, reopens by itself, and the view catches up with what
        // the friend did meanwhile, then follows the next edits again.
        let opened = log.events.filter { $0 == .connected }.count
        try Stack.restartNginx()
        try await edit("an edit across the restart") { _ = try friend.device.store.addTodo(NewTodo(title: "During the restart", deadline: day)) }
        await waitFor("the stream reopened", timeout: 10) { log.events.filter { $0 == .connected }.count > opened }
        try await edit("an edit after the restart") { _ = try friend.device.store.deleteTodo(first) }

        // The friendship ends: the view says not found.
        let friendsOfFriend = try await friend.device.client.friends()
        let watcherID = try XCTUnwrap(friendsOfFriend.first?.id)
        try await friend.device.client.removeFriend(watcherID)
        await waitFor("the view knows the friendship ended", timeout: 5) {
            if case .failed(let error, _) = await view.state { return (error as? FriendsError) == .notFound }
            return false
        }
        // The engine first: its stop ends the view's events, and no stream reopens (a view
        // stopped first reopens the stream without friends=1, and that opening syncs).
        await engine.stop()
        await view.stop()
    }
}

/// `todosync-client friends …` and `nickname` with `--json`, against the stack.
extension TerminalClientTests {
    func testFriendsCommandsRequestAcceptShowAMonthAndRemove() throws {
        let (a, b, other) = try twoStores()

        XCTAssertEqual(try json(["nickname", "  Ada  "], path: a)["nickname"], .string("Ada"))
        let refused = try run(["nickname", String(repeating: "x", count: 41), "--json"], path: a)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        XCTAssertEqual(failure(refused)["code"], .string("validation_failed"))
        XCTAssertEqual(try json(["nickname"], path: a)["nickname"], .string("Ada"), "a refused nickname keeps the old one")

        XCTAssertEqual(try json(["friends", "add", other], path: a)["requested"], .string(other))
        let outgoing = try json(["friends", "requests"], path: a)["outgoing"]?.arrayValue ?? []
        XCTAssertEqual(outgoing.compactMap { $0.objectValue?["email"] }, [.string(other)])
        let incoming = try json(["friends", "requests"], path: b)["incoming"]?.arrayValue?.compactMap(\.objectValue) ?? []
        XCTAssertEqual(incoming.count, 1)
        XCTAssertEqual(incoming.first?["from"]?.objectValue?["nickname"], .string("Ada"))
        let requestID = try XCTUnwrap(incoming.first?["id"]?.int64Value)
        let friend = try XCTUnwrap(try json(["friends", "accept", String(requestID)], path: b)["friend"]?.objectValue)
        let friendID = try XCTUnwrap(friend["id"]?.int64Value)
        XCTAssertEqual(friend["email"], .string(email))
        XCTAssertEqual(try json(["friends"], path: b)["friends"]?.arrayValue?.count, 1)

        try json(["add", "--date", "2026-11-24", "!Write report"], path: a)
        try json(["add", "--date", "2026-11-24", "Gym"], path: a)
        try json(["sync"], path: a)
        let month = try json(["friends", "month", String(friendID), "--month", "2026-11"], path: b)
        XCTAssertEqual(month["month"], .string("2026-11"))
        let days = month["days"]?.arrayValue?.compactMap(\.objectValue) ?? []
        XCTAssertEqual(days.map { $0["date"] }, [.string("2026-11-24")])
        XCTAssertEqual(days.first?["todos"]?.arrayValue?.compactMap { $0.objectValue?["title"] }, [.string("Write report"), .string("Gym")])
        XCTAssertEqual(days.first?["stat"]?.objectValue?["todoCount"], .int(2))
        let keys = Set(days.first?["todos"]?.arrayValue?.first?.objectValue?.keys.map { $0 } ?? [])
        XCTAssertTrue(keys.isDisjoint(with: ["raw", "notes", "remindAt", "clientId", "tagId"]), "\(keys)")
        let human = try run(["friends", "month", String(friendID), "--month", "2026-11"], path: b)
        XCTAssertEqual(human.status, 0, human.stderr)
        XCTAssertTrue(human.stdout.contains("2026-11-24 Tue  ◇ 0/2 done"), human.stdout)
        XCTAssertTrue(human.stdout.contains("[ ] ! Write report"), human.stdout)

        // Not a friend (a made-up id, then the friend once removed): not_found, exit 1.
        for id in [String(friendID + 1_000_000), String(friendID)] {
            if id == String(friendID) { try json(["friends", "remove", id], path: b) }
            let gone = try run(["friends", "month", id, "--json"], path: b)
            XCTAssertEqual(gone.status, 1, gone.stderr)
            XCTAssertEqual(failure(gone)["code"], .string("not_found"))
        }
        let bad = try run(["friends", "month", "1", "--month", "2026-13", "--json"], path: b)
        XCTAssertEqual(bad.status, 2, bad.stderr)
    }

    func testWatchFriendsPrintsALineWhenAFriendsMonthChanges() throws {
        let (a, b, other) = try twoStores()
        try json(["friends", "add", other], path: a)
        try json(["friends", "add", email], path: b)  // crossed requests: friends at once
        let friendID = try XCTUnwrap(try json(["friends"], path: b)["friends"]?.arrayValue?.first?.objectValue?["id"]?.int64Value)

        let output = directory.appendingPathComponent("watch.out")
        FileManager.default.createFile(atPath: output.path, contents: nil)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Stack.clientBinary)
        process.arguments = ["watch", "--friends", "--json", "--db", b]
        process.environment = ProcessInfo.processInfo.environment.merging(["TODOSYNC_SERVER": baseURL.absoluteString]) { $1 }
        process.standardOutput = try FileHandle(forWritingTo: output)
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let file = OutputFile(path: output.path)
        try waitUntil("watch connected", timeout: 10) { file.text.contains(#""event":"connected""#) }
        try json(["add", "--date", "2026-11-24", "Write report"], path: a)
        try json(["sync"], path: a)
        try waitUntil("a friend line", timeout: 5) { file.text.contains(#""event":"friend","friendId":\#(friendID)"#) }
        process.terminate()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, file.text)
    }

    /// Two stores of two new accounts (`email` on `a`, `other` on `b`).
    func twoStores() throws -> (a: String, b: String, other: String) {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        let other = "other-" + email
        try json(["register", "--email", email], path: a)
        try json(["register", "--email", other], path: b)
        return (a, b, other)
    }

    /// Polls (real time) until `condition` holds, or fails the test after `timeout` s.
    func waitUntil(_ what: String, timeout: Double, _ condition: () -> Bool) throws {
        let end = Date().addingTimeInterval(timeout)
        while Date() < end {
            if condition() { return }
            usleep(20_000)
        }
        throw TestFailure("timed out waiting for: \(what)")
    }
}
