import Foundation
import GRDB
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// The snapshot against the real stack (nginx, responders, MariaDB): a new device's first sync,
/// changes made after the snapshot's point, and the terminal client killed (SIGKILL) during the
/// download and during the install.
final class SnapshotStackTests: StackTestCase {
    let day = Day("2026-11-24")!

    /// An account with tags, todos (some tagged, some deleted, one tag deleted) and daily stats.
    func seededDevice(todos: Int = 60) async throws -> Device {
        let laptop = try await device("laptop")
        let work = try laptop.store.addTag(name: "Work", color: "#112233")
        let gone = try laptop.store.addTag(name: "Gone", color: "#445566")
        var made: [LocalChange] = []
        for index in 0..<todos {
            let deadline = Day(year: 2026, month: 11, day: 1 + index % 28)!
            made.append(try laptop.store.addTodo(NewTodo(
                title: ["Write report", "Éclair", "İstanbul", "한국어", "apple", "Banana 🍌"][index % 6] + " \(index)",
                notes: index % 4 == 0 ? "notes \(index)" : nil, deadline: deadline, isImportant: index % 7 == 0,
                tag: [nil, work.localID, gone.localID][index % 3], difficulty: index % 6, estimatedTime: index * 7 % 180)))
        }
        try await laptop.client.sync()
        for todo in made.prefix(10) { try laptop.store.updateTodo(todo.localID, TodoChanges(isCompleted: true)) }
        for todo in made.suffix(5) { try laptop.store.deleteTodo(todo.localID) }
        try laptop.store.deleteTag(gone.localID)
        try await laptop.client.sync()
        return laptop
    }

    func snapshotRecords(_ device: Device) throws -> Int {
        try device.store.pool.read { db in
            try Int.fetchOne(db, sql: "SELECT (SELECT COUNT(*) FROM tag) + (SELECT COUNT(*) FROM todo) + (SELECT COUNT(*) FROM dailyStat)")!
        }
    }

    func testANewDeviceStartsFromTheSnapshotAndEqualsAPagedPull() async throws {
        let laptop = try await seededDevice()
        let phone = try await device("phone")
        let report = try await phone.client.sync()
        guard case .installed(let records, let bytes)? = report.snapshot else {
            return XCTFail("not installed: \(String(describing: report.snapshot))")
        }
        XCTAssertGreaterThan(bytes, 0)
        XCTAssertEqual(records, try snapshotRecords(phone))
        XCTAssertNotEqual(try phone.store.deviceID, try laptop.store.deviceID)
        try await assertEqualsServer(phone)

        // Changes after the snapshot come by the pull from its cursor, as on a paged device.
        let tablet = try await device("tablet", useSnapshot: false)
        try await tablet.client.sync()
        let first = try XCTUnwrap(laptop.store.allTodos().first)
        try laptop.store.updateTodo(first.localID, TodoChanges(title: "Changed after the snapshot"))
        try laptop.store.addTodo(NewTodo(title: "New after the snapshot", deadline: day))
        try await laptop.client.sync()
        let second = try await phone.client.sync()
        XCTAssertNil(second.snapshot)
        try await tablet.client.sync()
        try await assertEqualsServer(phone)
        XCTAssertEqual(try phone.store.allTodos().map(\.title), try tablet.store.allTodos().map(\.title))
        XCTAssertEqual(try phone.store.allTodos().map(\.notes), try tablet.store.allTodos().map(\.notes))
    }

    func testWritesCommittedAfterTheDownloadComeWithTheFirstPull() async throws {
        let laptop = try await seededDevice(todos: 30)
        let phone = try await device("phone")
        let files = SnapshotFiles(storePath: phone.path)
        let head = try await phone.client.downloadSnapshot(files, deadline: SyncDeadline(clock: SystemSyncClock(), seconds: 60), progress: nil)
        XCTAssertNotNil(head)
        // Between the snapshot's point and its install: an edit, a delete, a create.
        let todos = try laptop.store.allTodos()
        try laptop.store.updateTodo(todos[0].localID, TodoChanges(title: "Edited meanwhile"))
        try laptop.store.deleteTodo(todos[1].localID)
        try laptop.store.addTodo(NewTodo(title: "Created meanwhile", deadline: day))
        try await laptop.client.sync()

        let report = try await phone.client.sync()
        guard case .installed(_, let bytes)? = report.snapshot else { return XCTFail("not installed: \(String(describing: report.snapshot))") }
        XCTAssertEqual(bytes, 0, "the finished download was installed, not fetched again")
        try await assertEqualsServer(phone)
    }

    // MARK: kill -9 of the terminal client

