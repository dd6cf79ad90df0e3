import Foundation
import GRDB
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// A new device's first sync from the server's snapshot (API.md "Sync: snapshot",
/// docs/SNAPSHOT.md), in process: real SQLite files on both sides, a fake transport.
final class SnapshotTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("snapshot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    /// A logged-in store on `server` (`useSnapshot: false`: always the paged pull).
    func device(_ name: String, _ server: SnapshotServer, useSnapshot: Bool = true, attempts: Int = 3,
                hooks: SyncHooks = SyncHooks(), rangeBytes: Int = 4 << 20) throws -> TodoSyncClient {
        let store = try LocalStore(path: directory.appendingPathComponent("\(name).sqlite").path)
        try store.signIn(userID: SnapshotServer.userID, email: "snap@example.com", token: "token")
        return TodoSyncClient(store: store, baseURL: URL(string: "http://fake")!, transport: server,
                              retry: RetryPolicy(maxAttempts: attempts, initialDelay: 0.001, maxDelay: 0.01), clock: TestClock(),
                              hooks: hooks, useSnapshot: useSnapshot, snapshotRangeBytes: rangeBytes)
    }

    /// An account with a bit of everything: tags with and without clientId, todos with
    /// non-ASCII titles (the title key), notes, tags, and daily stats with nested JSON.
    func populatedServer() -> SnapshotServer {
        let server = SnapshotServer()
        let work = server.addTag(name: "Work", color: "#112233")
        let home = server.addTag(name: "Zuhause 🏠", color: "#ABCDEF", clientID: nil)
        server.addTag(name: "Later", color: "#000000")
        let titles = ["apple", "Banana", "İstanbul trip", "éclair", "Éclair", "한국어 메모", "zebra", "Ärger", "a", "مرحبا", "🍎 emoji"]
        for (index, title) in titles.enumerated() {
            server.addTodo(title: title, notes: index % 3 == 0 ? "note \(index)\nline 2" : nil,
                           tagID: [nil, work, home][index % 3], day: 1 + index % 4, important: index % 4 == 0,
                           clientID: index % 5 == 0 ? nil : UUID().uuidString)
        }
        server.addStat(day: 1, todoCount: 4, productivity: "1.25")
        server.addStat(day: 2, todoCount: 3, productivity: "0")
        return server
    }

    /// Everything a store holds of the server's records, in server terms (local ids differ
    /// between stores by design), plus the cursor.
    func dump(_ client: TodoSyncClient) throws -> [String] {
        try client.store.pool.read { db in
            var lines: [String] = []
            for row in try Row.fetchAll(db, sql: """
                SELECT id, clientId, clientKey, name, color, version, createdAt, updatedAt, deletedAt, isDeleted, shadow FROM tag ORDER BY id
                """) { lines.append("tag \(row)") }
            for row in try Row.fetchAll(db, sql: """
                SELECT t.id, t.clientId, t.clientKey, t.title, hex(t.titleKey) AS titleKey, t.raw, t.notes, t.remindAt, t.isImportant, t.isLife,
                       g.id AS tagId, t.pendingTagId, t.difficulty, t.estimatedTime, t.deadline, t.isCompleted, t.version, t.createdAt,
                       t.updatedAt, t.deletedAt, t.isDeleted, t.shadow
                FROM todo t LEFT JOIN tag g ON g.localId = t.tagLocalId ORDER BY t.id
                """) { lines.append("todo \(row)") }
            for row in try Row.fetchAll(db, sql: "SELECT id, date, version, deletedAt, json FROM dailyStat ORDER BY id") {
                lines.append("stat \(row)")
            }
            lines.append("cursor \(try Meta.get(db, .cursor) ?? "nil")")
            return lines
        }
    }

    func assertNoPartialFiles(_ client: TodoSyncClient, file: StaticString = #filePath, line: UInt = #line) {
        let files = SnapshotFiles(storePath: client.store.path)
        XCTAssertFalse(FileManager.default.fileExists(atPath: files.data), "partial snapshot removed", file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: files.head), "partial snapshot's head removed", file: file, line: line)
    }

    // MARK: Installed

    func testASnapshotAndThePullAfterItEqualThePagedPullRecordForRecord() async throws {
        let server = populatedServer()
        let paged = try device("paged", server, useSnapshot: false)
        let fresh = try device("fresh", server)
        let deviceBefore = try fresh.store.deviceID

        try await paged.sync()
        let report = try await fresh.sync()
        XCTAssertEqual(report.snapshot, .installed(records: server.recordCount, bytes: Int64(try XCTUnwrap(server.servedBytes))))
        XCTAssertTrue(report.snapshotPhases.map(\.name).contains("install_journal"),
                      "alone on its file, the install went through a rollback journal: \(report.snapshotPhases.map(\.name))")
        XCTAssertEqual(try journalMode(fresh), "wal", "and the store is back in WAL mode")
        XCTAssertEqual(try dump(fresh), try dump(paged))
        XCTAssertNotEqual(try fresh.store.deviceID, deviceBefore, "a store started from a snapshot is a new device")
        XCTAssertEqual(server.pullQueries.filter { !$0.contains("cursor=") }.count, 1, "only the paged device pulled from scratch")
        XCTAssertEqual(try fresh.store.allTodos().map(\.title), try paged.store.allTodos().map(\.title), "the same order (title key)")
        XCTAssertEqual(try fresh.store.dailyStats(), try paged.store.dailyStats())
        assertNoPartialFiles(fresh)

        // Changes after the snapshot's point arrive by the pull from its cursor, then as usual.
        server.editTodo(3 + 2, ["title": .string("Renamed ✓"), "notes": .string("new notes")])
        server.deleteTodo(3 + 4)
        server.deleteTag(1)
        server.addStat(day: 3, todoCount: 1, productivity: "2.5")
        server.addTodo(title: "After the snapshot", tagID: 2)
        try await paged.sync()
        let second = try await fresh.sync()
        XCTAssertNil(second.snapshot, "a store that is not empty pulls from its cursor")
        XCTAssertEqual(try dump(fresh), try dump(paged))
    }

    func journalMode(_ client: TodoSyncClient) throws -> String? {
        try client.store.pool.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }
    }

    func testWithAnotherConnectionOnTheFileTheInstallGoesThroughTheWALAndEqualsThePagedPull() async throws {
        let server = populatedServer()
        let paged = try device("paged", server, useSnapshot: false)
        let fresh = try device("fresh", server)
        // Another connection that has read the file (the app's, another process's) holds it open.
        let other = try DatabaseQueue(path: fresh.store.path)
        let count = "SELECT COUNT(*) FROM todo"
        let before = try await other.read { try Int.fetchOne($0, sql: count) }
        XCTAssertEqual(before, 0)

        try await paged.sync()
        let report = try await fresh.sync()
        XCTAssertEqual(report.snapshot, .installed(records: server.recordCount, bytes: Int64(try XCTUnwrap(server.servedBytes))))
        XCTAssertFalse(report.snapshotPhases.map(\.name).contains("install_journal"), "\(report.snapshotPhases.map(\.name))")
        XCTAssertEqual(try journalMode(fresh), "wal")
        XCTAssertEqual(try dump(fresh), try dump(paged))
        let seen = try await other.read { try Int.fetchOne($0, sql: count) }
        let expected = try await paged.store.pool.read { try Int.fetchOne($0, sql: count) }
        XCTAssertEqual(seen, expected, "the other connection reads the installed store")
        try other.close()
    }

    func testChangesBetweenTheSnapshotAndItsInstallComeWithTheFirstPull() async throws {
        let server = populatedServer()
        let fresh = try device("fresh", server)
        // The file is built at this version; the writes below commit while it "downloads".
        _ = try await server.send(URLRequest(url: URL(string: "http://fake/api/v1/sync/snapshot")!))
        server.useCachedSnapshot = true
        server.editTodo(4, ["title": .string("Edited meanwhile")])
        server.deleteTodo(5)
        let report = try await fresh.sync()
        guard case .installed = report.snapshot else { return XCTFail("not installed: \(String(describing: report.snapshot))") }
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try fresh.store.allTodos().map(\.title), try paged.store.allTodos().map(\.title))
        XCTAssertTrue(try fresh.store.allTodos().contains { $0.title == "Edited meanwhile" })
        XCTAssertFalse(try fresh.store.allTodos().contains { $0.serverID == 5 })
    }

    // MARK: Refused: nothing installed

    /// Pulls without a cursor fail while `configure`d server's snapshot is refused: the store
    /// must stay exactly empty (nothing of the snapshot installed), the partial file is removed;
    /// then the paged pull does the first sync.
    func assertRefused(_ configure: (SnapshotServer) -> Void, because reason: String,
                       file: StaticString = #filePath, line: UInt = #line) async throws {
        let server = populatedServer()
        configure(server)
        server.fullPullStatus = 500
        let fresh = try device("fresh", server)
        do {
            try await fresh.sync()
            XCTFail("the paged pull was answered 500", file: file, line: line)
        } catch SyncError.server(status: 500, _, _, _) {}
        XCTAssertTrue(try fresh.store.isEmptyForSnapshot(), "nothing of the snapshot installed", file: file, line: line)
        XCTAssertEqual(try fresh.store.allTodos().count, 0, file: file, line: line)
        assertNoPartialFiles(fresh, file: file, line: line)

        server.fullPullStatus = nil
        let report = try await fresh.sync()
        guard case .refused(let why) = report.snapshot else {
            return XCTFail("not refused: \(String(describing: report.snapshot))", file: file, line: line)
        }
        XCTAssertTrue(why.contains(reason), why, file: file, line: line)
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(fresh), try dump(paged), "the paged pull did the first sync", file: file, line: line)
        assertNoPartialFiles(fresh, file: file, line: line)
    }

    func testATamperedFileIsRefused() async throws {
        try await assertRefused({ $0.tamper = true }, because: "SHA-256")
    }

    func testAnotherUsersFileIsRefused() async throws {
        try await assertRefused({ $0.snapshotUserID = "43" }, because: "another user")
    }

    func testASchemaVersionTheClientCannotReadIsRefused() async throws {
        try await assertRefused({ $0.snapshotUserVersion = SchemaVersion.current + 1 }, because: "schema version")
    }

    func testASnapshotFromAnotherDatabaseEpochIsRefused() async throws {
        // Its cursor is answered 410 (a restore and `new-epoch` since it was built).
        try await assertRefused({ $0.newEpoch = true }, because: "410")
    }

    // MARK: Not tried, not there

    func testAStoreThatIsNotEmptyUsesThePagedPull() async throws {
        let server = populatedServer()
        let client = try device("busy", server)
        try client.store.addTodo(NewTodo(title: "Made offline", deadline: Day("2026-11-24")!))
        let report = try await client.sync()
        XCTAssertNil(report.snapshot)
        XCTAssertEqual(server.snapshotRequests.count, 0, "no snapshot asked for")
        XCTAssertTrue(report.fullPull)
        XCTAssertEqual(try client.store.allTodos().count, server.recordCount - 5, "every todo, the offline one included")
    }

    func testAServerWithoutTheRouteGetsThePagedPull() async throws {
        let server = populatedServer()
        server.snapshotRoute = false
        let fresh = try device("fresh", server)
        let report = try await fresh.sync()
        XCTAssertEqual(report.snapshot, .unavailable)
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(fresh), try dump(paged))
        assertNoPartialFiles(fresh)
    }

    func testAnAccountTooLargeToBuildGetsThePagedPull() async throws {
        let server = populatedServer()
        server.snapshotStatus = 503  // with Retry-After: 3600, as for an account too large to build
        let fresh = try device("fresh", server)
        let report = try await fresh.sync()
        XCTAssertEqual(report.snapshot, .unavailable)
        XCTAssertEqual(server.snapshotRequests.count, 1, "a Retry-After longer than the client waits is not waited for")
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(fresh), try dump(paged))
    }

    // MARK: Broken downloads

    func testTheDownloadGoesByRangesAndABrokenOneIsAskedForAgain() async throws {
        let server = populatedServer()
        server.breakFirstDownloadAt = 8192
        let fresh = try device("fresh", server, rangeBytes: 4096)
        let report = try await fresh.sync()
        guard case .installed(_, let bytes) = report.snapshot else { return XCTFail("not installed: \(String(describing: report.snapshot))") }
        let size = try XCTUnwrap(server.servedBytes)
        XCTAssertEqual(bytes, Int64(size))
        let ranges = server.snapshotRequests.map(\.range)
        XCTAssertEqual(ranges.prefix(4), ["bytes=0-4095", "bytes=4096-8191", "bytes=8192-12287", "bytes=8192-12287"],
                       "the lost range is asked for again, not the ones before it")
        XCTAssertEqual(ranges.count, (size + 4095) / 4096 + 1)
        XCTAssertNil(server.snapshotRequests.first?.ifRange)
        XCTAssertEqual(Set(server.snapshotRequests.dropFirst().map(\.ifRange)), [server.etag], "If-Range: a file that changed starts over")
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(fresh), try dump(paged))
    }

    func testAnInstalledStoreHasEveryIndexAndConstraintOfAPagedOne() async throws {
        // The install drops the todo indexes and builds them again after the rows.
        let server = populatedServer()
        let fresh = try device("fresh", server)
        let report = try await fresh.sync()
        XCTAssertEqual(report.snapshot, .installed(records: server.recordCount, bytes: Int64(try XCTUnwrap(server.servedBytes))))
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        func schema(_ client: TodoSyncClient) throws -> [String] {
            try client.store.pool.read { db in
                try String.fetchAll(db, sql: "SELECT type || ' ' || name || ': ' || COALESCE(sql, '') FROM sqlite_master ORDER BY name")
                    + [try String.fetchOne(db, sql: "PRAGMA integrity_check") ?? ""]
            }
        }
        XCTAssertEqual(try schema(fresh), try schema(paged))
        XCTAssertTrue(try schema(fresh).contains { $0.hasPrefix("index todo_by_day: CREATE INDEX") })
        XCTAssertEqual(try dump(fresh), try dump(paged))
        // clientKey is unique after the install as before it.
        let todo = try XCTUnwrap(try fresh.store.allTodos().first { $0.clientID != nil })
        do {
            try await fresh.store.pool.write { db in
                try db.execute(sql: """
                    INSERT INTO todo (clientId, clientKey, title, titleKey, raw, isImportant, isLife, difficulty, estimatedTime, deadline,
                                      isCompleted, createdAt)
                    SELECT clientId, clientKey, title, titleKey, raw, 0, 0, 0, 0, deadline, 0, createdAt FROM todo WHERE localId = ?
                    """, arguments: [todo.localID])
            }
            XCTFail("a second todo with the same clientKey was stored")
        } catch let error as DatabaseError {
            XCTAssertEqual(error.extendedResultCode, .SQLITE_CONSTRAINT_UNIQUE)
        }
    }

    /// A server whose first snapshot download breaks after 8192 bytes, and the device ("fresh",
    /// 4096-byte ranges, one attempt per request) whose sync failed offline on it, keeping them.
    private func brokenFirstDownload() async throws -> (SnapshotServer, TodoSyncClient) {
        let server = populatedServer()
        server.breakFirstDownloadAt = 8192
        let first = try device("fresh", server, attempts: 1, rangeBytes: 4096)
        do {
            try await first.sync()
            XCTFail("the download broke")
        } catch SyncError.offline {}
        return (server, first)
    }

    func testAPartialDownloadDamagedOnDiskBeforeItsResumeIsRefused() async throws {
        // The digest is computed while the ranges arrive; what an earlier run left on disk is
        // read back and hashed too, so a byte flipped there is caught.
        let (server, first) = try await brokenFirstDownload()
        let files = SnapshotFiles(storePath: first.store.path)
        XCTAssertEqual(files.size, 8192)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: files.data))
        try handle.seek(toOffset: 5000)
        let byte = try XCTUnwrap(try handle.read(upToCount: 1))
        try handle.seek(toOffset: 5000)
        try handle.write(contentsOf: Data([byte[0] ^ 0x01]))
        try handle.close()

        let again = try device("fresh", server, rangeBytes: 4096)
        let report = try await again.sync()
        guard case .refused(let why) = report.snapshot else { return XCTFail("not refused: \(String(describing: report.snapshot))") }
        XCTAssertTrue(why.contains("SHA-256"), why)
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(again), try dump(paged), "the paged pull did the first sync")
        assertNoPartialFiles(again)
    }

    func testANextSyncResumesAfterTheLastRangeOnDiskAndAChangedFileStartsOver() async throws {
        let (server, first) = try await brokenFirstDownload()
        XCTAssertEqual(SnapshotFiles(storePath: first.store.path).size, 8192)
        XCTAssertTrue(try first.store.isEmptyForSnapshot())

        let again = try device("fresh", server, rangeBytes: 4096)
        let sent = server.snapshotRequests.count
        let resumed = try await again.sync()
        guard case .installed(_, let bytes) = resumed.snapshot else { return XCTFail("not installed: \(String(describing: resumed.snapshot))") }
        XCTAssertEqual(server.snapshotRequests[sent].range, "bytes=8192-12287", "resumed after the last range on disk")
        XCTAssertEqual(bytes, Int64(try XCTUnwrap(server.servedBytes)) - 8192)
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(again), try dump(paged))

        // A partial download of a file that changed since: If-Range gets the new file whole.
        server.breakFirstDownloadAt = 8192
        let other = try device("other", server, attempts: 1, rangeBytes: 4096)
        do {
            try await other.sync()
            XCTFail("the download broke")
        } catch SyncError.offline {}
        server.addTodo(title: "Written while the device was away")  // a new file, a new ETag
        let oldETag = try XCTUnwrap(server.etag)
        let later = try device("other", server, rangeBytes: 1 << 20)
        let before = server.snapshotRequests.count
        let report = try await later.sync()
        guard case .installed = report.snapshot else { return XCTFail("not installed: \(String(describing: report.snapshot))") }
        XCTAssertEqual(server.snapshotRequests[before].range, "bytes=8192-1056767")
        XCTAssertEqual(server.snapshotRequests[before].ifRange, oldETag)
        XCTAssertEqual(server.snapshotRequests.count, before + 1, "the new file came whole in one answer")
        XCTAssertTrue(try later.store.allTodos().contains { $0.title == "Written while the device was away" })
        let paged2 = try device("paged2", server, useSnapshot: false)
        try await paged2.sync()
        XCTAssertEqual(try dump(later), try dump(paged2))
    }

    func testAnInstallStoppedBeforeItsCommitLeavesAnEmptyStoreAndTheNextSyncInstallsTheDownload() async throws {
        struct Stopped: Error {}
        let server = populatedServer()
        let client = try device("fresh", server)
        let files = SnapshotFiles(storePath: client.store.path)
        let head = try await client.downloadSnapshot(files, deadline: SyncDeadline(clock: TestClock(), seconds: 60), progress: nil)
        let digest = try XCTUnwrap(head.flatMap { SHA256Digest.fromReprDigest($0.head.digest) })
        let snapshot = try SnapshotFile.check(path: files.data, digest: digest, userID: try client.store.userID(),
                                              schemaVersion: client.schemaVersion)
        // Stopped where a kill would stop it: every row written, before COMMIT.
        var phases: [String] = []
        XCTAssertThrowsError(try client.store.installSnapshot(atPath: files.data, snapshot, phaseEnded: { phases.append($0) },
                                                              whileOpen: { throw Stopped() }))
        XCTAssertEqual(phases, ["install_journal", "install_rows", "install_indexes"], "under the rollback journal")
        XCTAssertTrue(try client.store.isEmptyForSnapshot(), "all or nothing")
        XCTAssertEqual(try journalMode(client), "wal", "back in WAL mode")
        XCTAssertFalse(FileManager.default.fileExists(atPath: client.store.path + "-journal"))
        XCTAssertNil(try client.store.pullCursor())
        // The indexes the install dropped and built again before the stop are there, as before.
        let fresh = try device("never synced", server)
        func indexes(_ client: TodoSyncClient) throws -> [String] {
            try client.store.pool.read { try String.fetchAll($0, sql: "SELECT name || ': ' || COALESCE(sql, '') FROM sqlite_master WHERE type = 'index' ORDER BY name") }
        }
        XCTAssertEqual(try indexes(client), try indexes(fresh))

        let requests = server.snapshotRequests.count
        let report = try await client.sync()
        XCTAssertEqual(report.snapshot, .installed(records: server.recordCount, bytes: 0))
        XCTAssertEqual(server.snapshotRequests.count, requests, "the finished download is installed, not fetched again")
        let paged = try device("paged", server, useSnapshot: false)
        try await paged.sync()
        XCTAssertEqual(try dump(client), try dump(paged))
        assertNoPartialFiles(client)
    }

    // MARK: The digest

    func testSHA256MatchesCoreutils() throws {
        var digest = SHA256Digest()
        digest.update(Data("abc".utf8))
        XCTAssertEqual(Data(digest.finish()).base64EncodedString(), "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=")
        for size in [0, 55, 56, 63, 64, 65, 1_000_003] {
            let data = Data((0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
            var chunked = SHA256Digest()
            var offset = 0
            while offset < data.count {
                let end = min(data.count, offset + 1 + offset % 977)
                chunked.update(data.subdata(in: offset..<end))
                offset = end
            }
            XCTAssertEqual(Data(chunked.finish()), try independentSHA256(data), "\(size) bytes")
        }
        XCTAssertEqual(SHA256Digest.fromReprDigest("sha-512=:AAAA:, sha-256=:ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=:").map { Data($0) },
                       Data(base64Encoded: "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="))
    }
}
