import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// The operations quota (Store+Quotas.swift) charges what a write changes, never a replay
/// (contract, push: "Replaying stored results costs no quota"; issue 19, item 8): at the quota a
/// push whose operations are all replays still gets its stored results, while a write that would
/// change anything is 429 before it changes it.
final class QuotaReplayTests: StoreTestCase {
    private let day = Day("2026-04-01")!

    private func push(_ json: String) throws -> [UInt8] {
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        return try store.push(userID: userID, try PushRequest.parse(&reader))
    }

    private func setQuota(operations: Int) throws {
        try db.execute("UPDATE users SET quota_operations_per_hour = ? WHERE id = ?", [.int(Int64(operations)), .int(userID)])
    }

    private func usage() throws -> Int64 {
        try db.queryOne("SELECT COALESCE(SUM(operations), 0) FROM account_usage WHERE user_id = ?", [.int(userID)])?
            .int64(0) ?? 0
    }

    private func assertQuotaRefusal(_ body: @autoclosure () throws -> some Any, file: StaticString = #filePath,
                                    line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            guard case .throttled(let message, let seconds)? = error as? DomainError else {
                return XCTFail("not a quota refusal: \(error)", file: file, line: line)
            }
            XCTAssertTrue(message.contains("per hour"), message, file: file, line: line)
            XCTAssertTrue((1...3600).contains(seconds), "Retry-After \(seconds)", file: file, line: line)
        }
    }

    func testAReplayedPushIsAnsweredAtTheQuotaAndCostsNothing() throws {
        try setQuota(operations: 2)
        let body = """
            {"deviceId": "phone", "operations": [
              {"opId": "q-1", "entity": "todo", "action": "create", "data": {"title": "one", "deadline": "2026-04-01"}},
              {"opId": "q-2", "entity": "todo", "action": "create", "data": {"title": "two", "deadline": "2026-04-01"}}]}
            """
        let first = try push(body)
        XCTAssertEqual(try usage(), 2)
        // The quota is used up: the same push (its response lost, say) replays its stored results.
        XCTAssertEqual(try push(body), first)
        XCTAssertEqual(try usage(), 2, "a replay costs no quota")
        // Anything new is refused, and changes nothing.
        assertQuotaRefusal(try push("""
            {"deviceId": "phone", "operations": [
              {"opId": "q-3", "entity": "todo", "action": "create", "data": {"title": "three", "deadline": "2026-04-01"}}]}
            """))
        assertQuotaRefusal(try store.createTodo(userID: userID, TodoDraft(title: "rest", deadline: day)))
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM todos WHERE user_id = ?", [.int(userID)])?.int64(0), 2)
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM sync_operations WHERE user_id = ?", [.int(userID)])?
            .int64(0), 2)
        XCTAssertEqual(try usage(), 2)
    }

    func testACreateOfAnExistingClientIdIsAnsweredAtTheQuota() throws {
        try setQuota(operations: 1)
        let clientID = UUID().uuidString.lowercased()
        let created = try store.createTodo(userID: userID, TodoDraft(clientID: clientID, title: "once", deadline: day))
        XCTAssertTrue(created.isNew)
        let again = try store.createTodo(userID: userID, TodoDraft(clientID: clientID, title: "once", deadline: day))
        XCTAssertFalse(again.isNew)
        XCTAssertEqual(again.record.id, created.record.id)
        XCTAssertEqual(try usage(), 1)
    }
}
