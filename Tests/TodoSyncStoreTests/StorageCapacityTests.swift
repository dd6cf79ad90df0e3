import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// Issue 34, items 3 and 4, against the real schema: every column that keeps a rendering holds
/// the largest valid record (derived from the field limits, `Todo.maximumRenderedBytes`), a todo
/// that could not be stored is rejected alone in a push, and what Idempotency-Key answers store is
/// counted and bounded.
final class StorageCapacityTests: StoreTestCase {
    private let day = Day("2031-05-05")!

    /// The bytes a column holds, from information_schema (CHARACTER_OCTET_LENGTH: a BLOB's 65,535,
    /// a MEDIUMBLOB's 16,777,215).
    private func capacity(_ table: String, _ column: String) throws -> Int {
        let row = try db.queryOne("""
            SELECT CHARACTER_OCTET_LENGTH FROM information_schema.COLUMNS
             WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?
            """, [.text(table), .text(column)])
        let bytes = try XCTUnwrap(row?.int64(0), "\(table).\(column) not found")
        return Int(bytes)
    }

    /// Fails until the columns grow when a field is added or a limit raised: the largest valid
    /// todo (escapes included) fits every column that keeps a todo's JSON, `StorageCapacity`
    /// states their real capacity, and the other rendering columns hold what they are given.
    func testEveryRenderingColumnHoldsTheLargestValidRecord() throws {
        for (table, column) in StorageCapacity.todoRenderingColumns {
            let bytes = try capacity(table, column)
            XCTAssertGreaterThanOrEqual(bytes, Todo.maximumRenderedBytes,
                                        "\(table).\(column) holds \(bytes) bytes, a todo renders up to \(Todo.maximumRenderedBytes)")
            XCTAssertGreaterThanOrEqual(bytes, StorageCapacity.todoRendering, "\(table).\(column)")
        }
        XCTAssertGreaterThanOrEqual(StorageCapacity.todoRendering, Todo.maximumRenderedBytes)
        XCTAssertEqual(StoreConfiguration().todoRenderingCapacity, StorageCapacity.todoRendering)
        for (table, column, holds) in StorageCapacity.otherColumns {
            XCTAssertGreaterThanOrEqual(try capacity(table, column), holds, "\(table).\(column)")
        }
        // A POST /todos answer is one todo: a keyed one is kept.
        XCTAssertGreaterThan(Store.maximumStoredAnswerBytes, Todo.maximumRenderedBytes)
        // The multi-row statements write up to 128 rendered todos in one packet.
        let packet = try XCTUnwrap(try db.queryOne("SELECT @@max_allowed_packet")?.int64(0))
        XCTAssertGreaterThan(Int(packet), MultiRowStatement.sizes.max()! * (Todo.maximumRenderedBytes + 1_024))
        XCTAssertGreaterThan(Int(packet), Store.maximumStoredAnswerBytes + 1_024)
    }

    private func push(_ operations: [String], store: Store? = nil) throws -> [[String: JSONValue]] {
        let json = #"{"deviceId": "phone", "operations": ["# + operations.joined(separator: ",") + "]}"
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        let results = try (store ?? self.store).push(userID: userID, try PushRequest.parse(&reader))
        guard case .array(let items) = try JSONParser.parse(results) else { XCTFail("not an array"); return [] }
        return items.map { item in
            guard case .object(let fields) = item else { return [:] }
            return fields
        }
    }

    private func escaped(_ count: Int) -> String { String(repeating: "\\u0001", count: count) }

    /// The issue's todo (raw 2,000 × U+0001, notes 10,000 × U+0001) was a 500 for any batch it was
    /// in, on every retry: now it is stored with the rest of its batch.
    func testTheLargestTodoIsStoredWithItsBatch() throws {
        let results = try push([
            #"{"opId": "big", "entity": "todo", "action": "create", "data": {"title": "\#(escaped(200))", "raw": "\#(escaped(2000))", "notes": "\#(escaped(10000))", "deadline": "2031-05-05"}}"#,
            #"{"opId": "small", "entity": "todo", "action": "create", "data": {"title": "small", "deadline": "2031-05-05"}}"#,
        ])
        XCTAssertEqual(results.map { $0["status"] }, [.string("applied"), .string("applied")])
        let stored = try db.queryOne("SELECT MAX(LENGTH(body)) FROM todo_list WHERE user_id = ?", [.int(userID)])?.int64(0)
        XCTAssertGreaterThan(Int(stored ?? 0), 65_535)
    }

