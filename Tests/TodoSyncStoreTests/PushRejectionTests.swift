import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// Push decides `rejected` by the kind of domain error: an operation's own fault (a record it
/// names that does not exist, invalid data) rejects that operation alone and the others apply;
/// an error of the request as a whole (the account gone) fails the push with that domain error.
final class PushRejectionTests: StoreTestCase {
    private func push(_ json: String, userID: Int64? = nil) throws -> [[String: JSONValue]] {
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        let results = try store.push(userID: userID ?? self.userID, try PushRequest.parse(&reader))
        guard case .array(let items) = try JSONParser.parse(results) else {
            XCTFail("not a JSON array: \(String(decoding: results, as: UTF8.self))")
            return []
        }
        return items.map { item in
            guard case .object(let fields) = item else { return [:] }
            return fields
        }
    }

    private func errorCode(_ result: [String: JSONValue]) -> String? {
        guard case .object(let error)? = result["error"], case .string(let code)? = error["code"] else { return nil }
        return code
    }

    func testAnOperationsOwnFaultRejectsOnlyThatOperation() throws {
        let body = """
            {"deviceId": "phone", "operations": [
              {"opId": "missing", "entity": "todo", "action": "update", "id": 999999999, "data": {"title": "x"}},
              {"opId": "invalid", "entity": "todo", "action": "create", "data": {"deadline": "2026-05-02"}},
              {"opId": "bad-tag", "entity": "todo", "action": "create",
               "data": {"title": "t", "deadline": "2026-05-02", "tagClientId": "6e7f8091-2b3c-4d4e-8f9a-1b2c3d4e5f60"}},
              {"opId": "fine", "entity": "todo", "action": "create", "data": {"title": "ok", "deadline": "2026-05-02"}}]}
            """
        let results = try push(body)
        XCTAssertEqual(results.map { $0["status"] }, [.string("rejected"), .string("rejected"), .string("rejected"),
                                                      .string("applied")])
        XCTAssertEqual(results.map(errorCode), ["not_found", "validation_failed", "validation_failed", nil])
        guard case .object(let error)? = results[1]["error"], case .array(let details)? = error["details"],
              case .object(let first)? = details.first else { return XCTFail("no details: \(results[1])") }
        XCTAssertEqual(first["field"], .string("title"))
        // The applied operation's effect and every result were committed: a replay returns them.
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM todos WHERE user_id = ?", [.int(userID)])?.int64(0), 1)
        XCTAssertEqual(try push(body).map(errorCode), ["not_found", "validation_failed", "validation_failed", nil])
    }

    func testAnErrorOfTheWholeRequestFailsThePush() throws {
        let body = """
            {"deviceId": "phone", "operations": [
              {"opId": "a", "entity": "todo", "action": "create", "data": {"title": "ok", "deadline": "2026-05-02"}}]}
            """
        try db.execute("DELETE FROM users WHERE id = ?", [.int(userID)])
        XCTAssertThrowsError(try push(body)) { XCTAssertEqual($0 as? DomainError, .unauthenticated) }
    }
}