    func testTheClientKilledDuringTheDownloadResumesAndEndsCorrect() async throws {
        _ = try await seededDevice()
        let phone = try await device("phone")
        // Ranges of 4 KiB, killed once the second is on disk.
        let killed = try cli(["sync", "--quiet"], path: phone.path, crashAt: "snapshot-bytes:8192",
                             environment: ["TODOSYNC_CLIENT_SNAPSHOT_RANGE_BYTES": "4096"])
        XCTAssertEqual(killed.killedBySignal, SIGKILL, killed.output)
        let files = SnapshotFiles(storePath: phone.path)
        let kept = files.size
        let length = try XCTUnwrap(files.readHead()?.length)
        XCTAssertEqual(kept, 8192, "two whole ranges on disk")
        XCTAssertLessThan(kept, length, "killed before the end")
        XCTAssertTrue(try phone.store.isEmptyForSnapshot(), "nothing installed")

        let again = try cli(["sync", "--json"], path: phone.path, environment: ["TODOSYNC_CLIENT_SNAPSHOT_RANGE_BYTES": "4096"])
        XCTAssertEqual(again.status, 0, again.output)
        let summary = try XCTUnwrap(JSONParser.parse(Array(again.output.utf8)).objectValue)
        let snapshot = try XCTUnwrap(summary["snapshot"]?.objectValue)
        XCTAssertEqual(snapshot["outcome"]?.stringValue, "installed")
        XCTAssertEqual(snapshot["bytes"]?.int64Value, length - kept, "only the rest was downloaded (Range)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: files.data))
        try await assertEqualsServer(phone)
    }

    func testTheClientKilledDuringTheInstallEndsCorrect() async throws {
        _ = try await seededDevice()
        let phone = try await device("phone")
        let deviceBefore = try phone.store.deviceID
        let killed = try cli(["sync", "--quiet"], path: phone.path, crashAt: "snapshot-install:1")
        XCTAssertEqual(killed.killedBySignal, SIGKILL, killed.output)
        XCTAssertTrue(try phone.store.isEmptyForSnapshot(), "the install is one transaction: nothing of it stays")
        XCTAssertEqual(try phone.store.deviceID, deviceBefore)
        XCTAssertNil(try phone.store.pullCursor())
        // Killed after the install dropped the todo indexes and built them again, before COMMIT:
        // the drops are rolled back with the rows.
        XCTAssertEqual(try todoIndexes(phone), ["todo_by_client_key", "todo_by_day", "todo_by_tag", "todo_pending_tag"])

        let again = try cli(["sync", "--json"], path: phone.path)
        XCTAssertEqual(again.status, 0, again.output)
        let summary = try XCTUnwrap(JSONParser.parse(Array(again.output.utf8)).objectValue)
        XCTAssertEqual(summary["snapshot"]?.objectValue?["outcome"]?.stringValue, "installed")
        XCTAssertEqual(summary["snapshot"]?.objectValue?["bytes"]?.int64Value, 0, "the finished download, installed")
        XCTAssertNotEqual(try phone.store.deviceID, deviceBefore)
        try await assertEqualsServer(phone)
        XCTAssertEqual(try todoIndexes(phone), ["todo_by_client_key", "todo_by_day", "todo_by_tag", "todo_pending_tag"])
    }

    /// The terminal client alone on its store (nothing in this process has the file open), so
    /// its install goes through the rollback journal: killed before COMMIT, it leaves a hot
    /// journal, which the next open rolls back to the empty, logged-in store.
    func testTheClientAloneOnItsStoreKilledDuringTheInstallLeavesTheEmptyStoreAndEndsCorrect() async throws {
        _ = try await seededDevice()
        let path = directory.appendingPathComponent("alone.sqlite").path
        let login = try cli(["login", "--email", email], path: path)
        XCTAssertEqual(login.status, 0, login.output)
        let killed = try cli(["sync", "--quiet"], path: path, crashAt: "snapshot-install:1")
        XCTAssertEqual(killed.killedBySignal, SIGKILL, killed.output)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path + "-journal"), "killed inside the rollback-journal install")

        let opened = try LocalStore(path: path, create: false)
        XCTAssertTrue(try opened.isEmptyForSnapshot(), "the hot journal rolled back: nothing of the install stays")
        XCTAssertNil(try opened.pullCursor())
        XCTAssertNotNil(try opened.userID(), "still logged in")
        XCTAssertEqual(try pragma(opened, "journal_mode"), "wal")
        XCTAssertEqual(try pragma(opened, "integrity_check"), "ok")
        let deviceBefore = try opened.deviceID
        try opened.pool.close()

        let again = try cli(["sync", "--quiet", "--timing"], path: path)
        XCTAssertEqual(again.status, 0, again.output)
        XCTAssertTrue(again.output.contains("install_journal="), again.output)
        let phone = try Device("alone", directory: directory, baseURL: baseURL)
        XCTAssertNotEqual(try phone.store.deviceID, deviceBefore)
        try await assertEqualsServer(phone)
        XCTAssertEqual(try todoIndexes(phone), ["todo_by_client_key", "todo_by_day", "todo_by_tag", "todo_pending_tag"])
        XCTAssertEqual(try pragma(phone.store, "integrity_check"), "ok")
    }

    func pragma(_ store: LocalStore, _ name: String) throws -> String? {
        try store.pool.read { try String.fetchOne($0, sql: "PRAGMA \(name)") }
    }

    func todoIndexes(_ device: Device) throws -> [String] {
        try device.store.pool.read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'todo' AND sql IS NOT NULL ORDER BY name")
        }
    }

    func testProgressShowsBytesOfTheDownload() async throws {
        _ = try await seededDevice(todos: 20)
        let phone = try await device("phone")
        let sync = try cli(["sync", "--progress"], path: phone.path)
        XCTAssertEqual(sync.status, 0, sync.output)
        XCTAssertTrue(sync.output.contains("Downloading snapshot ["), sync.output)
        XCTAssertTrue(sync.output.contains("after installing a snapshot of"), sync.output)
    }
}
