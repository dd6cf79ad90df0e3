import Foundation
import GRDB
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// Schema versions on the device (API.md "Schema versions", issue 21): the client names its
/// version on every sync request, a version-1 client's store never sees or sends `notes`, a 426
/// stops syncing and leaves the queue as it was, and a store from before notes keeps working.
/// In process, against `FakeServer`; the same through the real stack: `SchemaVersionStackTests`.
final class SchemaVersionTests: XCTestCase {
    var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    func store(_ name: String = "device") throws -> LocalStore {
        let store = try LocalStore(path: directory.appendingPathComponent("\(name).sqlite").path)
        try store.signIn(userID: 1, email: "a@example.com", token: "t")
        return store
    }

    func client(_ store: LocalStore, _ server: FakeServer, schemaVersion: Int) -> TodoSyncClient {
        TodoSyncClient(store: store, baseURL: URL(string: "http://fake")!, transport: server,
                       retry: RetryPolicy(maxAttempts: 1), clock: TestClock(), schemaVersion: schemaVersion)
    }

    /// Every outbox row and every record row, as text: "untouched" means equal.
    func snapshot(_ store: LocalStore) async throws -> [String] {
        try await store.pool.read { db in
            try ["outbox", "todo", "tag", "operationLog", "conflict"].flatMap { table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map { "\(table) \($0)" }
            }
        }
    }

