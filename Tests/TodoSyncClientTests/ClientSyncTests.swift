import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The client library against the real stack: devices with their own SQLite files editing the
/// same account offline, then syncing.
final class ClientSyncTests: StackTestCase {
    let day = Day("2026-11-24")!

    func testOfflineEditsReachAnotherDevice() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let work = try phone.store.addTag(name: "Work", color: "#ff8800")
        try phone.store.quickAdd("!Call the bank 30m *2 #work\nGym @life 1h\nRead a book", date: day)
        try phone.store.addTodo(NewTodo(title: "Ünïcödé 📚 한국어", deadline: day, tag: work.localID))
        XCTAssertEqual(try phone.store.pendingCount(), 5)

        let report = try await phone.client.sync()
        XCTAssertEqual(report.results[.applied], 5)
        XCTAssertEqual(try phone.store.pendingCount(), 0)
        XCTAssertTrue(try phone.store.todos(on: day).allSatisfy { $0.serverID != nil && $0.version != nil })

        try await laptop.client.sync()
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
        let bank = try XCTUnwrap(laptop.store.todos(on: day).first)
        XCTAssertEqual(bank.title, "Call the bank")
        XCTAssertTrue(bank.isImportant)
        XCTAssertEqual(bank.estimatedTime, 30)
        XCTAssertEqual(try laptop.store.tag(XCTUnwrap(bank.tagLocalID))?.name, "Work")
        XCTAssertEqual(try laptop.store.dailyStat(for: day)?.todoCount, 4)
    }

    /// The contract's title order (simple-lowercased code points), the same on device and server.
    func testTodosOfADayListInTheServersOrder() async throws {
        let phone = try await device("phone")
        for title in ["Zebra", "äpfel", "apfel", "Apfel", "Éclair", "eclair", "İstanbul", "istanbul"] {
            try phone.store.addTodo(NewTodo(title: title, deadline: day))
        }
        try await phone.client.sync()
        let server = try await serverItems("/api/v1/todos?date=\(day)", token: try phone.token)
        XCTAssertEqual(try phone.store.todos(on: day).map(\.serverID), server.map { $0["id"]?.int64Value })
    }

    /// Echo suppression: a device's incremental pull leaves out what it pushed itself, but
    /// brings the stats the server derived from it and every other device's changes.
    func testAPullLeavesOutTheDevicesOwnChangesButNotDerivedOnes() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        try await phone.client.sync()
        try phone.store.quickAdd("One\nTwo\nThree", date: day)
        let own = try await phone.client.sync()
        XCTAssertEqual(own.results[.applied], 3)
        XCTAssertEqual(own.recordsPulled, 1, "only the day's stat, which the server derived")
        XCTAssertEqual(try phone.store.dailyStat(for: day)?.todoCount, 3)

        try laptop.store.addTodo(NewTodo(title: "From the laptop", deadline: day))
        try await laptop.client.sync()
        let other = try await phone.client.sync()
        XCTAssertEqual(other.recordsPulled, 2, "the laptop's todo and the recomputed stat")
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    /// A UI observing a day sees local writes at once and other devices' changes after a sync;
    /// progress is reported page by page.
    func testObservationAndProgress() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        var updates = phone.store.observeTodos(on: day).makeAsyncIterator()
        let initial = try await updates.next()
        XCTAssertEqual(initial?.count, 0)
        try phone.store.addTodo(NewTodo(title: "Seen at once", deadline: day))
        let afterWrite = try await updates.next()
        XCTAssertEqual(afterWrite?.map(\.title), ["Seen at once"])

        try laptop.store.quickAdd((1...30).map { "From the laptop \($0)" }.joined(separator: "\n"), date: day)
        try await laptop.client.sync()
        let events = ProgressLog()
        try await phone.client.sync(pageSize: 10) { events.append($0) }
        var latest = afterWrite ?? []
        while latest.count < 31, let next = try await updates.next() { latest = next }
        XCTAssertEqual(latest.count, 31)
        let pulls = events.all.filter { $0.phase == .pulling }
        XCTAssertGreaterThanOrEqual(pulls.count, 3, "one report per page")
        XCTAssertEqual(pulls.map(\.recordsPulled), pulls.map(\.recordsPulled).sorted())
        XCTAssertEqual(events.all.first { $0.phase == .pushing }?.operationsSent, 1)
    }

    // MARK: Conflicts, under each policy

    /// Both devices hold the todo; then each edits it offline: the laptop renames it and syncs
    /// first, the phone renames it differently and completes it.
    func conflictingEdits() async throws -> (phone: Device, laptop: Device, localID: Int64) {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let created = try laptop.store.addTodo(NewTodo(title: "Report", deadline: day))
        try await laptop.client.sync()
        try await phone.client.sync()
        let onPhone = try XCTUnwrap(phone.store.todos(on: day).first)
        try laptop.store.updateTodo(created.localID, TodoChanges(title: "Report v2"))
        try phone.store.updateTodo(onPhone.localID, TodoChanges(title: "Report final", isCompleted: true))
        try await laptop.client.sync()
        return (phone, laptop, onPhone.localID)
    }

    func testMergeKeepsTheServersValueWhereBothChangedAndAppliesTheRest() async throws {
        let (phone, laptop, localID) = try await conflictingEdits()
        let report = try await phone.client.sync(policy: .merge)
        XCTAssertEqual(report.results[.merged], 1)
        let todo = try XCTUnwrap(phone.store.todo(localID))
        XCTAssertEqual(todo.title, "Report v2")
        XCTAssertTrue(todo.isCompleted)
        XCTAssertEqual(try phone.store.operations().first?.conflictingFields, ["title"])
        try await laptop.client.sync()
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    func testRejectKeepsTheServersCopyAndSaysConflict() async throws {
        let (phone, laptop, localID) = try await conflictingEdits()
        let report = try await phone.client.sync(policy: .reject)
        XCTAssertEqual(report.results[.conflict], 1)
        let todo = try XCTUnwrap(phone.store.todo(localID))
        XCTAssertEqual(todo.title, "Report v2")
        XCTAssertFalse(todo.isCompleted)
        XCTAssertEqual(try phone.store.operations().first?.status, .conflict, "the dropped edit is visible in the log")
        XCTAssertTrue(try phone.store.conflicts().isEmpty)
        try await laptop.client.sync()
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    func testClientWinsWritesTheLocalValues() async throws {
        let (phone, laptop, localID) = try await conflictingEdits()
        let report = try await phone.client.sync(policy: .clientWins)
        XCTAssertEqual(report.results[.applied], 1)
        XCTAssertEqual(try phone.store.todo(localID)?.title, "Report final")
        try await laptop.client.sync()
        XCTAssertEqual(try laptop.store.todos(on: day).first?.title, "Report final")
        XCTAssertEqual(try laptop.store.todos(on: day).first?.isCompleted, true)
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    func testAskTheAppKeepsBaseLocalAndServerUntilResolved() async throws {
        let (phone, laptop, localID) = try await conflictingEdits()
        let report = try await phone.client.sync(policy: .askApp)
        XCTAssertEqual(report.results[.conflict], 1)
        let conflict = try XCTUnwrap(phone.store.conflicts().first)
        XCTAssertEqual(conflict.recordLocalID, localID)
        XCTAssertEqual(conflict.base, ["title": .string("Report"), "isCompleted": .bool(false)])
        XCTAssertEqual(conflict.local, ["title": .string("Report final"), "isCompleted": .bool(true)])
        XCTAssertEqual(conflict.server["title"], .string("Report v2"))
        XCTAssertEqual(try phone.store.todo(localID)?.title, "Report v2", "the server's copy shows until the app decides")

        try phone.store.resolveConflict(conflict.conflictID, .keepMine)
        XCTAssertTrue(try phone.store.conflicts().isEmpty)
        let second = try await phone.client.sync(policy: .askApp)
        XCTAssertEqual(second.results[.applied], 1, "based on the copy the user saw, the choice cannot conflict")
        try await laptop.client.sync()
        XCTAssertEqual(try laptop.store.todos(on: day).first?.title, "Report final")
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    func testAskTheAppWithAnEditedValue() async throws {
        let (phone, laptop, localID) = try await conflictingEdits()
        try await phone.client.sync(policy: .askApp)
        let conflict = try XCTUnwrap(phone.store.conflicts().first)
        try phone.store.resolveConflict(conflict.conflictID, .edited(["title": .string("Report (both)"), "isCompleted": .bool(true)]))
        try await phone.client.sync(policy: .askApp)
        try await laptop.client.sync()
        XCTAssertEqual(try phone.store.todo(localID)?.title, "Report (both)")
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    func testAnEditOfATodoDeletedElsewhereAsksAndCanRestoreIt() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let created = try laptop.store.addTodo(NewTodo(title: "Maybe", deadline: day))
        try await laptop.client.sync()
        try await phone.client.sync()
        let onPhone = try XCTUnwrap(phone.store.todos(on: day).first)
        try laptop.store.deleteTodo(created.localID)
        try await laptop.client.sync()
        try phone.store.updateTodo(onPhone.localID, TodoChanges(isImportant: true))
        try await phone.client.sync(policy: .askApp)
        let conflict = try XCTUnwrap(phone.store.conflicts().first)
        XCTAssertNotEqual(conflict.server["deletedAt"], .null)
        XCTAssertNil(try phone.store.todo(onPhone.localID), "deleted on the server: hidden until the app decides")
        try phone.store.resolveConflict(conflict.conflictID, .keepMine)
        try await phone.client.sync(policy: .askApp)
        try await laptop.client.sync()
        XCTAssertEqual(try laptop.store.todos(on: day).map(\.title), ["Maybe"], "restored")
        XCTAssertEqual(try laptop.store.todos(on: day).first?.isImportant, true)
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    func testATagDeletedOnOneDeviceWhileAnotherEditsItsTodos() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let tag = try phone.store.addTag(name: "Errands", color: "#00AA55")
        try phone.store.quickAdd("Post office #errands\nPharmacy #errands", date: day)
        try await phone.client.sync()
        try await laptop.client.sync()
        try phone.store.deleteTag(tag.localID)
        let onLaptop = try laptop.store.todos(on: day)
        XCTAssertEqual(onLaptop.compactMap(\.tagLocalID).count, 2)
        let post = try XCTUnwrap(onLaptop.first { $0.title == "Post office" })
        let pharmacy = try XCTUnwrap(onLaptop.first { $0.title == "Pharmacy" })
        try laptop.store.updateTodo(post.localID, TodoChanges(title: "Post office (parcel)"))
        try laptop.store.updateTodo(pharmacy.localID, TodoChanges(isCompleted: true))

        try await phone.client.sync()
        let report = try await laptop.client.sync(policy: .merge)
        XCTAssertEqual(report.results[.applied], 2, "the edits did not touch the tag: no conflict")
        try await phone.client.sync()
        XCTAssertTrue(try laptop.store.tags().isEmpty)
        XCTAssertTrue(try laptop.store.todos(on: day).allSatisfy { $0.tagLocalID == nil })
        XCTAssertEqual(Set(try phone.store.todos(on: day).map(\.title)), ["Post office (parcel)", "Pharmacy"])
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    // MARK: Lost answers, outages, tokens

    func testACreateRetriedAfterALostResponseIsNotDuplicated() async throws {
        let transport = LossyTransport()
        let phone = try await device("phone", transport: transport)
        let created = try phone.store.addTodo(NewTodo(title: "Only once", deadline: day))
        let tag = try phone.store.addTag(name: "Once", color: "#111111")
        transport.loseResponses(of: "/sync/push", count: 2)
        let report = try await phone.client.sync()
        XCTAssertEqual(transport.requests.filter { $0.hasSuffix("/sync/push") }.count, 3, "sent three times, answered once")
        XCTAssertEqual(report.results[.applied], 2)
        XCTAssertEqual(try phone.store.status(ofOperation: XCTUnwrap(created.opID)), .applied)
        XCTAssertEqual(try phone.store.status(ofOperation: XCTUnwrap(tag.opID)), .applied)
        let server = try await serverItems("/api/v1/todos?date=\(day)", token: try phone.token)
        XCTAssertEqual(server.map { $0["title"]?.stringValue }, ["Only once"])
        let tags = try await serverItems("/api/v1/tags", token: try phone.token)
        XCTAssertEqual(tags.count, 1)
        try await assertEqualsServer(phone)
    }

    func testOfflineSyncKeepsEverythingQueued() async throws {
        let phone = try await device("phone")
        try phone.store.addTodo(NewTodo(title: "Offline", deadline: day))
        // Nothing listens on port 9 (discard) of the loopback address.
        let offline = TodoSyncClient(store: phone.store, baseURL: URL(string: "http://127.0.0.1:9")!,
                                     retry: RetryPolicy(maxAttempts: 2, initialDelay: 0.05, maxDelay: 0.1))
        do {
            try await offline.sync()
            XCTFail("a sync without a server must fail")
        } catch let error as SyncError {
            guard case .offline = error else { return XCTFail("expected offline, got \(error)") }
        }
        XCTAssertEqual(try phone.store.pendingCount(), 1)
        XCTAssertNotNil(try phone.store.status().lastSyncError)
        try await phone.client.sync()
        XCTAssertEqual(try phone.store.pendingCount(), 0)
        try await assertEqualsServer(phone)
    }

    func testAnExpiredTokenCallsTheRefreshHookAndKeepsTheOutbox() async throws {
        let first = try await device("phone")
        let refreshes = Counter()
        let email = self.email, password = self.password, baseURL = self.baseURL!
        let phone = try Device("phone-2", directory: directory, baseURL: baseURL, tokenRefresh: {
            refreshes.increment()
            let helper = TodoSyncClient(store: try LocalStore(path: NSTemporaryDirectory() + "/refresh-\(UUID()).sqlite"), baseURL: baseURL)
            try await helper.login(email: email, password: password)
            return try helper.store.token()
        })
        try await phone.client.login(email: email, password: password)
        try phone.store.addTodo(NewTodo(title: "Survives a logout", deadline: day))
        // The token stops working on the server (logged out elsewhere).
        var request = URLRequest(url: baseURL.appendingPathComponent("/api/v1/auth/logout"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(try phone.token)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSessionTransport().send(request)
        XCTAssertEqual(response.statusCode, 204)

        try await phone.client.sync()
        XCTAssertEqual(refreshes.value, 1)
        XCTAssertEqual(try phone.store.pendingCount(), 0)
        try await first.client.sync()
        XCTAssertEqual(try first.store.todos(on: day).map(\.title), ["Survives a logout"])
    }

    func testADatabaseOutageIsRetriedUntilItIsBack() async throws {
        let phone = try await device("phone")
        try phone.store.addTodo(NewTodo(title: "During the outage", deadline: day))
        try Stack.command(["db-stop"])
        let restart = Task.detached {
            try await Task.sleep(nanoseconds: 1_500_000_000)
            try Stack.command(["db-start"])
        }
        // 503 answers carry Retry-After (1 s); the policy must allow waiting that long.
        let client = TodoSyncClient(store: phone.store, baseURL: baseURL,
                                    retry: RetryPolicy(maxAttempts: 30, initialDelay: 0.2, maxDelay: 2))
        let report = try await client.sync()
        try await restart.value
        XCTAssertEqual(report.results[.applied], 1)
        try await assertEqualsServer(phone)
    }

    // MARK: 410

    func testCursorExpiryResyncsAndKeepsLocalChanges() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let created = try (1...5).map { try laptop.store.addTodo(NewTodo(title: "Item \($0)", deadline: day)) }
        try await laptop.client.sync()
        try await phone.client.sync()
        XCTAssertEqual(try phone.store.todos(on: day).count, 5)

        // The laptop deletes one; the server forgets the tombstone before the phone hears of it.
        try laptop.store.deleteTodo(created[0].localID)
        try await laptop.client.sync()
        try Stack.command(["purge", "--retention-seconds", "0"])

        // Offline on the phone: an edit, a create, and one more create made while the resync runs.
        let second = try XCTUnwrap(phone.store.todos(on: day).first { $0.title == "Item 2" })
        try phone.store.updateTodo(second.localID, TodoChanges(title: "Item 2 (edited on the phone)"))
        try phone.store.addTodo(NewTodo(title: "Made offline", deadline: day))
        let resyncing = Device.Box<Device>()
        let phoneDuringSync = try Device("phone", directory: directory, baseURL: baseURL, hooks: SyncHooks(pageCommitted: { page in
            if page == 1, let device = resyncing.value {
                _ = try? device.store.addTodo(NewTodo(title: "Made during the resync", deadline: Day("2026-11-24")!))
            }
        }))
        resyncing.value = phoneDuringSync
        let report = try await phoneDuringSync.client.sync()
        XCTAssertTrue(report.resyncedAfterExpiry)
        try await laptop.client.sync()
        let titles = Set(try laptop.store.todos(on: day).map(\.title))
        XCTAssertEqual(titles, ["Item 2 (edited on the phone)", "Item 3", "Item 4", "Item 5", "Made offline", "Made during the resync"])
        try await assertEqualsServer(phoneDuringSync)
        try await assertEqualsServer(laptop)
    }
}

final class ProgressLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [SyncProgress] = []
    func append(_ event: SyncProgress) { lock.lock(); events.append(event); lock.unlock() }
    var all: [SyncProgress] { lock.lock(); defer { lock.unlock() }; return events }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.lock(); count += 1; lock.unlock() }
    var value: Int { lock.lock(); defer { lock.unlock() }; return count }
}

extension Device {
    /// A late-bound reference for hooks that need the device they belong to.
    final class Box<T>: @unchecked Sendable {
        var value: T?
    }
}
