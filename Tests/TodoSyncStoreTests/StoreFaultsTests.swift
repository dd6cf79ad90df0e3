import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore
import TodoSyncTestHooks

/// The test build's bugs on purpose (`StoreFaults`, issue 38; docs/HISTORY.md): a store is made
/// with none of them on, and each one, switched on by its `TODOSYNC_TEST_INJECT` name, breaks what
/// it names and nothing is broken before it is switched on (each test first shows the right
/// behaviour on the same data).
final class StoreFaultsTests: StoreTestCase {
    private let day = Day("2026-04-01")!

    private func use(_ names: String) throws {
        var configuration = StoreConfiguration()
        configuration.faults = try TestHooks.parseInjections(names)
        store = Store(connection: db, configuration: configuration)
    }

    private func push(_ json: String) throws -> String {
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        return String(decoding: try store.push(userID: userID, try PushRequest.parse(&reader)), as: UTF8.self)
    }

    private func count(_ table: String) throws -> Int64 {
        try db.queryOne("SELECT COUNT(*) FROM \(table) WHERE user_id = ?", [.int(userID)])?.int64(0) ?? -1
    }

    private func completedCount() throws -> Int64? {
        try db.queryOne("SELECT completed_count FROM daily_stats WHERE user_id = ? AND day = ? AND deleted_at IS NULL",
                        [.int(userID), .text(day.description)])?.int64(0)
    }

    func testTheNamesAreParsedAndNoneIsOnByDefault() throws {
        XCTAssertTrue(StoreConfiguration().faults.isEmpty)
        XCTAssertTrue(try TestHooks.parseInjections("").isEmpty)
        let all = try TestHooks.parseInjections(" skip-opid-lookup,ignore-version-check , skip-stats-rebuild")
        XCTAssertTrue(all.skipOpIDLookup && all.ignoreVersionCheck && all.skipStatsRebuild)
        XCTAssertEqual(try TestHooks.parseInjections("skip-stats-rebuild"), {
            var faults = StoreFaults()
            faults.skipStatsRebuild = true
            return faults
        }())
        XCTAssertThrowsError(try TestHooks.parseInjections("skip-opid-lookup,no-such-bug")) { error in
            XCTAssertTrue("\(error)".contains("unknown injection no-such-bug"), "\(error)")
        }
    }

    func testSkipOpIDLookupAppliesAnOpIDAgain() throws {
        let body = """
            {"deviceId": "phone", "operations": [
              {"opId": "f-1", "entity": "todo", "action": "create", "data": {"title": "one", "deadline": "2026-04-01"}}]}
            """
        let first = try push(body)
        XCTAssertEqual(try push(body), first, "the stored result, nothing applied")
        XCTAssertEqual(try count("todos"), 1)
        try use("skip-opid-lookup")
        XCTAssertNotEqual(try push(body), first)
        XCTAssertEqual(try count("todos"), 2, "the replayed create applied again")
        XCTAssertEqual(try count("sync_operations"), 1, "its first result stays the stored one")
    }

    func testIgnoreVersionCheckLetsAStaleWriteWin() throws {
        let created = try store.createTodo(userID: userID, TodoDraft(title: "v1", deadline: day)).record
        let stale = IfMatch(header: "\"\(created.version)\"")
        let second = try store.updateTodo(userID: userID, id: created.id, TodoPatch(title: "v2"), ifMatch: stale)
        XCTAssertThrowsError(try store.updateTodo(userID: userID, id: created.id, TodoPatch(title: "lost"), ifMatch: stale)) {
            guard case .versionMismatch? = $0 as? DomainError else { return XCTFail("not 412: \($0)") }
        }
        func update(_ opID: String) -> String {
            """
            {"deviceId": "phone", "conflictPolicy": "reject", "operations": [
              {"opId": "\(opID)", "entity": "todo", "action": "update", "id": \(created.id), "baseVersion": \(created.version),
               "data": {"title": "pushed"}}]}
            """
        }
        XCTAssertTrue(try push(update("r-1")).contains(#""status":"conflict""#))
        try use("ignore-version-check")
        let won = try store.updateTodo(userID: userID, id: created.id, TodoPatch(title: "lost"), ifMatch: stale)
        XCTAssertEqual(won.title, "lost", "If-Match of version \(created.version) passed over version \(second.version)")
        XCTAssertTrue(try push(update("r-2")).contains(#""status":"applied""#))
    }

    func testSkipStatsRebuildLeavesAnEditsStatsAsTheyWere() throws {
        let created = try store.createTodo(userID: userID, TodoDraft(title: "s", deadline: day)).record
        _ = try store.updateTodo(userID: userID, id: created.id, TodoPatch(isCompleted: true), ifMatch: nil)
        XCTAssertEqual(try completedCount(), 1)
        try use("skip-stats-rebuild")
        _ = try store.updateTodo(userID: userID, id: created.id, TodoPatch(isCompleted: false), ifMatch: nil)
        XCTAssertEqual(try completedCount(), 1, "the edit's stat left as it was")
        // a create still rebuilds its date's stat (from the stored aggregate: the edit stays missing)
        _ = try store.createTodo(userID: userID, TodoDraft(title: "t", deadline: day, isCompleted: true))
        XCTAssertEqual(try completedCount(), 2, "one completed todo, counted twice")
    }
}
