import Foundation
import GRDB
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// Crash safety, with the terminal client as a separate process that SIGKILLs itself at the
/// worst moments (`TODOSYNC_CLIENT_CRASH_AT`), then a normal sync on the same file.
final class CrashTests: StackTestCase {
    let day = Day("2026-11-24")!

    func testACrashAfterThePushWasSentAndBeforeItsResultsWereStored() async throws {
        let phone = try await device("phone")
        let tag = try phone.store.addTag(name: "Crash", color: "#ABCDEF")
        for index in 1...3 { try phone.store.addTodo(NewTodo(title: "Todo \(index)", deadline: day, tag: tag.localID)) }
        let opIDs = try phone.store.operations().map(\.opID)

        let crashed = try cli(["sync"], path: phone.path, crashAt: "push-response:1")
        XCTAssertEqual(crashed.killedBySignal, SIGKILL, crashed.output)
        // The server applied the push; the device never stored the answer.
        let reopened = try LocalStore(path: phone.path)
        XCTAssertEqual(try reopened.operations().map(\.status), [.sending, .sending, .sending, .sending])
        XCTAssertEqual(try reopened.operations().map(\.opID), opIDs, "same opIds, stored before sending")
        let before = try await serverItems("/api/v1/todos?date=\(day)", token: try phone.token)
        XCTAssertEqual(before.count, 3)

        let again = try cli(["sync"], path: phone.path)
        XCTAssertEqual(again.status, 0, again.output)
        let after = try await serverItems("/api/v1/todos?date=\(day)", token: try phone.token)
        XCTAssertEqual(after.map { $0["id"]?.int64Value }, before.map { $0["id"]?.int64Value }, "nothing applied twice")
        XCTAssertEqual(try reopened.pendingCount(), 0)
        XCTAssertEqual(Set(try opIDs.map { try reopened.status(ofOperation: $0) }), [.applied])
        try await assertEqualsServer(phone)
    }

    func testACrashMidPullNeverLeavesHalfAPage() async throws {
        let laptop = try await device("laptop")
        try laptop.store.addTag(name: "Bulk", color: "#123456")
        try await laptop.store.pool.write { db in
            for index in 0..<1700 {
                let deadline = Day(year: 2026, month: 11 + index % 2, day: 1 + index % 28)!
                _ = try LocalStore.insertTodo(db, try Validate.newTodo(NewTodo(title: "Bulk \(index)", deadline: deadline)))
            }
        }
        try await laptop.client.sync()
        let phone = try await device("phone")

        // Killed inside the third page's transaction: two whole pages stay, with their cursor.
        // (The paged pull: an empty store would otherwise start from the snapshot, see SnapshotStackTests.)
        let first = try cli(["sync", "--page-size", "400", "--quiet", "--no-snapshot"], path: phone.path, crashAt: "page-written:3")
        XCTAssertEqual(first.killedBySignal, SIGKILL, first.output)
        let store = try LocalStore(path: phone.path)
        let cursorAfterTwo = try XCTUnwrap(store.pullCursor())
        let recordsAfterTwo = try await store.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT (SELECT COUNT(*) FROM todo) + (SELECT COUNT(*) FROM tag) + (SELECT COUNT(*) FROM dailyStat)")!
        }
        XCTAssertEqual(recordsAfterTwo, 800, "exactly two pages of 400")

        // Killed right after the fourth page committed: resumes from there.
        let second = try cli(["sync", "--page-size", "400", "--quiet"], path: phone.path, crashAt: "page-committed:2")
        XCTAssertEqual(second.killedBySignal, SIGKILL, second.output)
        XCTAssertNotEqual(try store.pullCursor(), cursorAfterTwo)

        let last = try cli(["sync", "--page-size", "400", "--quiet"], path: phone.path)
        XCTAssertEqual(last.status, 0, last.output)
        try await assertEqualsServer(phone)
    }

    func testTheTerminalClientWorksOfflineAndSaysSo() async throws {
        let phone = try await device("phone")
        let environment = ["TODOSYNC_SERVER": "http://127.0.0.1:9", "TODOSYNC_CLIENT_RETRIES": "2"]
        let added = try runProcess(Stack.clientBinary, ["add", "--db", phone.path, "--date", "2026-11-24", "!Offline thing 30m"],
                                   environment: environment)
        XCTAssertEqual(added.status, 0, added.output)
        let sync = try runProcess(Stack.clientBinary, ["sync", "--db", phone.path], environment: environment)
        XCTAssertEqual(sync.status, 3, sync.output)
        XCTAssertTrue(sync.output.contains("Not synced: offline"), sync.output)
        XCTAssertTrue(sync.output.contains("1 change(s) stay queued"), sync.output)
        let status = try runProcess(Stack.clientBinary, ["status", "--db", phone.path], environment: environment)
        XCTAssertTrue(status.output.contains("pending:    1 change(s)"), status.output)

        let online = try cli(["sync"], path: phone.path)
        XCTAssertEqual(online.status, 0, online.output)
        let list = try cli(["list", "--date", "2026-11-24"], path: phone.path)
        XCTAssertTrue(list.output.contains("! Offline thing"), list.output)
        XCTAssertFalse(list.output.contains("not synced"), list.output)
        try await assertEqualsServer(phone)
    }
}