    func testEverySyncRequestNamesTheClientsVersionAndAVersionOneClientSendsNoNotes() async throws {
        let old = try store("old")
        try old.addTodo(NewTodo(title: "by an old app", deadline: Day("2026-11-26")!))
        let server = FakeServer()
        try await client(old, server, schemaVersion: 1).sync()
        XCTAssertTrue(server.pushBodies[0].contains(#""schemaVersion":1"#), server.pushBodies[0])
        XCTAssertFalse(server.pushBodies[0].contains("notes"), server.pushBodies[0])
        XCTAssertTrue(server.pullQueries.allSatisfy { $0.contains("schemaVersion=1") }, "\(server.pullQueries)")

        let new = try store("new")
        let added = try new.addTodo(NewTodo(title: "with notes", notes: "first line\nsecond line", deadline: Day("2026-11-26")!))
        try await client(new, server, schemaVersion: 2).sync()
        XCTAssertTrue(server.pushBodies[1].contains(#""schemaVersion":2"#), server.pushBodies[1])
        XCTAssertTrue(server.pushBodies[1].contains(#""notes":"first line\nsecond line""#), server.pushBodies[1])
        XCTAssertTrue(server.pullQueries.last!.contains("schemaVersion=2"), "\(server.pullQueries)")
        XCTAssertEqual(try new.todo(added.localID)?.notes, "first line\nsecond line")

        // An edit of notes made on a version-1 client (an app that cannot make one) is not sent.
        let edit = try old.updateTodo(try XCTUnwrap(old.allTodos().first).localID, TodoChanges(title: "renamed", notes: "x"))
        try await client(old, server, schemaVersion: 1).sync()
        XCTAssertTrue(server.pushBodies[2].contains("renamed") && !server.pushBodies[2].contains("notes"), server.pushBodies[2])
        XCTAssertEqual(try old.status(ofOperation: try XCTUnwrap(edit.opID)), .applied)
    }

    func testA426StopsSyncingAndLeavesTheQueueAsItWas() async throws {
        let store = try store()
        let server = FakeServer()
        let synced = try store.addTodo(NewTodo(title: "synced", deadline: Day("2026-11-26")!))
        try await client(store, server, schemaVersion: 1).sync()
        // Queued offline: a create, an edit of a synced todo, a tag.
        try store.addTodo(NewTodo(title: "offline", deadline: Day("2026-11-26")!))
        try store.updateTodo(synced.localID, TodoChanges(title: "edited offline"))
        try store.addTag(name: "work", color: "#336699")
        let before = try await snapshot(store)
        let pending = try store.pendingCount()

        server.requireSchemaVersion(2)
        let old = client(store, server, schemaVersion: 1)
        do {
            try await old.sync()
            XCTFail("a version-1 client below the minimum synced")
        } catch SyncError.upgradeRequired(let required) {
            XCTAssertEqual(required, UpgradeRequired(minimum: 2, current: 2))
        }
        let after = try await snapshot(store)
        XCTAssertEqual(after, before, "every record and queued change is as it was (no operation left `sending`)")
        XCTAssertEqual(try store.pendingCount(), pending)
        let status = try store.status()
        XCTAssertEqual(status.upgradeRequired, UpgradeRequired(minimum: 2, current: 2))
        XCTAssertTrue(status.lastSyncError?.contains("upgrade required") ?? false, "\(status)")

        // Stopped: the next sync of the old client does not go to the server at all.
        let requests = server.requests.count
        do {
            try await old.sync()
            XCTFail("the stopped client synced")
        } catch SyncError.upgradeRequired {}
        XCTAssertEqual(server.requests.count, requests)
        let afterSecond = try await snapshot(store)
        XCTAssertEqual(afterSecond, before)

        // The upgraded app syncs the same store: everything queued goes out, the status clears.
        let report = try await client(store, server, schemaVersion: 2).sync()
        XCTAssertEqual(report.operationsSent, pending)
        XCTAssertNil(try store.status().upgradeRequired)
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    func testARecordWithoutNotesKeepsTheLocalNotesAndANullClearsThem() async throws {
        let store = try store()
        let added = try store.addTodo(NewTodo(title: "t", notes: "mine", deadline: Day("2026-11-26")!))
        try await client(store, FakeServer(), schemaVersion: 2).sync()
        let serverID = try XCTUnwrap(store.todo(added.localID)?.serverID)
        var record: JSONObject = [
            "id": .int(serverID), "clientId": .null, "title": .string("renamed"), "raw": .string("renamed"),
            "isImportant": .bool(false), "isLife": .bool(false), "tagId": .null, "difficulty": .int(0), "estimatedTime": .int(0),
            "deadline": .string("2026-11-26"), "isCompleted": .bool(false), "version": .int(50),
            "createdAt": .string("2026-11-24T10:00:00.000Z"), "updatedAt": .string("2026-11-24T10:00:09.000Z"), "deletedAt": .null,
        ]
        // A version-1 record (a pull page at version 1, or a push result stored before the upgrade).
        let versionOne = ServerRecord(record)
        try await store.pool.write { db in _ = try ServerRecords.apply(db, .todo, localID: nil, versionOne) }
        XCTAssertEqual(try store.todo(added.localID)?.title, "renamed")
        XCTAssertEqual(try store.todo(added.localID)?.notes, "mine", "absent means not known at that version")
        // The same through the pull page decoder.
        let page = try PageDecoder.decode(Array(#"{"changes":{"todos":{"upserted":[{"id":\#(serverID),"title":"again","version":51}],"deleted":[]}},"cursor":"c","hasMore":false}"#.utf8))
        try await store.pool.write { db in try ServerRecords.applyPage(db, .todo, page.todos, pending: [:], generation: 0) }
        XCTAssertEqual(try store.todo(added.localID)?.notes, "mine")
        record["notes"] = .null
        record["version"] = .int(52)
        let cleared = ServerRecord(record)
        try await store.pool.write { db in _ = try ServerRecords.apply(db, .todo, localID: nil, cleared) }
        XCTAssertNil(try store.todo(added.localID)?.notes, "null is a value: no notes")
    }

    func testAStoreFromBeforeNotesMigratesAndKeepsItsRecordsAndQueue() async throws {
        let path = directory.appendingPathComponent("old.sqlite").path
        // The schema as the last release left it (migrations up to v3), with a todo and its create queued.
        let queue = try DatabaseQueue(path: path)
        try LocalSchema.migrator.migrate(queue, upTo: "v3: tags a todo names before the device has them")
        try await queue.write { db in
            try db.execute(sql: """
                INSERT INTO todo (localId, clientId, clientKey, title, titleKey, raw, isImportant, isLife, difficulty, estimatedTime,
                                  deadline, isCompleted, createdAt)
                VALUES (1, 'c-1', 'c-1', 'old todo', x'', 'old todo', 0, 0, 0, 0, '2026-11-26', 0, '2026-11-24T10:00:00.000Z');
                INSERT INTO outbox (opId, entity, action, recordLocalId, data, base, state, createdAt)
                VALUES ('op-1', 'todo', 'create', 1, '{"title":"old todo","raw":"old todo","deadline":"2026-11-26"}', '{}', 'pending',
                        '2026-11-24T10:00:00.000Z');
                """)
        }
        try queue.close()

        let store = try LocalStore(path: path)
        try store.signIn(userID: 1, email: "a@example.com", token: "t")
        XCTAssertEqual(try store.allTodos().map(\.title), ["old todo"])
        XCTAssertNil(try store.todo(1)?.notes)
        XCTAssertEqual(try store.pendingCount(), 1)
        try store.updateTodo(1, TodoChanges(notes: "added after the upgrade"))
        let server = FakeServer()
        try await client(store, server, schemaVersion: 2).sync()
        XCTAssertTrue(server.pushBodies[0].contains(#""notes":"added after the upgrade""#), server.pushBodies[0])
        XCTAssertEqual(try store.todo(1)?.notes, "added after the upgrade")
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    func testAStoreFromBeforeV5KeepsItsTodosTheirLocalIdsAndTheirUniqueClientKeys() throws {
        let path = directory.appendingPathComponent("v4.sqlite").path
        // The schema as v4 left it (clientKey UNIQUE as a column constraint): todos 1 and 5 live,
        // todo 9 gone (its localId must never come back: the outbox and logs name records by it).
        let queue = try DatabaseQueue(path: path)
        try LocalSchema.migrator.migrate(queue, upTo: "v4: the todo's notes (schema version 2)")
        try queue.write { db in
            for (localID, title) in [(1, "first"), (5, "fifth"), (9, "deleted")] {
                try db.execute(sql: """
                    INSERT INTO todo (localId, clientId, clientKey, title, titleKey, raw, notes, isImportant, isLife, difficulty,
                                      estimatedTime, deadline, isCompleted, createdAt)
                    VALUES (?, ?, ?, ?, x'', ?, 'n', 0, 0, 0, 0, '2026-11-26', 0, '2026-11-24T10:00:00.000Z')
                    """, arguments: [localID, "C-\(localID)", "c-\(localID)", title, title])
            }
            try db.execute(sql: "DELETE FROM todo WHERE localId = 9")
        }
        try queue.close()

        let store = try LocalStore(path: path)
        XCTAssertEqual(try store.allTodos().map(\.localID).sorted(), [1, 5])
        XCTAssertEqual(try store.todo(5)?.title, "fifth")
        XCTAssertEqual(try store.todo(5)?.notes, "n")
        XCTAssertEqual(try store.addTodo(NewTodo(title: "new", deadline: Day("2026-11-26")!)).localID, 10)
        try store.pool.read { db in
            let indexes = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'todo' AND sql IS NOT NULL ORDER BY name")
            XCTAssertEqual(indexes, ["todo_by_client_key", "todo_by_day", "todo_by_tag", "todo_pending_tag"])
            XCTAssertEqual(try String.fetchOne(db, sql: "PRAGMA integrity_check"), "ok")
        }
        XCTAssertThrowsError(try store.pool.write { db in
            try db.execute(sql: """
                INSERT INTO todo (clientId, clientKey, title, titleKey, raw, isImportant, isLife, difficulty, estimatedTime, deadline,
                                  isCompleted, createdAt)
                VALUES ('C-1', 'c-1', 'same clientId', x'', 'x', 0, 0, 0, 0, '2026-11-26', 0, '2026-11-24T10:00:00.000Z')
                """)
        }, "clientKey is still unique")
    }

    /// A store the last release left (every migration up to v5, synced at version 2) gains the
    /// remindAt column from the list's migration, keeps its todo, queue and notes, and its first
    /// version-3 sync pulls everything anew, which brings the reminder the server has.
    func testAStoreFromBeforeRemindAtMigratesKeepsItsRecordsAndGetsTheReminderOnItsFirstVersionThreeSync() async throws {
        let path = directory.appendingPathComponent("v5.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try LocalSchema.migrator.migrate(queue, upTo: "v5: the todo's clientKey unique by a named index")
        try await queue.write { db in
            try db.execute(sql: """
                INSERT INTO todo (localId, id, clientId, clientKey, title, titleKey, raw, notes, isImportant, isLife, difficulty,
                                  estimatedTime, deadline, isCompleted, version, createdAt)
                VALUES (1, 40, 'c-1', 'c-1', 'synced', x'', 'synced', 'n', 0, 0, 0, 0, '2026-11-26', 0, 3, '2026-11-24T10:00:00.000Z');
                INSERT INTO todo (localId, clientId, clientKey, title, titleKey, raw, isImportant, isLife, difficulty, estimatedTime,
                                  deadline, isCompleted, createdAt)
                VALUES (2, 'c-2', 'c-2', 'queued', x'', 'queued', 0, 0, 0, 0, '2026-11-26', 0, '2026-11-24T10:00:00.000Z');
                INSERT INTO outbox (opId, entity, action, recordLocalId, data, base, state, createdAt)
                VALUES ('op-1', 'todo', 'create', 2, '{"title":"queued","raw":"queued","deadline":"2026-11-26"}', '{}', 'pending',
                        '2026-11-24T10:00:00.000Z');
                INSERT INTO meta (key, value) VALUES ('schemaVersion', '2'), ('cursor', 'old-cursor');
                """)
        }
        try queue.close()

        let store = try LocalStore(path: path)
        try store.signIn(userID: 1, email: "a@example.com", token: "t")
        let columns = try await store.pool.read { db in try Row.fetchAll(db, sql: "PRAGMA table_info(todo)").map { $0["name"] as String } }
        XCTAssertTrue(columns.contains("remindAt"), "\(columns)")
        XCTAssertEqual(Set(try store.allTodos().map(\.title)), ["synced", "queued"])
        XCTAssertEqual(try store.todo(1)?.notes, "n")
        XCTAssertNil(try store.todo(1)?.remindAt)
        XCTAssertEqual(try store.pendingCount(), 1)

        let server = FakeServer()
        server.seedTodo(id: 40, clientID: "c-1", title: "synced", fields: ["notes": .string("n"), "remindAt": .string("2026-11-26T08:00:00.000Z")])
        try await client(store, server, schemaVersion: 3).sync()
        XCTAssertFalse(server.pullQueries[0].contains("cursor="), "the first version-3 pull starts from nothing: \(server.pullQueries)")
        XCTAssertTrue(server.pullQueries[0].contains("schemaVersion=3"), "\(server.pullQueries)")
        XCTAssertEqual(try store.todo(1)?.remindAt, "2026-11-26T08:00:00.000Z")
        XCTAssertEqual(try store.todo(1)?.notes, "n")
        XCTAssertEqual(try store.pendingCount(), 0)
    }

    /// remindAt as notes before it: a record without it (older version) keeps the local value, a
    /// null clears it, and a version-2 client never sends it; a version-3 client sends it in UTC.
    func testARecordWithoutRemindAtKeepsTheLocalOneAndAVersionTwoClientNeverSendsIt() async throws {
        let store = try store()
        let server = FakeServer()
        let added = try store.addTodo(NewTodo(title: "t", remindAt: "2026-11-26T09:30:00.1239+01:00", deadline: Day("2026-11-26")!))
        XCTAssertEqual(try store.todo(added.localID)?.remindAt, "2026-11-26T08:30:00.123Z", "kept as the server keeps it")
        try await client(store, server, schemaVersion: 3).sync()
        XCTAssertTrue(server.pushBodies[0].contains(#""remindAt":"2026-11-26T08:30:00.123Z""#), server.pushBodies[0])
        let serverID = try XCTUnwrap(store.todo(added.localID)?.serverID)

        try store.updateTodo(added.localID, TodoChanges(title: "renamed", remindAt: .some("2026-12-01T00:00:00Z")))
        try await client(store, server, schemaVersion: 2).sync()
        XCTAssertTrue(server.pushBodies[1].contains("renamed") && !server.pushBodies[1].contains("remindAt"), server.pushBodies[1])

        // (The fake server answers with every field it holds, whatever the version.)
        let local = try XCTUnwrap(store.todo(added.localID)?.remindAt)
        let page = try PageDecoder.decode(Array(#"{"changes":{"todos":{"upserted":[{"id":\#(serverID),"title":"again","notes":null,"version":90}],"deleted":[]}},"cursor":"c","hasMore":false}"#.utf8))
        try await store.pool.write { db in try ServerRecords.applyPage(db, .todo, page.todos, pending: [:], generation: 0) }
        XCTAssertEqual(try store.todo(added.localID)?.title, "again")
        XCTAssertEqual(try store.todo(added.localID)?.remindAt, local, "absent means not known at that version")
        let cleared = try PageDecoder.decode(Array(#"{"changes":{"todos":{"upserted":[{"id":\#(serverID),"remindAt":null,"version":91}],"deleted":[]}},"cursor":"c","hasMore":false}"#.utf8))
        try await store.pool.write { db in try ServerRecords.applyPage(db, .todo, cleared.todos, pending: [:], generation: 0) }
        XCTAssertNil(try store.todo(added.localID)?.remindAt, "null is a value: no reminder")

        for bad in ["2026-11-26", "2026-11-26T10:00:60Z", "1999-12-31T23:00:00Z", "2026-11-26T10:00:00"] {
            XCTAssertThrowsError(try store.updateTodo(added.localID, TodoChanges(remindAt: .some(bad))), bad) { error in
                guard case LocalStoreError.validation(let field, _) = error else { return XCTFail("\(error)") }
                XCTAssertEqual(field, "remindAt")
            }
        }
    }

    func testAnUpgradedClientPullsEverythingOnceForTheFieldsItNeverGot() async throws {
        let store = try store()
        let server = FakeServer()
        try await client(store, server, schemaVersion: 1).sync()
        try await client(store, server, schemaVersion: 1).sync()
        XCTAssertTrue(server.pullQueries[1].contains("cursor="), "a version-1 client pulls from its cursor: \(server.pullQueries)")
        try await client(store, server, schemaVersion: 2).sync()
        XCTAssertFalse(server.pullQueries[2].contains("cursor="), "the upgrade's first pull starts from nothing: \(server.pullQueries)")
        try await client(store, server, schemaVersion: 2).sync()
        XCTAssertTrue(server.pullQueries[3].contains("cursor="), "once: \(server.pullQueries)")
    }
}

/// The same through the real stack (nginx → responders → MariaDB): clients of versions 1 and 2
/// on one account, an upgrade that replays a version-1 push, and a real 426.
final class SchemaVersionStackTests: StackTestCase {
    let day = Day("2026-11-26")!

    func notesOnServer(_ device: Device) async throws -> [String: JSONValue] {
        let todos = try await serverItems("/api/v1/todos?from=2026-11-01&to=2026-12-31", token: try device.token)
        return Dictionary(uniqueKeysWithValues: todos.map { ($0["clientId"]?.stringValue ?? "", $0["notes"] ?? .null) })
    }

    func notesInStore(_ device: Device) async throws -> Int {
        try await device.store.pool.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM todo WHERE notes IS NOT NULL")! }
    }

    /// Settles the inbox (policy `ask`): the user keeps their values.
    func keepMine(_ device: Device) throws {
        for conflict in try device.store.conflicts() { try device.store.resolveConflict(conflict.conflictID, .keepMine) }
    }

    func testVersionOneAndTwoClientsEditingTheSameTodosOfflineNeverLoseNotesUnderEveryPolicy() async throws {
        let new = try await device("new")
        let old = try await device("old", schemaVersion: 1)
        // A third device, of version 2, that only reads: it gets notes from pull pages alone.
        let reader = try await device("reader")
        for policy in ConflictStrategy.allCases {
            // Two todos with notes (one with newlines, one empty), one without; both devices have them.
            let a = try new.store.addTodo(NewTodo(title: "a \(policy)", notes: "line 1\nline 2\n", deadline: day))
            let b = try new.store.addTodo(NewTodo(title: "b \(policy)", notes: "", deadline: day))
            let c = try new.store.addTodo(NewTodo(title: "c \(policy)", deadline: day))
            try await new.client.sync(policy: policy)
            try await old.client.sync(policy: policy)
            let clientIDs = try [a, b, c].map { try XCTUnwrap(new.store.todo($0.localID)?.clientID) }
            func oldTodo(_ index: Int) throws -> LocalTodo {
                try XCTUnwrap(old.store.allTodos().first { $0.clientID == clientIDs[index] })
            }

            // Offline on both: the same fields of the same todos, and notes on the new one.
            try new.store.updateTodo(a.localID, TodoChanges(title: "a new \(policy)", notes: "new notes\n"))
            try new.store.updateTodo(b.localID, TodoChanges(isImportant: true))
            try new.store.updateTodo(c.localID, TodoChanges(notes: "c's notes"))
            try old.store.updateTodo(try oldTodo(0).localID, TodoChanges(title: "a old \(policy)", isLife: true))
            try old.store.updateTodo(try oldTodo(1).localID, TodoChanges(title: "b old \(policy)", isImportant: false))
            try old.store.deleteTodo(try oldTodo(2).localID)

            // The new one syncs first, then the old one under the policy (its writes race the
            // new one's), then both until nothing is left.
            try await new.client.sync(policy: policy)
            try await old.client.sync(policy: policy)
            try keepMine(old)
            for device in [new, old, new, old] {
                try keepMine(device)
                try await device.client.sync(policy: policy)
            }
            try await new.client.sync()
            try await old.client.sync()
            try await reader.client.sync()

            let server = try await notesOnServer(new)
            XCTAssertEqual(server[clientIDs[0]], .string("new notes\n"), "\(policy): the new client's notes survive the old client's edit")
            XCTAssertEqual(server[clientIDs[1]], .string(""), "\(policy): an empty note is kept")
            if let notes = server[clientIDs[2]] {
                XCTAssertEqual(notes, .string("c's notes"), "\(policy): a todo the old client deleted and the policy kept")
            }
            for device in [new, reader] {
                let todos = try device.store.allTodos()
                for (clientID, notes) in server {
                    XCTAssertEqual(todos.first { $0.clientID == clientID }.map { JSONValue.optionalString($0.notes) }, notes,
                                   "\(policy): \(device.name)'s store holds the server's notes")
                }
            }
            let oldNotes = try await notesInStore(old)
            XCTAssertEqual(oldNotes, 0, "\(policy): the version-1 store never sees notes")
            for device in [new, old, reader] { try await assertEqualsServer(device) }
        }
    }

    func testAVersionOnePushReplayedAfterTheUpgradeReturnsItsFirstAnswerAndLosesNoNotes() async throws {
        let new = try await device("new")
        let added = try new.store.addTodo(NewTodo(title: "shared", notes: "keep me", deadline: day))
        try await new.client.sync()
        let lossy = RecordingTransport()
        let old = try await device("old", transport: lossy, schemaVersion: 1)
        try await old.client.sync()
        let local = try XCTUnwrap(old.store.allTodos().first)
        XCTAssertNil(local.notes)

        // The old app's edit reaches the server, but no answer reaches the app.
        let edit = try old.store.updateTodo(local.localID, TodoChanges(title: "renamed by the old app"))
        lossy.loseResponses(of: "/sync/push", count: 100)
        do {
            try await old.client.sync()
            XCTFail("synced without a push answer")
        } catch let error as SyncError where error.isOffline {}
        XCTAssertEqual(try old.store.status(ofOperation: try XCTUnwrap(edit.opID)), .sending)
        let firstAnswer = try XCTUnwrap(lossy.pushAnswers.first)

        // Upgraded: the same store, a version-2 client, its push resends the stored operation.
        lossy.loseResponses(of: "/sync/push", count: 0)
        let upgraded = TodoSyncClient(store: old.store, baseURL: baseURL, transport: lossy, schemaVersion: 2)
        try await upgraded.sync()
        let replayed = try XCTUnwrap(lossy.pushAnswers.last)
        XCTAssertEqual(replayed, firstAnswer, "the stored result, exactly as first answered")
        XCTAssertFalse(replayed.contains("notes"), "a version-1 answer: \(replayed)")
        XCTAssertEqual(try old.store.status(ofOperation: try XCTUnwrap(edit.opID)), .applied)
        let after = try XCTUnwrap(old.store.todo(local.localID))
        XCTAssertEqual(after.title, "renamed by the old app")
        XCTAssertEqual(after.notes, "keep me", "the upgrade brings the notes the old app never had, and the replay does not drop them")
        let server = try await notesOnServer(new)
        XCTAssertEqual(server[try XCTUnwrap(new.store.todo(added.localID)?.clientID)], .string("keep me"))
    }

    func testA426FromTheServerStopsSyncingAndKeepsTheQueueUntouched() async throws {
        // The stack serves versions 1 through the current one (minimum 1): a client of version 0 is below it.
        let device = try await device("device")
        try device.store.addTodo(NewTodo(title: "synced", notes: "n", deadline: day))
        try await device.client.sync()
        let synced = try XCTUnwrap(device.store.allTodos().first)
        try device.store.updateTodo(synced.localID, TodoChanges(title: "edited offline", notes: "edited notes"))
        try device.store.addTodo(NewTodo(title: "created offline", deadline: day))
        try device.store.addTag(name: "offline", color: "#112233")
        let queue = { () async throws -> [String] in
            try await device.store.pool.read { db in
                try ["outbox", "todo", "tag"].flatMap { table in
                    try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY rowid").map { "\(table) \($0)" }
                }
            }
        }
        let before = try await queue()

        let tooOld = TodoSyncClient(store: device.store, baseURL: baseURL, schemaVersion: 0)
        do {
            try await tooOld.sync()
            XCTFail("a client below the server's minimum synced")
        } catch SyncError.upgradeRequired(let required) {
            XCTAssertEqual(required, UpgradeRequired(minimum: 1, current: SchemaVersion.current))
        }
        let after = try await queue()
        XCTAssertEqual(after, before, "the queue and every record are untouched")
        XCTAssertEqual(try device.store.status().upgradeRequired, UpgradeRequired(minimum: 1, current: SchemaVersion.current))
        let serverTitles = try await serverItems("/api/v1/todos?from=2026-11-01&to=2026-12-31", token: try device.token)
            .map { $0["title"]?.stringValue ?? "" }
        XCTAssertEqual(serverTitles, ["synced"], "nothing was applied")

        // The terminal client says so, with its own exit code (5).
        let cli = try cli(["sync", "--quiet"], path: device.path, environment: ["TODOSYNC_CLIENT_SCHEMA_VERSION": "0"])
        XCTAssertEqual(cli.status, 5, cli.output)
        XCTAssertTrue(cli.output.contains("upgrade required"), cli.output)
        let status = try self.cli(["status"], path: device.path)
        XCTAssertTrue(status.output.contains("upgrade required"), status.output)
        let afterCLI = try await queue()
        XCTAssertEqual(afterCLI, before)

        // The current client syncs it all.
        try await device.client.sync()
        XCTAssertNil(try device.store.status().upgradeRequired)
        try await assertEqualsServer(device)
        let notes = try await notesOnServer(device)
        XCTAssertEqual(notes[synced.clientID ?? ""], .string("edited notes"))
    }
}

/// A transport that keeps the body of every push answer and can lose them (after the server
/// handled the request).
final class RecordingTransport: HTTPTransport, @unchecked Sendable {
    private let inner = URLSessionTransport()
    private let lock = NSLock()
    private var toLose = 0
    private var answers: [String] = []

    func loseResponses(of path: String, count: Int) {
        lock.lock()
        toLose = count
        lock.unlock()
    }

    /// The `results` of every push answer, as text, in order.
    var pushAnswers: [String] {
        lock.lock()
        defer { lock.unlock() }
        return answers
    }

    /// Keeps an answer; true when it is to be lost.
    private func note(_ answer: String) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        answers.append(answer)
        guard toLose > 0 else { return false }
        toLose -= 1
        return true
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await inner.send(request)
        guard request.url?.path.hasSuffix("/sync/push") == true else { return (data, response) }
        let results = (try? JSONParser.parse(Array(data)).objectValue?["results"]).flatMap { $0 }.map { JSONText.encode($0) }
        if note(results ?? "") { throw URLError(.networkConnectionLost) }
        return (data, response)
    }
}
