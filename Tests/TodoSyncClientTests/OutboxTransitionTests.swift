import Foundation
import GRDB
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// Every row of the state table in `Outbox.swift`, walked in process: a real store file, the real
/// sync engine, and `FakeServer` behind the `HTTPTransport` protocol. A test is named after the
/// rows it walks (`testE9_F3_R1_…`); `testEveryRowOfTheTableHasATest` keeps table and tests in step.
final class OutboxTransitionTests: XCTestCase {
    var directory: URL!
    var store: LocalStore!
    var server: FakeServer!
    var client: TodoSyncClient!
    let day = Day("2026-11-24")!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("transitions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        store = try LocalStore(path: directory.appendingPathComponent("store.sqlite").path)
        try store.signIn(userID: 1, email: "me@example.com", token: "token")
        server = FakeServer()
        client = TodoSyncClient(store: store, baseURL: URL(string: "http://fake.invalid")!, transport: server,
                                retry: RetryPolicy(maxAttempts: 1), clock: TestClock())
    }

    override func tearDownWithError() throws {
        client = nil
        store = nil
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Helpers

    func queued() throws -> [OutboxOperation] { try store.pool.read { try OutboxOperation.fetchAll($0) } }

    /// A todo the server has (created here and synced).
    func syncedTodo(_ title: String = "A") async throws -> LocalTodo {
        let change = try store.addTodo(NewTodo(title: title, deadline: day))
        _ = try await client.sync()
        return try XCTUnwrap(store.todo(change.localID))
    }

    /// The operations of push request `index`, as the server received them.
    func pushed(_ index: Int) throws -> [JSONObject] {
        guard server.pushBodies.indices.contains(index) else {
            XCTFail("no push request #\(index)")
            return []
        }
        let body = try JSONParser.parse(Array(server.pushBodies[index].utf8)).objectValue
        return (body?["operations"]?.arrayValue ?? []).compactMap(\.objectValue)
    }

    /// The record's fields, read from its row (nil when the row is gone).
    func fields(_ localID: Int64) throws -> JSONObject? {
        try store.pool.read { try RecordFields.read($0, .todo, localID: localID) }
    }

    /// Deletes through the outbox even though the record is hidden (to reach E8 directly).
    func deleteHidden(_ localID: Int64) throws -> LocalChange {
        try store.pool.write { db in
            try RecordFields.setDeleted(db, .todo, localID: localID, false)
            return try Outbox.delete(db, .todo, localID: localID)
        }
    }

    func logged(_ opID: String?) throws -> OperationInfo? {
        try store.operations().first { $0.opID == opID && $0.status.isFinal }
    }

    // MARK: Enqueue and coalesce

    func testE1_ACreateIsQueuedAndSentWithItsClientID() async throws {
        let change = try store.addTodo(NewTodo(title: "A", deadline: day))
        let ops = try queued()
        XCTAssertEqual(ops.map(\.action), [.create])
        XCTAssertEqual(ops.first?.state, .pending)
        XCTAssertEqual(ops.first?.opID, change.opID)
        let clientID = try XCTUnwrap(store.todo(change.localID)?.clientID)
        _ = try await client.sync()
        XCTAssertEqual(try pushed(0).first?["clientId"], .string(clientID))
    }

    func testE2_AnEditOrDeleteOfASyncedRecordIsBasedOnWhatTheDeviceLastSaw() async throws {
        let todo = try await syncedTodo("A")
        let other = try await syncedTodo("B")
        try store.updateTodo(todo.localID, TodoChanges(title: "A2"))
        try store.deleteTodo(other.localID)
        let ops = try queued()
        XCTAssertEqual(ops.map(\.action), [.update, .delete])
        XCTAssertEqual(ops[0].base, ["title": .string("A")])
        XCTAssertEqual(ops[0].baseVersion, todo.version)
        XCTAssertEqual(ops[1].baseVersion, other.version)
        XCTAssertFalse(ops.contains { $0.waitsForPredecessor })
    }

    func testE3_EditsOfAPendingCreateFoldIntoIt() throws {
        let change = try store.addTodo(NewTodo(title: "Draft", deadline: day))
        try store.updateTodo(change.localID, TodoChanges(title: "Final", difficulty: 3))
        let ops = try queued()
        XCTAssertEqual(ops.count, 1)
        XCTAssertEqual(ops[0].opID, change.opID)
        XCTAssertEqual(ops[0].data["title"], .string("Final"))
        XCTAssertEqual(ops[0].data["difficulty"], .int(3))
    }

    func testE4_EditsOfAPendingUpdateFoldKeepingTheFirstBase() async throws {
        let todo = try await syncedTodo("A")
        try store.updateTodo(todo.localID, TodoChanges(title: "B"))
        try store.updateTodo(todo.localID, TodoChanges(title: "C", difficulty: 2))
        let ops = try queued()
        XCTAssertEqual(ops.count, 1)
        XCTAssertEqual(ops[0].data, ["title": .string("C"), "difficulty": .int(2)])
        XCTAssertEqual(ops[0].base, ["title": .string("A"), "difficulty": .int(0)])
        XCTAssertEqual(ops[0].baseVersion, todo.version)
    }

    func testE5_AnEditUndoneBeforeItIsSentLeavesNothingToSend() async throws {
        let todo = try await syncedTodo("A")
        try store.updateTodo(todo.localID, TodoChanges(title: "B"))
        let undone = try store.updateTodo(todo.localID, TodoChanges(title: "A"))
        XCTAssertNil(undone.opID)
        XCTAssertEqual(try queued().count, 0)
    }

    func testE6_DeletingANeverSentCreateRemovesBothAndSendsNothing() async throws {
        let change = try store.addTodo(NewTodo(title: "A", deadline: day))
        XCTAssertNil(try store.deleteTodo(change.localID).opID)
        XCTAssertEqual(try queued().count, 0)
        XCTAssertNil(try fields(change.localID))
        _ = try await client.sync()
        XCTAssertEqual(server.pushes.count, 0)
    }

    func testE7_ADeleteReplacesAPendingUpdate() async throws {
        let todo = try await syncedTodo("A")
        let edit = try store.updateTodo(todo.localID, TodoChanges(title: "B"))
        let delete = try store.deleteTodo(todo.localID)
        let ops = try queued()
        XCTAssertEqual(ops.count, 1)
        XCTAssertEqual(delete.opID, edit.opID)
        XCTAssertEqual(ops[0].action, .delete)
        XCTAssertEqual(ops[0].data, [:])
        XCTAssertEqual(ops[0].base, [:])
        XCTAssertNil(try store.todo(todo.localID))
    }

    func testE8_APendingDeleteAbsorbsAnotherDeleteAndRefusesEdits() async throws {
        let todo = try await syncedTodo("A")
        let first = try store.deleteTodo(todo.localID)
        XCTAssertThrowsError(try store.deleteTodo(todo.localID)) { XCTAssertEqual($0 as? LocalStoreError, .notFound) }
        XCTAssertThrowsError(try store.updateTodo(todo.localID, TodoChanges(title: "B"))) {
            XCTAssertEqual($0 as? LocalStoreError, .notFound)
        }
        XCTAssertEqual(try queued().map(\.opID), [first.opID])
        // The row's state, not only the public API: a second delete of a pending delete is the same op.
        let again = try deleteHidden(todo.localID)
        XCTAssertEqual(again.opID, first.opID)
        XCTAssertEqual(try queued().count, 1)
    }

    /// E9: an edit while the record's operation is sending is a new operation after it; F3: that
    /// one is not frozen; R1: the result of the first becomes its base, and the same sync sends it.
    func testE9_F3_R1_AnEditMadeWhileSendingWaitsThenIsBasedOnTheResult() async throws {
        let todo = try await syncedTodo("A")
        try store.updateTodo(todo.localID, TodoChanges(title: "one"))
        let store = self.store!
        server.whileNextPush {
            do {
                try store.updateTodo(todo.localID, TodoChanges(title: "two"))
                let ops = try store.pool.read { try OutboxOperation.fetchAll($0) }
                XCTAssertEqual(ops.map(\.state), [.sending, .pending])
                XCTAssertEqual(ops.map(\.waitsForPredecessor), [false, true])
                XCTAssertNil(ops.last?.baseVersion)
                // F3: freezing now resends the sending one only.
                let batch = try store.nextPushBatch(policy: .merge)
                XCTAssertEqual(batch?.operations.map(\.opID), [ops[0].opID])
                XCTAssertEqual(try store.pool.read { try OutboxOperation.fetchAll($0) }.last?.state, .pending)
            } catch {
                XCTFail("\(error)")
            }
        }
        _ = try await client.sync()
        XCTAssertEqual(server.pushes.count, 3)
        let first = try XCTUnwrap(pushed(1).first)
        let second = try XCTUnwrap(pushed(2).first)
        XCTAssertEqual(first["data"]?.objectValue?["title"], .string("one"))
        XCTAssertEqual(second["data"]?.objectValue?["title"], .string("two"))
        XCTAssertEqual(second["baseVersion"], .int(try XCTUnwrap(todo.version) + 1), "based on the first one's result")
        XCTAssertEqual(second["base"]?.objectValue?["title"], .string("one"))
        XCTAssertEqual(try queued().count, 0)
        XCTAssertEqual(try store.todo(todo.localID)?.title, "two")
    }

    // MARK: Freeze for sending

    func testF1_AnOperationLeftSendingIsResentFirstByteForByte() async throws {
        try store.addTodo(NewTodo(title: "A", deadline: day))
        server.loseNextResponse()
        do {
            _ = try await client.sync()
            XCTFail("the response was lost")
        } catch {}
        let frozen = try queued()
        XCTAssertEqual(frozen.map(\.state), [.sending])
        try store.addTodo(NewTodo(title: "B", deadline: day))
        _ = try await client.sync()
        let first = try pushed(0)
        let resent = try pushed(1)
        XCTAssertEqual(resent.count, 2)
        XCTAssertEqual(resent.first?["opId"], first.first?["opId"])
        XCTAssertTrue(server.pushBodies[1].contains(try XCTUnwrap(frozen[0].payload)), "the stored payload, byte for byte")
        XCTAssertEqual(try queued().count, 0)
    }

    /// F4: a push answered 426 (nothing applied) gives the operations it froze back to
    /// `pending`, payload unset; one left `sending` by an earlier lost response stays as it was.
    func testF4_A426GivesBackOnlyWhatThatPushFroze() async throws {
        let todo = try await syncedTodo()
        try store.updateTodo(todo.localID, TodoChanges(title: "sent before"))
        server.loseNextResponse()
        _ = try? await client.sync()
        try store.addTodo(NewTodo(title: "B", deadline: day))
        let before = try queued()
        XCTAssertEqual(before.map(\.state), [.sending, .pending])
        server.requireSchemaVersion(SchemaVersion.current + 1)
        do {
            _ = try await client.sync()
            XCTFail("synced below the minimum")
        } catch SyncError.upgradeRequired {}
        XCTAssertEqual(server.pushes.count, 3, "the refused push carried both")
        let after = try queued()
        XCTAssertEqual(after, before)
        XCTAssertNil(after[1].payload)
    }

    func testF2_FreezingStoresPayloadAndStateTogetherTagCreatesFirst() throws {
        try store.addTodo(NewTodo(title: "untagged", deadline: day))
        let tag = try store.addTag(name: "Work", color: "#112233")
        try store.addTodo(NewTodo(title: "tagged", deadline: day, tag: tag.localID))
        let batch = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        let ops = try queued()
        XCTAssertEqual(ops.map(\.state), [.sending, .sending, .sending])
        XCTAssertTrue(ops.allSatisfy { $0.payload != nil })
        XCTAssertEqual(batch.operations.first?.opID, tag.opID, "tag creates go first")
        let tagged = batch.operations.map { JSONText.object($0.payload) }.first { $0["data"]?.objectValue?["title"] == .string("tagged") }
        let tagClientID = try XCTUnwrap(store.tag(tag.localID)?.clientID)
        XCTAssertEqual(tagged?["data"]?.objectValue?["tagClientId"], .string(tagClientID))
        let again = try XCTUnwrap(store.nextPushBatch(policy: .merge))
        XCTAssertEqual(again.operations.map(\.payload).sorted(), batch.operations.map(\.payload).sorted(), "frozen: the same payloads again")
    }

    // MARK: Settle a result

    func testS1_AppliedAndMergedResultsStoreTheServerRecordAndGoToTheLog() async throws {
        let change = try store.addTodo(NewTodo(title: "A", deadline: day))
        _ = try await client.sync()
        let todo = try XCTUnwrap(store.todo(change.localID))
        XCTAssertNotNil(todo.serverID)
        XCTAssertNotNil(todo.version)
        XCTAssertEqual(try logged(change.opID)?.status, .applied)

        server.answer(.merged(["difficulty"]))
        let edit = try store.updateTodo(change.localID, TodoChanges(title: "B"))
        _ = try await client.sync()
        XCTAssertEqual(try logged(edit.opID)?.status, .merged)
        XCTAssertEqual(try logged(edit.opID)?.conflictingFields, ["difficulty"])
        XCTAssertEqual(try store.todo(change.localID)?.version, todo.version.map { $0 + 1 })
        XCTAssertEqual(try queued().count, 0)
    }

    func testS2_AConflictStoresTheServerCopyAndWithAskFillsTheInbox() async throws {
        let todo = try await syncedTodo("A")
        server.editOnServer(clientID: todo.clientID!, ["title": .string("theirs")])
        let edit = try store.updateTodo(todo.localID, TodoChanges(title: "mine"))
        server.answer(.conflict)
        _ = try await client.sync(policy: .askApp)
        XCTAssertEqual(try logged(edit.opID)?.status, .conflict)
        XCTAssertEqual(try store.todo(todo.localID)?.title, "theirs")
        let conflict = try XCTUnwrap(store.conflicts().first)
        XCTAssertEqual(conflict.opID, edit.opID)
        XCTAssertEqual(conflict.base["title"], .string("A"))
        XCTAssertEqual(conflict.local["title"], .string("mine"))
        XCTAssertEqual(conflict.server["title"], .string("theirs"))
        XCTAssertEqual(conflict.serverVersion, try store.todo(todo.localID)?.version)
    }

    func testS3_ARejectedEditIsUndoneAndKeptInTheOutbox() async throws {
        let todo = try await syncedTodo("A")
        let edit = try store.updateTodo(todo.localID, TodoChanges(title: "B"))
        server.answer(.rejected("validation_failed"))
        _ = try await client.sync()
        let ops = try queued()
        XCTAssertEqual(ops.map(\.opID), [edit.opID])
        XCTAssertEqual(ops.first?.state, .rejected)
        XCTAssertEqual(ops.first?.errorCode, "validation_failed")
        XCTAssertEqual(try store.todo(todo.localID)?.title, "A")
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    func testS4_AResultForNoOperationInFlightIsIgnored() throws {
        let change = try store.addTodo(NewTodo(title: "A", deadline: day))
        let results: [JSONValue] = [
            .object(["opId": .string("not-an-operation"), "status": .string("applied")]),
            .object(["opId": .string(change.opID!), "status": .string("applied"),
                     "record": .object(["id": .int(5), "version": .int(1), "title": .string("server")])]),
        ]
        XCTAssertEqual(try store.applyPushResults(results, policy: .merge), [], "the create is pending, not sending")
        XCTAssertEqual(try queued().map(\.state), [.pending])
        XCTAssertEqual(try store.todo(change.localID)?.title, "A")
        XCTAssertNil(try store.todo(change.localID)?.serverID)
    }

    /// R2: the next operation made on top of one that conflicted keeps the base the user saw.
    func testR2_AnEditMadeOnTopOfAConflictInheritsItsBase() async throws {
        let todo = try await syncedTodo("A")
        server.editOnServer(clientID: todo.clientID!, ["difficulty": .int(5)])
        try store.updateTodo(todo.localID, TodoChanges(title: "mine"))
        server.answer(.conflict)
        let store = self.store!
        server.whileNextPush {
            do { try store.updateTodo(todo.localID, TodoChanges(title: "mine again")) } catch { XCTFail("\(error)") }
        }
        _ = try await client.sync(policy: .reject)
        let next = try XCTUnwrap(pushed(2).first)
        XCTAssertEqual(next["baseVersion"], todo.version.map { .int($0) }, "the version the user saw, not the server's")
        XCTAssertEqual(next["base"]?.objectValue?["title"], .string("A"))
        XCTAssertEqual(try queued().count, 0)
    }

    // MARK: Acknowledge a rejection

    func testA1_AcknowledgingARejectedCreateForgetsTheRecord() async throws {
        let change = try store.addTodo(NewTodo(title: "A", deadline: day))
        server.answer(.rejected("validation_failed"))
        _ = try await client.sync()
        XCTAssertNotNil(try store.todo(change.localID), "kept until the app acknowledges")
        try store.acknowledgeRejected(change.opID!)
        XCTAssertNil(try store.todo(change.localID))
        XCTAssertEqual(try queued().count, 0)
        XCTAssertEqual(try logged(change.opID)?.status, .rejected)
        XCTAssertEqual(try logged(change.opID)?.errorCode, "validation_failed")
        XCTAssertThrowsError(try store.acknowledgeRejected(change.opID!)) { XCTAssertEqual($0 as? LocalStoreError, .notFound) }
    }

    // MARK: Resolve a conflict

    func conflicted(_ title: String = "A", serverFields: JSONObject, local: (Int64) throws -> LocalChange) async throws -> (LocalTodo, SyncConflict) {
        let todo = try await syncedTodo(title)
        server.editOnServer(clientID: todo.clientID!, serverFields)
        _ = try local(todo.localID)
        server.answer(.conflict)
        _ = try await client.sync(policy: .askApp)
        return (todo, try XCTUnwrap(store.conflicts().first))
    }

    func testC1_KeepMineOrEditedIsANewUpdateBasedOnTheServerCopy() async throws {
        let (todo, conflict) = try await conflicted(serverFields: ["title": .string("theirs")]) {
            try self.store.updateTodo($0, TodoChanges(title: "mine"))
        }
        let kept = try store.resolveConflict(conflict.conflictID, .keepMine)
        let op = try XCTUnwrap(queued().first { $0.opID == kept.opID })
        XCTAssertEqual(op.action, .update)
        XCTAssertEqual(op.baseVersion, conflict.serverVersion)
        XCTAssertEqual(op.base["title"], .string("theirs"))
        XCTAssertNil(op.policyOverride)
        XCTAssertEqual(try store.todo(todo.localID)?.title, "mine")
        XCTAssertEqual(try store.conflicts().count, 0)
        _ = try await client.sync()
        XCTAssertEqual(try logged(kept.opID)?.status, .applied)

        // The server deleted the record: keeping mine restores it with client-wins.
        let (gone, deleted) = try await conflicted("B", serverFields: ["deletedAt": .string("2026-11-24T11:00:00.000Z")]) {
            try self.store.updateTodo($0, TodoChanges(title: "B2"))
        }
        XCTAssertNil(try store.todo(gone.localID), "the server's tombstone shows")
        let restored = try store.resolveConflict(deleted.conflictID, .edited(["title": .string("B3")]))
        XCTAssertEqual(try queued().first { $0.opID == restored.opID }?.policyOverride, .clientWins)
        XCTAssertEqual(try store.todo(gone.localID)?.title, "B3")
    }

    func testC2_KeepMineOfADeleteIsANewDeleteBasedOnTheServerCopy() async throws {
        let (todo, conflict) = try await conflicted(serverFields: ["title": .string("theirs")]) {
            try self.store.deleteTodo($0)
        }
        XCTAssertEqual(conflict.action, .delete)
        XCTAssertEqual(try store.todo(todo.localID)?.title, "theirs", "the delete did not happen")
        let kept = try store.resolveConflict(conflict.conflictID, .keepMine)
        let op = try XCTUnwrap(queued().first { $0.opID == kept.opID })
        XCTAssertEqual(op.action, .delete)
        XCTAssertEqual(op.baseVersion, conflict.serverVersion)
        XCTAssertNil(try store.todo(todo.localID))
    }

    func testC3_TakeTheirsQueuesNothing() async throws {
        let (todo, conflict) = try await conflicted(serverFields: ["title": .string("theirs")]) {
            try self.store.updateTodo($0, TodoChanges(title: "mine"))
        }
        let taken = try store.resolveConflict(conflict.conflictID, .takeTheirs)
        XCTAssertNil(taken.opID)
        XCTAssertEqual(try queued().count, 0)
        XCTAssertEqual(try store.conflicts().count, 0)
        XCTAssertEqual(try store.todo(todo.localID)?.title, "theirs")
        XCTAssertThrowsError(try store.resolveConflict(conflict.conflictID, .takeTheirs))
    }

    // MARK: The table and the tests agree

    func testEveryRowOfTheTableHasATest() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let table = try String(contentsOf: root.appendingPathComponent("Sources/TodoSyncClient/Outbox/Outbox.swift"), encoding: .utf8)
        let tests = try String(contentsOf: here, encoding: .utf8)
        let rows = Set(table.split(separator: "\n").compactMap { line -> String? in
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard line.hasPrefix("/// |"), cells.count > 2, let id = cells.dropFirst().first,
                  id.range(of: #"^[A-Z][0-9]+$"#, options: .regularExpression) != nil else { return nil }
            return id
        })
        var walked = Set<String>()
        for line in tests.split(separator: "\n") where line.contains("func test") {
            guard let name = line.split(separator: " ").first(where: { $0.hasPrefix("test") }) else { continue }
            for part in name.dropFirst(4).split(separator: "_")
            where part.range(of: #"^[A-Z][0-9]+$"#, options: .regularExpression) != nil {
                walked.insert(String(part))
            }
        }
        XCTAssertEqual(rows.count, 23, "rows in Outbox.swift's table")
        XCTAssertEqual(rows.subtracting(walked).sorted(), [], "rows without a test")
        XCTAssertEqual(walked.subtracting(rows).sorted(), [], "tests naming no row")
    }
}
