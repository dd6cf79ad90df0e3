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
        // The multi-row statements write up to 128 rendered todos in one packet.
        let packet = try XCTUnwrap(try db.queryOne("SELECT @@max_allowed_packet")?.int64(0))
        XCTAssertGreaterThan(Int(packet), MultiRowStatement.sizes.max()! * (Todo.maximumRenderedBytes + 1_024))
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
}