    /// A todo too long for the columns that keep it is that operation's fault: it alone is
    /// rejected (validation_failed on its longest field), the rest of the batch applies, and a
    /// retry answers the same. The capacity is lowered here: the schema's holds any valid todo.
    func testATodoTooLongToStoreIsRejectedAloneAndTheRestApplies() throws {
        var configuration = StoreConfiguration()
        configuration.todoRenderingCapacity = 60_000
        let tight = Store(connection: db, configuration: configuration)
        let operations = [
            #"{"opId": "a", "entity": "todo", "action": "create", "data": {"title": "before", "deadline": "2031-05-05"}}"#,
            #"{"opId": "big", "entity": "todo", "action": "create", "data": {"title": "t", "raw": "\#(escaped(2000))", "notes": "\#(escaped(10000))", "deadline": "2031-05-05"}}"#,
            #"{"opId": "b", "entity": "todo", "action": "create", "data": {"title": "after", "deadline": "2031-05-05"}}"#,
        ]
        let first = try push(operations, store: tight)
        XCTAssertEqual(first.map { $0["status"] }, [.string("applied"), .string("rejected"), .string("applied")])
        guard case .object(let error)? = first[1]["error"], case .array(let details)? = error["details"],
              case .object(let detail)? = details.first else { return XCTFail("no details: \(first[1])") }
        XCTAssertEqual(error["code"], .string("validation_failed"))
        XCTAssertEqual(detail["field"], .string("notes"))
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM todos WHERE user_id = ?", [.int(userID)])?.int64(0), 2)
        let again = try push(operations, store: tight)
        XCTAssertEqual(again.map { $0["status"] }, first.map { $0["status"] })
        // An update that would make a stored todo too long is rejected the same way.
        guard case .number(let id)? = first[0]["id"], let todoID = id.int64 else { return XCTFail("no id") }
        let update = try push([
            #"{"opId": "grow", "entity": "todo", "action": "update", "id": \#(todoID), "data": {"notes": "\#(escaped(10000))", "raw": "\#(escaped(2000))"}}"#,
        ], store: tight)
        XCTAssertEqual(update.first?["status"], .string("rejected"))
    }

    // MARK: Idempotency-Key answers (item 4)

