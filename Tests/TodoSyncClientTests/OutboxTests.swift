import Foundation
import GRDB
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// The outbox's coalescing rules and its state machine, on a real SQLite file, without a server:
/// server answers are fed in as the JSON the contract defines.
final class OutboxTests: XCTestCase {
    var directory: URL!
    var store: LocalStore!
    let day = Day("2026-11-24")!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = try LocalStore(path: directory.appendingPathComponent("store.sqlite").path)
    }

    override func tearDownWithError() throws {
        store = nil
        try? FileManager.default.removeItem(at: directory)
    }

    func queued() throws -> [OutboxOperation] { try store.pool.read { try OutboxOperation.fetchAll($0) } }

    /// Pretends the server applied every operation of the next batch, answering with records at
    /// increasing versions, as a push result would.
    @discardableResult
    func serverApplies(firstVersion: Int64 = 10, policy: ConflictStrategy = .merge) throws -> PushBatch? {
        guard let batch = try store.nextPushBatch(policy: policy) else { return nil }
        var version = firstVersion
        var results: [JSONValue] = []
        for op in batch.operations {
            let sent = JSONText.object(op.payload)
            results.append(.object(try serverResult(for: sent, id: 1000 + version, version: version)))
            version += 1
        }
        _ = try store.applyPushResults(results, policy: policy)
        return batch
    }

    func serverResult(for sent: JSONObject, id: Int64, version: Int64, status: String = "applied") throws -> JSONObject {
        let entity = sent["entity"]!.stringValue!
        let existing = sent["id"]?.int64Value
        let clientID = sent["clientId"]?.stringValue
        var record: JSONObject = [
            "id": .int(existing ?? id), "clientId": .optionalString(clientID), "version": .int(version),
            "createdAt": .string("2026-11-24T10:00:00.000Z"), "updatedAt": .string("2026-11-24T10:00:00.000Z"),
            "deletedAt": sent["action"]!.stringValue == "delete" ? .string("2026-11-24T10:00:01.000Z") : .null,
        ]
        let localID = try store.pool.read { db -> Int64? in
            if let existing { return try Int64.fetchOne(db, sql: "SELECT localId FROM \(entity) WHERE id = ?", arguments: [existing]) }
            return try Int64.fetchOne(db, sql: "SELECT localId FROM \(entity) WHERE clientKey = ?", arguments: [clientID!.lowercased()])
        }!
        let fields = try store.pool.read { try RecordFields.contractTerms($0, RecordFields.read($0, EntityKind(rawValue: entity)!, localID: localID)!) }
        record.merge(fields) { old, _ in old }
        for (key, value) in sent["data"]?.objectValue ?? [:] where key != "tagClientId" { record[key] = value }
        return ["opId": sent["opId"]!, "status": .string(status), "id": record["id"]!, "clientId": record["clientId"]!,
                "version": .int(version), "record": .object(record)]
    }

    // MARK: Coalescing

    func testCreateThenEditsIsOneCreateWithTheLatestFields() throws {
        let created = try store.addTodo(NewTodo(title: "Draft", deadline: day))
        try store.updateTodo(created.localID, TodoChanges(title: "Final", isCompleted: true))
        try store.updateTodo(created.localID, TodoChanges(difficulty: 4))
        let ops = try queued()
        XCTAssertEqual(ops.count, 1)
        XCTAssertEqual(ops[0].action, .create)
        XCTAssertEqual(ops[0].opID, created.opID)
        XCTAssertEqual(ops[0].data["title"], .string("Final"))
        XCTAssertEqual(ops[0].data["isCompleted"], .bool(true))
        XCTAssertEqual(ops[0].data["difficulty"], .int(4))
        XCTAssertEqual(try store.todo(created.localID)?.title, "Final")
    }

    func testEditsFoldIntoOneUpdateKeepingTheFirstBase() throws {
        let created = try store.addTodo(NewTodo(title: "Buy milk", deadline: day))
        try serverApplies(firstVersion: 7)
        XCTAssertEqual(try store.pendingCount(), 0)
        XCTAssertEqual(try store.todo(created.localID)?.version, 7)

        try store.updateTodo(created.localID, TodoChanges(title: "Buy oat milk"))
        try store.updateTodo(created.localID, TodoChanges(title: "Buy soy milk", isImportant: true))
        let ops = try queued()
        XCTAssertEqual(ops.count, 1)
        XCTAssertEqual(ops[0].action, .update)
        XCTAssertEqual(ops[0].baseVersion, 7)
        XCTAssertEqual(ops[0].data, ["title": .string("Buy soy milk"), "isImportant": .bool(true)])
        XCTAssertEqual(ops[0].base, ["title": .string("Buy milk"), "isImportant": .bool(false)])
    }

    func testAnEditUndoneBeforeSendingLeavesNothingToSend() throws {
        let created = try store.addTodo(NewTodo(title: "Walk", deadline: day))
        try serverApplies()
        try store.updateTodo(created.localID, TodoChanges(isCompleted: true))
        XCTAssertEqual(try store.pendingCount(), 1)
        try store.updateTodo(created.localID, TodoChanges(isCompleted: false))
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    func testDeleteReplacesAPendingUpdate() throws {
        let created = try store.addTodo(NewTodo(title: "Read", deadline: day))
        try serverApplies(firstVersion: 3)
        try store.updateTodo(created.localID, TodoChanges(title: "Read more"))
        let deleted = try store.deleteTodo(created.localID)
        let ops = try queued()
        XCTAssertEqual(ops.count, 1)
        XCTAssertEqual(ops[0].action, .delete)
        XCTAssertEqual(ops[0].baseVersion, 3)
        XCTAssertEqual(deleted.opID, ops[0].opID)
        XCTAssertNil(try store.todo(created.localID), "a deleted todo is hidden at once")
        XCTAssertThrowsError(try store.updateTodo(created.localID, TodoChanges(title: "x")))
    }

    func testDeletingANeverSentCreateRemovesBoth() throws {
        let tag = try store.addTag(name: "Home", color: "#00aa55")
        let todo = try store.addTodo(NewTodo(title: "Water plants", deadline: day, tag: tag.localID))
        XCTAssertEqual(try store.pendingCount(), 2)
        let deleted = try store.deleteTag(tag.localID)
        XCTAssertNil(deleted.opID, "nothing to tell the server")
        let ops = try queued()
        XCTAssertEqual(ops.map(\.action), [.create])
        XCTAssertEqual(ops[0].data["tag"], .null, "the pending todo no longer names the vanished tag")
        XCTAssertNil(try store.todo(todo.localID)?.tagLocalID)
        try store.deleteTodo(todo.localID)
        XCTAssertEqual(try store.pendingCount(), 0)
        XCTAssertEqual(try store.allTodos().count, 0)
    }

    // MARK: The state machine

    func testASendingOperationIsFrozenAndResentByteForByte() throws {
        let created = try store.addTodo(NewTodo(title: "Pay rent", deadline: day))
        let first = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        XCTAssertEqual(try store.status(ofOperation: created.opID!), .sending)
        // An edit while the create is in flight becomes a new operation after it.
        try store.updateTodo(created.localID, TodoChanges(title: "Pay the rent"))
        let ops = try queued()
        XCTAssertEqual(ops.map(\.action), [.create, .update])
        XCTAssertEqual(JSONText.object(ops[0].payload!)["data"]?.objectValue?["title"], .string("Pay rent"))
        XCTAssertTrue(ops[1].waitsForPredecessor)

        // The response was lost: the next batch resends the same payload, without the waiting update.
        let again = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        XCTAssertEqual(again.operations.map(\.opID), first.operations.map(\.opID))
        XCTAssertEqual(again.operations.map(\.payload), first.operations.map(\.payload))

        // The create's result arrives: the update is rebased on the returned version and goes next.
        let sent = JSONText.object(again.operations[0].payload)
        _ = try store.applyPushResults([.object(try serverResult(for: sent, id: 500, version: 42))], policy: .merge)
        XCTAssertEqual(try store.status(ofOperation: created.opID!), .applied)
        let update = try XCTUnwrap(queued().first)
        XCTAssertFalse(update.waitsForPredecessor)
        XCTAssertEqual(update.baseVersion, 42)
        XCTAssertEqual(update.base["title"], .string("Pay rent"))
        let next = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        let wire = JSONText.object(next.operations[0].payload)
        XCTAssertEqual(wire["id"], .int(500), "addressed by its new server id")
        XCTAssertEqual(wire["baseVersion"], .int(42))
        XCTAssertEqual(try store.todo(created.localID)?.title, "Pay the rent", "the local edit survives the older result")
    }

    func testTagCreatesGoFirstAndTodosNameNewTagsByClientID() throws {
        let todo = try store.addTodo(NewTodo(title: "Plan trip", deadline: day))
        let tag = try store.addTag(name: "Travel", color: "#123456")
        try store.updateTodo(todo.localID, TodoChanges(tag: .some(tag.localID)))
        let batch = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        let wire = batch.operations.map { JSONText.object($0.payload) }
        XCTAssertEqual(wire.map { $0["entity"]?.stringValue }, ["tag", "todo"])
        let tagClientID = wire[0]["clientId"]!
        XCTAssertEqual(wire[1]["data"]?.objectValue?["tagClientId"], tagClientID)
        XCTAssertNil(wire[1]["data"]?.objectValue?["tagId"])
    }

    func testBatchesHoldAtMost500Operations() throws {
        try store.pool.write { db in
            for index in 0..<1203 {
                _ = try LocalStore.insertTodo(db, try Validate.newTodo(NewTodo(title: "Item \(index)", deadline: self.day)))
            }
        }
        var sizes: [Int] = []
        var version: Int64 = 10
        while let batch = try serverApplies(firstVersion: version) {
            sizes.append(batch.operations.count)
            version += 1000
        }
        XCTAssertEqual(sizes, [500, 500, 203])
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    func testARejectedOperationIsUndoneAndKeptUntilAcknowledged() throws {
        let created = try store.addTodo(NewTodo(title: "Original", deadline: day))
        try serverApplies(firstVersion: 5)
        try store.updateTodo(created.localID, TodoChanges(title: "Edited"))
        let batch = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        let opID = batch.operations[0].opID
        _ = try store.applyPushResults([.object([
            "opId": .string(opID), "status": .string("rejected"), "id": .null, "clientId": .null, "version": .null,
            "record": .null, "error": .object(["code": .string("validation_failed"), "message": .string("bad")]),
        ])], policy: .merge)
        XCTAssertEqual(try store.status(ofOperation: opID), .rejected)
        XCTAssertEqual(try store.pendingCount(), 0, "a rejected operation is not sent again")
        XCTAssertNil(try store.nextPushBatch(policy: .merge))
        XCTAssertEqual(try store.operations().first?.errorCode, "validation_failed")
        XCTAssertEqual(try store.todo(created.localID)?.title, "Original", "the change did not happen")

        try store.acknowledgeRejected(opID)
        XCTAssertEqual(try store.todo(created.localID)?.title, "Original")
        XCTAssertEqual(try store.status(ofOperation: opID), .rejected)
        XCTAssertTrue(try queued().isEmpty)
    }

    /// Found by the convergence test: a pull that arrives while an edit is pending must not be
    /// lost if the server then rejects that edit.
    func testARejectedEditFallsBackToTheNewestServerValueNotItsBase() throws {
        let created = try store.addTodo(NewTodo(title: "Task", deadline: day))
        try serverApplies(firstVersion: 5)
        let serverID = try XCTUnwrap(store.todo(created.localID)?.serverID)
        try store.updateTodo(created.localID, TodoChanges(isCompleted: true))
        // Another device completed and then reopened... here: set it to true on the server.
        var record = todoRecord(id: serverID, version: 9, title: "Task")
        record["clientId"] = .optionalString(try store.todo(created.localID)?.clientID)
        record["isCompleted"] = .bool(true)
        record["isImportant"] = .bool(true)
        _ = try store.applyPullPage(try page(todos: [.object(record)]))
        let batch = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        _ = try store.applyPushResults([.object([
            "opId": .string(batch.operations[0].opID), "status": .string("rejected"), "id": .null, "clientId": .null,
            "version": .null, "record": .null, "error": .object(["code": .string("validation_failed"), "message": .string("x")]),
        ])], policy: .merge)
        let todo = try XCTUnwrap(store.todo(created.localID))
        XCTAssertTrue(todo.isCompleted, "the server's newer value, not the base (false)")
        XCTAssertTrue(todo.isImportant)
    }

    // MARK: Pull pages against pending changes

    func testAPulledRecordKeepsPendingFieldsAndTheOperationsBase() throws {
        let created = try store.addTodo(NewTodo(title: "Call mum", deadline: day))
        try serverApplies(firstVersion: 5)
        let serverID = try XCTUnwrap(store.todo(created.localID)?.serverID)
        try store.updateTodo(created.localID, TodoChanges(title: "Call mum tonight"))

        // Another device completed it and renamed it meanwhile.
        var record = try XCTUnwrap(serverResult(for: ["entity": .string("todo"), "action": .string("update"), "id": .int(serverID),
                                                        "opId": .string("x"), "data": .object([:])], id: serverID, version: 9)["record"]?.objectValue)
        record["title"] = .string("Call dad")
        record["isCompleted"] = .bool(true)
        _ = try store.applyPullPage(try page(todos: [.object(record)]))

        let todo = try XCTUnwrap(store.todo(created.localID))
        XCTAssertEqual(todo.title, "Call mum tonight", "the pending edit stays on the device")
        XCTAssertTrue(todo.isCompleted, "fields the device did not touch follow the server")
        XCTAssertEqual(todo.version, 9)
        let op = try XCTUnwrap(queued().first)
        XCTAssertEqual(op.baseVersion, 5, "the base stays, so the server sees the other device's change")
        XCTAssertEqual(op.base["title"], .string("Call mum"))
    }

    func testATombstoneForARecordWithAPendingEditIsNotASilentDelete() throws {
        let created = try store.addTodo(NewTodo(title: "Keep me", deadline: day))
        try serverApplies(firstVersion: 5)
        let serverID = try XCTUnwrap(store.todo(created.localID)?.serverID)
        try store.updateTodo(created.localID, TodoChanges(isImportant: true))
        _ = try store.applyPullPage(try page(todoTombstones: [.object([
            "id": .int(serverID), "clientId": .null, "version": .int(8), "deletedAt": .string("2026-11-24T11:00:00.000Z")])]))
        XCTAssertNotNil(try store.todo(created.localID), "still shown: the next push surfaces the conflict")
        XCTAssertEqual(try store.pendingCount(), 1)
    }

    func testAPageAndItsCursorAreOneTransaction() throws {
        let good = try page(todos: [.object(todoRecord(id: 1, version: 1, title: "A"))], cursor: "c1")
        _ = try store.applyPullPage(good)
        XCTAssertEqual(try store.pullCursor(), "c1")
        // A page that fails halfway leaves neither its records nor its cursor.
        var bad = try page(todos: [.object(todoRecord(id: 2, version: 2, title: "B"))], cursor: "c2")
        bad.hasMore = true
        struct InjectedFailure: Error {}
        XCTAssertThrowsError(try store.applyPullPage(bad, whileOpen: { throw InjectedFailure() }))
        XCTAssertEqual(try store.pullCursor(), "c1")
        XCTAssertEqual(try store.allTodos().map(\.title), ["A"])
    }

    // MARK: The page decoder

    func testThePageDecoderReadsEscapesUnicodeAndSkipsUnknownFields() throws {
        let text = #"""
            {"changes":{"tags":{"upserted":[{"id":3,"clientId":null,"name":"W\u00f6rk \"q\" \ud83d\ude00\n","color":"#FF8800",
            "version":4,"createdAt":"a","updatedAt":"b","deletedAt":null,"future":{"x":[1,2.5e3,true,null]}}],"deleted":[]},
            "todos":{"upserted":[],"deleted":[{"id":9,"clientId":"C","version":12,"deletedAt":"2026-11-24T00:00:00.000Z"}]},
            "dailyStats":{"upserted":[{"id":1,"date":"2026-11-24","tagStats":[{"tagId":3}],"version":5}],"deleted":[]}},
            "cursor":"abc","hasMore":true,"extra":[]}
            """#
        let page = try PageDecoder.decode(Array(text.utf8))
        XCTAssertEqual(page.tags.first?.name, "Wörk \"q\" 😀\n")
        XCTAssertEqual(page.tags.first?.version, 4)
        XCTAssertNil(page.tags.first?.clientID)
        XCTAssertEqual(page.todoTombstones.first?.id, 9)
        XCTAssertEqual(page.stats.first?.date, "2026-11-24")
        XCTAssertEqual(try JSONParser.parse(Array(page.stats[0].json)).objectValue?["version"], .int(5))
        XCTAssertEqual(page.cursor, "abc")
        XCTAssertEqual(page.hasMore, true)
        XCTAssertThrowsError(try PageDecoder.decode(Array(#"{"changes":{},"cursor":"a","hasMore":true} x"#.utf8)))
        XCTAssertThrowsError(try PageDecoder.decode(Array(#"{"cursor":"\ud800"}"#.utf8)))
    }

    // MARK: Helpers

    func todoRecord(id: Int64, version: Int64, title: String) -> JSONObject {
        ["id": .int(id), "clientId": .null, "title": .string(title), "raw": .string(title), "isImportant": .bool(false),
         "isLife": .bool(false), "tagId": .null, "difficulty": .int(0), "estimatedTime": .int(0),
         "deadline": .string(day.description), "isCompleted": .bool(false), "version": .int(version),
         "createdAt": .string("2026-11-24T09:00:00.000Z"), "updatedAt": .string("2026-11-24T09:00:00.000Z"), "deletedAt": .null]
    }

    /// A pull page as the server would send it, through the real decoder.
    func page(todos: [JSONValue] = [], todoTombstones: [JSONValue] = [], cursor: String = "next") throws -> DecodedPage {
        let empty: JSONValue = .object(["upserted": .array([]), "deleted": .array([])])
        let object: JSONObject = ["changes": .object(["tags": empty, "todos": .object(["upserted": .array(todos), "deleted": .array(todoTombstones)]),
                                    "dailyStats": empty]),
                "cursor": .string(cursor), "hasMore": .bool(false)]
        return try PageDecoder.decode(Array(JSONText.encode(object).utf8))
    }
}

