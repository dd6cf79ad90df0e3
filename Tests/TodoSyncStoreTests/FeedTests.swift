import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// The change feed is written by the write path in the same transaction as every change, and
/// `checkFeed` compares it with the tables: it passes after writes of every kind, and it finds a
/// feed row that is wrong, missing or extra (so the integration suite's "check-feed passes" means
/// something). `rebuildFeed` repairs it.
final class FeedTests: StoreTestCase {
    private func push(_ json: String) throws {
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        _ = try store.push(userID: userID, try PushRequest.parse(&reader))
    }

    private func writeOfEveryKind() throws {
        let day = Day("2026-05-01")!
        let work = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Work", color: "#112233")).record
        let home = try store.createTag(userID: userID, TagDraft(clientID: "6e7f8091-2b3c-4d4e-8f9a-1b2c3d4e5f60",
                                                                name: "Home \"quoted\"", color: "#445566")).record
        let a = try store.createTodo(userID: userID, TodoDraft(title: "a", tagID: work.id, deadline: day,
                                                                isCompleted: true)).record
        _ = try store.createTodo(userID: userID, TodoDraft(title: "b ✓", tagID: home.id, deadline: day))
        _ = try store.updateTodo(userID: userID, id: a.id, TodoPatch(title: "a2"), ifMatch: nil)
        _ = try store.updateTag(userID: userID, id: work.id, TagPatch(name: "Office"), ifMatch: nil)
        try push("""
            {"deviceId": "phone", "operations": [
              {"opId": "1", "entity": "todo", "action": "create", "clientId": "8091a2b3-4d5e-4f60-8b1c-3d4e5f607182",
               "data": {"title": "pushed", "deadline": "2026-05-02", "tagId": \(home.id), "isCompleted": true}},
              {"opId": "2", "entity": "tag", "action": "delete", "id": \(home.id)},
              {"opId": "3", "entity": "todo", "action": "update", "clientId": "8091a2b3-4d5e-4f60-8b1c-3d4e5f607182",
               "data": {"title": "pushed again"}}]}
            """)
        try store.deleteTodo(userID: userID, id: a.id, ifMatch: nil)
    }