    private func claim(_ key: String, body: String = "{}") throws -> IdempotencyTicket {
        let print = Store.idempotencyFingerprint(method: "POST", path: "/api/v1/todos", body: Array(body.utf8))
        guard case .claimed(let ticket) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            throw XCTSkip("key not claimed")
        }
        return ticket
    }

    private func run(_ key: String, answerBytes: Int, replay: Bool = false) throws {
        let ticket = try claim(key)
        do {
            _ = try store.runIdempotent(ticket, {
                try store.createTodo(userID: userID, TodoDraft(title: key, deadline: day))
            }, answer: { _ in
                StoredResponse(status: 201, headers: [("Content-Type", "application/json")],
                               body: Array(repeating: UInt8(ascii: "x"), count: answerBytes), replay: replay)
            })
        } catch {
            store.releaseIdempotencyKey(ticket)
            throw error
        }
    }

    private func storedBytesCharged() throws -> Int64 {
        try db.queryOne("SELECT COALESCE(SUM(stored_bytes), 0) FROM account_usage WHERE user_id = ?", [.int(userID)])?
            .int64(0) ?? 0
    }

    /// A kept answer is charged to the account's stored bytes; an answer rebuilt by replay keeps no
    /// body and costs its row only.
    func testKeptAnswersAreChargedAndReplayedOnesStoreNoBody() throws {
        try run("kept", answerBytes: 50_000)
        let charged = try storedBytesCharged()
        XCTAssertGreaterThan(charged, 50_000)
        try run("rebuilt", answerBytes: 50_000, replay: true)
        XCTAssertLessThan(try storedBytesCharged() - charged, 500)
        let row = try XCTUnwrap(try db.queryOne(
            "SELECT replay, response_body IS NULL, stored_bytes FROM idempotency_keys WHERE user_id = ? AND idem_key = ?",
            [.int(userID), .blob(Array("rebuilt".utf8))]))
        XCTAssertEqual(row.int64(0), 1)
        XCTAssertEqual(row.bool(1), true)
        guard case .completed(let stored) = try store.claimIdempotencyKey(
            userID: userID, key: "rebuilt",
            fingerprint: Store.idempotencyFingerprint(method: "POST", path: "/api/v1/todos", body: Array("{}".utf8))) else {
            return XCTFail("a completed key")
        }
        XCTAssertTrue(stored.replay)
        XCTAssertEqual(stored.body, [])
    }

    /// The account's records have a ceiling of rows and of bytes: past it a keyed request is 429
    /// with the seconds until the oldest expires, nothing applied; an answer larger than the whole
    /// ceiling is a definite 422 on the key.
    func testTheAccountsRecordsHaveACeiling() throws {
        try db.execute("UPDATE users SET quota_idempotency_keys = 2, quota_idempotency_bytes = 20000 WHERE id = ?",
                       [.int(userID)])
        try run("one", answerBytes: 100)
        try run("two", answerBytes: 100)
        XCTAssertThrowsError(try run("three", answerBytes: 100)) { error in
            guard case .throttled(_, let retryAfter) = error as? DomainError else { return XCTFail("\(error)") }
            XCTAssertGreaterThan(retryAfter, 3_600)
        }
        try db.execute("UPDATE users SET quota_idempotency_keys = 100 WHERE id = ?", [.int(userID)])
        XCTAssertThrowsError(try run("big", answerBytes: 30_000)) { error in
            guard case .validation(let problems) = error as? DomainError else { return XCTFail("\(error)") }
            XCTAssertEqual(problems.first?.field, "Idempotency-Key")
        }
        try run("fits", answerBytes: 15_000)
        XCTAssertThrowsError(try run("over", answerBytes: 5_000)) { error in
            guard case .throttled = error as? DomainError else { return XCTFail("\(error)") }
        }
        // Nothing of the refused requests applied.
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM todos WHERE user_id = ?", [.int(userID)])?.int64(0), 3)
        // Records past retention do not count: the ceiling frees itself.
        try db.execute("UPDATE idempotency_keys SET created_at = NOW(3) - INTERVAL 2 DAY WHERE user_id = ?", [.int(userID)])
        try run("later", answerBytes: 5_000)
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM idempotency_keys WHERE user_id = ?", [.int(userID)])?.int64(0), 1)
    }

    /// Rebuilding a keyed push's answer changes nothing: an operation without a stored result
    /// (never expected: keys go before the results they need) fails the push, nothing applied.
    func testARebuiltPushNeverAppliesAnOperation() throws {
        let create = #"{"opId": "fresh", "entity": "todo", "action": "create", "data": {"title": "t", "deadline": "2031-05-05"}}"#
        store.replayOnly = true
        XCTAssertThrowsError(try push([create])) { XCTAssertTrue($0 is PushReplayError, "\($0)") }
        store.replayOnly = false
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM todos WHERE user_id = ?", [.int(userID)])?.int64(0), 0)
        let first = try push([create])
        store.replayOnly = true
        defer { store.replayOnly = false }
        XCTAssertEqual(try push([create]), first, "every result stored: the same answer")
    }

    /// A keyed push's answer is rebuilt from the results it replays, so it restarts their
    /// retention (and their records'): they live as long as the key.
    func testAKeyedPushKeepsTheResultsItReplays() throws {
        let create = #"{"opId": "old", "entity": "todo", "action": "create", "data": {"title": "t", "deadline": "2031-05-05"}}"#
        _ = try push([create])
        try db.execute("UPDATE sync_operations SET created_at = NOW(3) - INTERVAL 80 DAY WHERE user_id = ?", [.int(userID)])
        try db.execute("UPDATE sync_result_records SET last_used = NOW(3) - INTERVAL 80 DAY WHERE user_id = ?", [.int(userID)])
        let ticket = try claim("keyed-push")
        _ = try store.runIdempotent(ticket, { try push([create]) }, answer: { _ in
            StoredResponse(status: 200, headers: [], body: [], replay: true)
        })
        let ages = try XCTUnwrap(try db.queryOne("""
            SELECT TIMESTAMPDIFF(DAY, o.created_at, NOW(3)), TIMESTAMPDIFF(DAY, r.last_used, NOW(3))
              FROM sync_operations o JOIN sync_result_records r ON r.user_id = o.user_id AND r.digest = o.record_digest
             WHERE o.user_id = ?
            """, [.int(userID)]))
        XCTAssertEqual(ages.int64(0), 0)
        XCTAssertEqual(ages.int64(1), 0)
    }
}