    /// A push larger than the largest multi-row statement (128 rows; `MultiRowStatement`):
    /// creates, updates and deletes of todos it creates and of older ones (some changed twice),
    /// in one request. Every feed and list row is its own todo's (`checkFeed` renders them afresh
    /// from the tables), each result's record is its todo at the result's id and version, and the
    /// last state of each live todo is answered byte for byte as the feed holds it (rendered once
    /// for both).
    func testALargePushWritesEachRowOfItsOwnTodo() throws {
        let old = try (0..<40).map { index in
            try store.createTodo(userID: userID, TodoDraft(title: "old \(index)", deadline: Day("2026-06-01")!)).record
        }
        func clientID(_ index: Int) -> String { "00000000-0000-4000-8000-\(String(1_000_000_000_000 + index).dropFirst())" }
        var operations: [String] = []
        func operation(_ body: String) { operations.append("{\"opId\": \"op-\(operations.count)\", \(body)}") }
        for index in 0..<150 {
            operation(#""entity": "todo", "action": "create", "clientId": "\#(clientID(index))", "data": {"title": "new \#(index)", "deadline": "2026-05-\#(10 + index % 20)", "difficulty": \#(index % 6)}"#)
        }
        for index in stride(from: 0, to: 150, by: 3) {
            operation(#""entity": "todo", "action": "update", "clientId": "\#(clientID(index))", "data": {"title": "new \#(index) again", "deadline": "2026-06-\#(10 + index % 15)"}"#)
        }
        for index in stride(from: 1, to: 150, by: 7) {
            operation(#""entity": "todo", "action": "delete", "clientId": "\#(clientID(index))""#)
        }
        for (index, todo) in old.enumerated() {
            operation(index.isMultiple(of: 3) ? #""entity": "todo", "action": "delete", "id": \#(todo.id)"#
                : #""entity": "todo", "action": "update", "id": \#(todo.id), "data": {"title": "old \#(index) changed", "isImportant": true}"#)
        }
        for (index, todo) in old.enumerated() where index % 3 == 1 {
            operation(#""entity": "todo", "action": "update", "id": \#(todo.id), "data": {"title": "old \#(index) changed twice"}"#)
        }
        var reader = try FieldReader(try JSONParser.parse(Array("{\"deviceId\": \"phone\", \"operations\": [\(operations.joined(separator: ","))]}".utf8)))
        let answer = try store.push(userID: userID, try PushRequest.parse(&reader))
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])

        guard case .array(let results) = try JSONParser.parse(answer) else { return XCTFail("not an array") }
        XCTAssertEqual(results.count, operations.count)
        for result in results {
            guard case .object(let fields) = result, case .object(let record)? = fields["record"],
                  case .number(let id)? = fields["id"], case .number(let version)? = fields["version"] else {
                return XCTFail("not an applied result with a record: \(result)")
            }
            XCTAssertEqual(fields["status"], .string("applied"))
            XCTAssertTrue(id.int64! > 0)
            XCTAssertEqual(record["id"], .number(id))
            XCTAssertEqual(record["version"], .number(version))
        }
        let text = String(decoding: answer, as: UTF8.self)
        let live = try db.query("SELECT body FROM sync_feed WHERE user_id = ? AND kind = 2 AND deleted_at IS NULL",
                                [.int(userID)]).map { String(decoding: $0.bytes(0)!, as: UTF8.self) }
        XCTAssertEqual(live.count, 150 - 22 + 40 - 14)
        for body in live {
            XCTAssertTrue(text.contains(#""record":\#(body)"#), "the push answered \(body) as the feed holds it")
        }
    }

    func testFeedEqualsTheTablesAfterWritesOfEveryKind() throws {
        try writeOfEveryKind()
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
        let rows = try db.query("SELECT kind, COUNT(*), SUM(device IS NOT NULL) FROM sync_feed WHERE user_id = ? GROUP BY kind ORDER BY kind",
                                [.int(userID)]).map { [$0.int64(0)!, $0.int64(1)!, $0.int64(2)!] }
        // 2 tags (one deleted by the push: device), 3 todos (the one the push created, un-tagged by
        // the tag delete (derived) and then updated by the push: device; the other un-tagged one:
        // none), 2 stats (never a device).
        XCTAssertEqual(rows, [[1, 2, 1], [2, 3, 1], [3, 2, 0]])
    }

    func testCheckFeedFindsWrongMissingAndExtraRowsAndRebuildRepairsThem() throws {
        try writeOfEveryKind()
        try db.execute("UPDATE sync_feed SET body = '{}' WHERE user_id = ? AND kind = 2 ORDER BY version LIMIT 1",
                       [.int(userID)])
        try db.execute("DELETE FROM sync_feed WHERE user_id = ? AND kind = 3 ORDER BY version LIMIT 1", [.int(userID)])
        try db.execute("""
            INSERT INTO sync_feed (user_id, version, kind, record_id, deleted_at, device, parent_tags, body)
            VALUES (?, 1000000, 1, 999999999, NULL, NULL, '', '{}')
            """, [.int(userID)])
        try db.execute("UPDATE sync_feed SET device = 12345 WHERE user_id = ? AND kind = 1 ORDER BY version LIMIT 1",
                       [.int(userID)])
        let problems = try store.checkFeed(userID: userID).map(\.description)
        XCTAssertEqual(problems.count, 4, "\(problems)")
        XCTAssertEqual(problems.filter { $0.contains("in the feed but not in the tables") }.count, 1)
        XCTAssertEqual(problems.filter { $0.contains("in the tables but not in the feed") }.count, 1)

        try store.rebuildFeed(userID: userID)
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
    }

    private func tagSequence() throws -> Int64? {
        try db.queryOne("SELECT tag_seq FROM users WHERE id = ?", [.int(userID)])?.int64(0)
    }

    private func latestTagVersion() throws -> Int64? {
        try db.queryOne("SELECT MAX(version) FROM tags WHERE user_id = ?", [.int(userID)])?.int64(0)
    }

    /// users.tag_seq (Sql/024) is the tags' highest version, the deleted tag's included (the push's
    /// tag delete is the last tag write); check-feed reports it when below, rebuild-feed raises it.
    func testTagSequenceIsTheLatestTagVersionAndCheckFeedFindsItBelowAndRebuildRaisesIt() throws {
        try writeOfEveryKind()
        let deleted = try db.queryOne("SELECT version FROM tags WHERE user_id = ? AND deleted_at IS NOT NULL", [.int(userID)])
        XCTAssertEqual(try latestTagVersion(), deleted?.int64(0), "the deleted tag is the latest tag write")
        XCTAssertEqual(try tagSequence(), try latestTagVersion())

        try db.execute("UPDATE users SET tag_seq = tag_seq - 1 WHERE id = ?", [.int(userID)])
        let problems = try store.checkFeed(userID: userID).map(\.description)
        XCTAssertEqual(problems.count, 1, "\(problems)")
        XCTAssertTrue(problems.first?.contains("users.tag_seq") == true, "\(problems)")

        try store.rebuildFeed(userID: userID)
        XCTAssertEqual(try tagSequence(), try latestTagVersion())
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
    }

    /// Migration 024's back-fill gives every user the highest version of their tags, deleted ones
    /// included: what the write path keeps.
    func testTheTagSequenceMigrationBackFillMatchesTheWritePath() throws {
        try writeOfEveryKind()
        let kept = try tagSequence()
        XCTAssertEqual(kept, try latestTagVersion())
        try db.execute("UPDATE users SET tag_seq = 0 WHERE id = ?", [.int(userID)])
        let file = try String(contentsOf: StoreTestDatabase.sqlDirectory.appendingPathComponent("024_user_tag_sequence.sql"),
                              encoding: .utf8)
        let updates = Migrator.splitStatements(file).filter { $0.hasPrefix("UPDATE") }
        XCTAssertEqual(updates.count, 1)
        for statement in updates { try db.execute(statement + " AND u.id = \(userID)") }
        XCTAssertEqual(try tagSequence(), kept)
    }

    /// Migration 007's back-fill: a queued user's pull is 503 until `todosync migrate` has filled
    /// their feed from the tables; then it equals the tables.
    func testQueuedUsersAreBackFilledAndUnavailableUntilThen() throws {
        try writeOfEveryKind()
        try db.execute("DELETE FROM sync_feed WHERE user_id = ?", [.int(userID)])
        try db.execute("INSERT INTO sync_feed_backfill (user_id) VALUES (?)", [.int(userID)])
        XCTAssertThrowsError(try store.pull(userID: userID, cursor: nil, limit: 10)) {
            XCTAssertEqual($0 as? DomainError, .unavailable)
        }
        XCTAssertGreaterThanOrEqual(try store.backfillQueuedFeeds(), 1)
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM sync_feed_backfill WHERE user_id = ?", [.int(userID)])?.int64(0), 0)
        let page = try store.pull(userID: userID, cursor: nil, limit: 1000)
        XCTAssertFalse(page.hasMore)
        let body = try JSONParser.parse(page.jsonBody)
        guard case .object(let top) = body, case .object(let changes)? = top["changes"],
              case .object(let todos)? = changes["todos"], case .array(let live)? = todos["upserted"]
        else { return XCTFail("not a pull page: \(String(decoding: page.jsonBody, as: UTF8.self))") }
        XCTAssertEqual(live.count, 2, "the two live todos")
    }
}
