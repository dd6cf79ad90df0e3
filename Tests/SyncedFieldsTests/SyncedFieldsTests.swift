import Foundation
import GRDB
import XCTest

@testable import TodoSyncClient
@testable import TodoSyncCore
@testable import TodoSyncSnapshot
@testable import TodoSyncStore

/// Every representation of a synced field, server and client, held to the one list (`TodoField`,
/// `TagField`; issue 35, item 1). A field added to the list and forgotten anywhere below fails
/// here with the representation and the field named. What derives from the list is checked to be
/// wired to it; what restates it (the client's record, schema, decoder and public types, the
/// terminal client) is checked against it. The migrated MariaDB tables are `ColumnsTests`'s
/// (they need a database); nothing here does.
final class SyncedFieldsTests: XCTestCase {

    // MARK: Samples: a value of each field, unlike its default, from its kind and limits

    /// The server id of the tag every sample todo names.
    static let sampleTagID: Int64 = 77

    static func sample(_ field: some SyncedField) -> JSONValue {
        switch field.kind {
        case .text:
            if field.key == TagField.color.key { return .string("#0A0B0C") }
            let text = "x-\(field.key)"
            return .string(String(text.prefix(field.length?.upperBound ?? text.count)))
        case .bool: return .bool(true)
        case .integer: return .int(field.range?.upperBound ?? 7)
        case .day: return .string("2030-01-02")
        case .instant: return .string("2030-01-02T03:04:05.678Z")
        case .reference: return .int(sampleTagID)
        }
    }

    /// The sample as the server's record holds it (`TodoField.value(of:)`).
    static func sampleValue(_ field: some SyncedField) -> FieldValue { FieldValue(json: sample(field), field: field.key) }

    /// A todo with every field at its sample, through the server's own create parsing.
    static func sampleTodo() throws -> Todo {
        var object: [String: JSONValue] = [:]
        for field in TodoField.allCases { object[field.key] = sample(field) }
        var reader = FieldReader(object: object)
        var todo = try TodoDraft.parse(&reader).content
        todo.id = 5
        todo.clientID = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
        todo.version = 9
        todo.createdAt = "2030-01-01T00:00:00.000Z"
        todo.updatedAt = todo.createdAt
        return todo
    }

    /// The Swift property a field is in the server's types and by default on the client:
    /// the key with a trailing `Id` as `ID`.
    static func swiftName(_ key: String) -> String { key.hasSuffix("Id") ? String(key.dropLast(2)) + "ID" : key }

    static func labels(of value: Any) -> Set<String> { Set(Mirror(reflecting: value).children.compactMap(\.label)) }

    /// A stored property's value as a `FieldValue` (text, integers, booleans, dates; nil as null).
    static func fieldValue(_ value: Any) -> FieldValue? {
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .optional {
            guard let wrapped = mirror.children.first?.value else { return .null }
            return fieldValue(wrapped)
        }
        switch value {
        case let text as String: return .string(text)
        case let flag as Bool: return .bool(flag)
        case let number as Int: return .int(Int64(number))
        case let number as Int64: return .int(number)
        case let day as Day: return .string(day.description)
        default: return nil
        }
    }

    static func property(_ label: String, of value: Any) -> Any? {
        Mirror(reflecting: value).children.first { $0.label == label }?.value
    }

    // MARK: Server

    /// Every field has a content column named and typed by the list, in the list's order, and
    /// the value bound is the field's; the SELECT list reads it.
    func testTheServersColumnsAreTheList() throws {
        let todo = try Self.sampleTodo()
        XCTAssertEqual(TodoColumn.content.map(\.column), TodoField.allCases.map(TodoColumn.init), "TodoColumn.content")
        for field in TodoField.allCases {
            XCTAssertEqual(TodoColumn(field).sqlName, field.column, "TodoColumn: \(field)")
            XCTAssertTrue(TodoColumn.selectList.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
                .contains(field.column), "the todos SELECT list: \(field)")
            let bound = TodoColumn.content.first { $0.column == TodoColumn(field) }?.value(todo)
            XCTAssertEqual(bound, field.databaseValue(Self.sampleValue(field)), "TodoColumn.content's binding: \(field)")
            XCTAssertTrue(field.columnType.uppercased() == field.columnType, "TodoField.columnType: \(field)")
        }
        XCTAssertEqual(TagColumn.content.map(\.column), TagField.allCases.map(TagColumn.init), "TagColumn.content")
        for field in TagField.allCases {
            XCTAssertEqual(TagColumn(field).sqlName, field.column, "TagColumn: \(field)")
        }
    }

    /// The server's record and patch types hold every field; a create and an update read each
    /// one from JSON, and the record writer writes it back.
    func testTheServersTypesHaveEveryField() throws {
        let todo = try Self.sampleTodo()
        var object: [String: JSONValue] = [:]
        for field in TodoField.allCases { object[field.key] = Self.sample(field) }
        var reader = FieldReader(object: object)
        let patch = try TodoPatch.parse(&reader)
        var writer = JSONWriter()
        todo.write(to: &writer)
        let written = try XCTUnwrap(JSONParser.parse(writer.bytes).objectValue)
        for field in TodoField.allCases {
            let name = Self.swiftName(field.key)
            XCTAssertTrue(Self.labels(of: todo).contains(name), "Todo has no property \(name) for \(field)")
            XCTAssertTrue(Self.labels(of: TodoPatch()).contains(name), "TodoPatch has no property \(name) for \(field)")
            XCTAssertEqual(field.value(of: todo), Self.sampleValue(field), "TodoDraft.parse (a create) misses \(field)")
            XCTAssertEqual(field.value(of: patch.applied(to: TodoDraft(title: "t", deadline: Day("2026-01-01")!).content)),
                           Self.sampleValue(field), "TodoPatch.parse/applied (an update) misses \(field)")
            XCTAssertEqual(written[field.key], Self.sample(field), "Todo.write misses \(field)")
            if field.length != nil || field.range != nil {
                XCTAssertTrue(field.kind == .text ? field.length != nil : field.range != nil, "\(field)'s limits fit its kind")
            }
        }
        for field in TagField.allCases {
            XCTAssertTrue(Self.labels(of: TagPatch()).contains(field.key), "TagPatch has no property for \(field)")
        }
    }

    /// A record pulled at schema version v carries exactly the fields of v (the pull projection),
    /// and an operation of a version-v client changes only those (the push filter).
    func testThePullProjectionAndPushFilterFollowTheList() throws {
        var writer = JSONWriter()
        try Self.sampleTodo().write(to: &writer)
        let rendered = writer.bytes
        let bookkeeping: Set<String> = ["id", "clientId", "version", "createdAt", "updatedAt", "deletedAt"]
        for version in SchemaVersion.first...SchemaVersion.current {
            var page = PullPage(cursor: SyncCursor(position: 0, skipTombstonesThrough: 0, userID: 1, epoch: 1), hasMore: false,
                                schemaVersion: version, limit: 10)
            rendered.withUnsafeBytes { page.append(.todo, deleted: false, $0) }
            let body = try XCTUnwrap(JSONParser.parse(page.jsonBody).objectValue)
            let todo = try XCTUnwrap(body["changes"]?.objectValue?["todos"]?.objectValue?["upserted"]?.arrayValue?.first?.objectValue)
            XCTAssertEqual(Set(todo.keys).subtracting(bookkeeping), Set(TodoField.fields(atSchema: version).map(\.key)),
                           "the pull projection at schema \(version)")

            var data: [String: JSONValue] = [:]
            for field in TodoField.allCases { data[field.key] = Self.sample(field) }
            let operation = PushOperation.Parsed(entity: .todo, action: .update, id: 1, clientID: nil, baseVersion: 1,
                                                 data: data, base: data)
            let limited = operation.limited(toSchema: version)
            XCTAssertEqual(Set(limited.data.keys), Set(TodoField.fields(atSchema: version).map(\.key)),
                           "the push filter at schema \(version)")
            XCTAssertEqual(Set(limited.base.keys), Set(TodoField.fields(atSchema: version).map(\.key)),
                           "the push filter's base at schema \(version)")
        }
    }

    /// A snapshot of version v has a column for each field of v, of the field's SQLite type, and
    /// none for a newer one.
    func testTheSnapshotTablesHaveEveryField() {
        for version in SchemaVersion.first...SchemaVersion.current {
            let tables = SnapshotTable.tables(schemaVersion: version)
            func check<Field: SyncedField>(_ table: String, _: Field.Type) {
                guard let columns = tables.first(where: { $0.name == table })?.columns else {
                    return XCTFail("no \(table) table in a schema-\(version) snapshot")
                }
                for field in Field.allCases {
                    let column = columns.first { $0.name == field.key }
                    if field.since <= version {
                        XCTAssertEqual(column?.type, field.kind.sqliteType,
                                       "the snapshot's \(table) table at schema \(version): \(field)")
                    } else {
                        XCTAssertNil(column, "the snapshot's \(table) table at schema \(version) has the newer \(field)")
                    }
                }
            }
            check("todos", TodoField.self)
            check("tags", TagField.self)
        }
    }

    // MARK: Client

    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("synced-fields-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: directory)
    }

    private func newStore() throws -> LocalStore {
        try LocalStore(path: directory.appendingPathComponent("store-\(UUID().uuidString).sqlite").path)
    }

    /// Every field belongs to a version the server speaks: a field newer than
    /// `SchemaVersion.current` would never be sent, stored by a client, or in a snapshot.
    func testEveryFieldsVersionIsServed() {
        for field in TodoField.allCases {
            XCTAssertLessThanOrEqual(field.since, SchemaVersion.current, "SchemaVersion.current is below \(field)'s version")
            XCTAssertGreaterThanOrEqual(field.since, SchemaVersion.first, "\(field)'s version")
        }
        for field in TagField.allCases { XCTAssertLessThanOrEqual(field.since, SchemaVersion.current, "\(field)") }
    }

    /// A store made before the list's migrations (the last hand-written one, v5) gains each
    /// field's column when it opens.
    func testAStoreFromBeforeTheListsMigrationsGainsEveryField() throws {
        let path = directory.appendingPathComponent("v5.sqlite").path
        let queue = try DatabaseQueue(path: path)
        try LocalSchema.migrator.migrate(queue, upTo: "v5: the todo's clientKey unique by a named index")
        try queue.close()
        let store = try LocalStore(path: path)
        let columns = try store.pool.read { db in
            try Row.fetchAll(db, sql: "PRAGMA table_info(todo)").map { ($0["name"] as String, $0["type"] as String) }
        }
        for field in TodoField.allCases {
            let column = TodoRecord.column(field).name
            XCTAssertEqual(columns.first { $0.0 == column }?.1, field.kind.sqliteType,
                           "a store from before the list's migrations (LocalSchema) has no column todo.\(column) for \(field)")
        }
    }

    /// A fresh store's tables (every migration run) have each field's local column, of its type.
    func testTheLocalSchemaHasEveryField() throws {
        let store = try newStore()
        let columns = try store.pool.read { db in
            (try Row.fetchAll(db, sql: "PRAGMA table_info(todo)").map { ($0["name"] as String, $0["type"] as String) },
             try Row.fetchAll(db, sql: "PRAGMA table_info(tag)").map { ($0["name"] as String, $0["type"] as String) })
        }
        for field in TodoField.allCases {
            let column = TodoRecord.column(field).name
            XCTAssertEqual(columns.0.first { $0.0 == column }?.1, field.kind.sqliteType,
                           "the local schema (LocalSchema) has no \(field.kind.sqliteType) column todo.\(column) for \(field)")
        }
        for field in TagField.allCases {
            let column = TagRecord.column(field).name
            XCTAssertEqual(columns.1.first { $0.0 == column }?.1, field.kind.sqliteType,
                           "the local schema (LocalSchema) has no \(field.kind.sqliteType) column tag.\(column) for \(field)")
        }
    }

    /// A pull page holding the sample todo and its tag, as the server renders them.
    static func samplePage() throws -> DecodedPage {
        var writer = JSONWriter()
        try Self.sampleTodo().write(to: &writer)
        var tagWriter = JSONWriter()
        Tag(id: Self.sampleTagID, clientID: nil, name: "t", color: "#010203", version: 1, createdAt: "2030-01-01T00:00:00.000Z",
            updatedAt: "2030-01-01T00:00:00.000Z", deletedAt: nil).write(to: &tagWriter)
        let pageJSON = #"{"changes":{"tags":{"upserted":["# + String(decoding: tagWriter.bytes, as: UTF8.self)
            + #"],"deleted":[]},"todos":{"upserted":["# + String(decoding: writer.bytes, as: UTF8.self)
            + #"],"deleted":[]}},"cursor":"c","hasMore":false}"#
        return try PageDecoder.decode(Array(pageJSON.utf8))
    }

    /// A todo as the server renders it goes through the page decoder, the client's record, its
    /// row and the app's `LocalTodo` with every field intact.
    func testTheClientCarriesEveryField() throws {
        let page = try Self.samplePage()
        let record = try XCTUnwrap(page.todos.first, "the page decoder found no todo")

        let store = try newStore()
        let localTagID = try store.pool.write { db in
            try ServerRecords.apply(db, .tag, localID: nil, try XCTUnwrap(page.tags.first))
        }
        let fromServer = TodoRecord.new(from: record, tagLocalID: localTagID)
        var columns: [String] = []
        fromServer.forEachColumn { column, _ in columns.append(column.name) }
        var blank = TodoRecord(state: SyncState(clientID: nil, createdAt: nil), title: "", raw: "", deadline: "")
        blank.setSyncedFields(fromServer.syncedFields)

        let localID = try store.pool.write { db in try ServerRecords.apply(db, .todo, localID: nil, record) }
        let local = try XCTUnwrap(try store.todo(localID))
        let localTodoName: [TodoField: String] = [.tagId: "tagServerID"]
        // A push result's record, decoded from a parsed object instead of the page decoder.
        var writer = JSONWriter()
        try Self.sampleTodo().write(to: &writer)
        let pushed = ServerRecord(try XCTUnwrap(JSONParser.parse(writer.bytes).objectValue))
        let fromPush = TodoRecord.new(from: pushed, tagLocalID: localTagID)

        for field in TodoField.allCases {
            let name = RecordFields.localName(field.key)
            XCTAssertTrue(record.carries(name), "the page decoder (PageDecoder, ServerRecord.carries) misses \(field)")
            XCTAssertTrue(TodoRecord.syncedFieldNames.contains(name), "TodoRecord.syncedFieldNames misses \(field)")
            XCTAssertTrue(columns.contains(TodoRecord.column(field).name), "TodoRecord.forEachColumn misses \(field)")
            let expected: JSONValue = field == .tagId ? .int(localTagID) : Self.sample(field)
            XCTAssertEqual(fromServer.syncedFields[name], expected,
                           "TodoRecord.takeServerFields/syncedFields (a pulled todo) misses \(field)")
            XCTAssertEqual(blank.syncedFields[name], expected, "TodoRecord.setSyncedFields misses \(field)")
            XCTAssertTrue(pushed.carries(name), "ServerRecord.init(_:) (a push result) misses \(field)")
            XCTAssertEqual(fromPush.syncedFields[name], expected, "ServerRecord.init(_:) (a push result) misses \(field)")
            let property = localTodoName[field] ?? Self.swiftName(field.key)
            XCTAssertEqual(Self.property(property, of: local).flatMap(Self.fieldValue), Self.sampleValue(field),
                           "LocalTodo.\(property) (the row read back) misses \(field)")
        }
        for field in TagField.allCases {
            XCTAssertTrue(TagRecord.syncedFieldNames.contains(field.key), "TagRecord.syncedFieldNames misses \(field)")
            XCTAssertTrue(page.tags.first?.carries(field.key) == true, "the page decoder misses the tag's \(field)")
            XCTAssertNotNil(Self.property(field.key, of: try XCTUnwrap(try store.tag(localTagID))), "LocalTag misses \(field)")
        }
    }

    /// The public types an app writes a todo with name every field (`tagId` is `tag` there, a
    /// local tag handle), and their validation passes each one on.
    func testTheClientsWriteTypesHaveEveryField() throws {
        let newTodo = NewTodo(title: "t", deadline: Day("2026-01-01")!)
        let changes = TodoChanges()
        let clientName: [TodoField: String] = [.tagId: "tag"]
        for field in TodoField.allCases {
            let name = clientName[field] ?? Self.swiftName(field.key)
            XCTAssertTrue(Self.labels(of: newTodo).contains(name), "NewTodo has no property \(name) for \(field)")
            XCTAssertTrue(Self.labels(of: changes).contains(name), "TodoChanges has no property \(name) for \(field)")
        }
        // Every field a create sends (all but those absent by default: nullable fields left nil).
        let fields = try Validate.newTodo(newTodo)
        for field in TodoField.allCases where !field.isNullable || field == .tagId {
            XCTAssertNotNil(fields[RecordFields.localName(field.key)], "Validate.newTodo does not send \(field)")
        }
    }

    /// The client's validation takes its limits from the list; what it sends and says is what it
    /// said when it restated them (the messages below are those literals').
    func testTheClientsValidationStatesTheListsLimits() throws {
        let day = Day("2026-01-01")!
        func problem(_ body: () throws -> Any) -> LocalStoreError? {
            do { _ = try body(); return nil } catch { return error as? LocalStoreError }
        }
        XCTAssertEqual(problem { try Validate.newTodo(NewTodo(title: " ", deadline: day)) },
                       .validation(field: "title", problem: "must be 1 to 200 characters, not all whitespace"))
        XCTAssertEqual(problem { try Validate.todoChanges(TodoChanges(title: String(repeating: "a", count: 201))) },
                       .validation(field: "title", problem: "must be 1 to 200 characters, not all whitespace"))
        XCTAssertEqual(problem { try Validate.todoChanges(TodoChanges(raw: String(repeating: "a", count: 2001))) },
                       .validation(field: "raw", problem: "must be at most 2000 characters"))
        XCTAssertEqual(problem { try Validate.todoChanges(TodoChanges(notes: .some(String(repeating: "a", count: 10_001)))) },
                       .validation(field: "notes", problem: "must be at most 10000 characters"))
        XCTAssertEqual(problem { try Validate.newTodo(NewTodo(title: "t", deadline: day, difficulty: 6)) },
                       .validation(field: "difficulty", problem: "must be an integer from 0 to 5"))
        XCTAssertEqual(problem { try Validate.todoChanges(TodoChanges(estimatedTime: -1)) },
                       .validation(field: "estimatedTime", problem: "must be an integer from 0 to 1440"))
        XCTAssertEqual(problem { try Validate.tagName(String(repeating: "a", count: 51)) },
                       .validation(field: "name", problem: "must be 1 to 50 characters, not all whitespace"))
        XCTAssertEqual(try Validate.newTodo(NewTodo(title: "t", deadline: day, tag: 3, difficulty: 5, estimatedTime: 1440)), [
            "title": .string("t"), "raw": .string("t"), "isImportant": .bool(false), "isLife": .bool(false), "tag": .int(3),
            "difficulty": .int(5), "estimatedTime": .int(1440), "deadline": .string("2026-01-01"), "isCompleted": .bool(false),
        ])
        XCTAssertEqual(try Validate.todoChanges(TodoChanges(notes: .some(nil), tag: .some(nil), isCompleted: true)),
                       ["notes": .null, "tag": .null, "isCompleted": .bool(true)])
    }

    // MARK: The terminal client

    /// How `todosync-client` takes a field in each command that writes one: an option (its
    /// `--name`), the quick-add syntax (a token `add --help` shows), or not at all, with why. A
    /// new field does not compile here until each command's way is decided.
    enum Way { case option(String), syntax(String), not(String) }

    static func way(_ field: TodoField, _ command: String) -> Way {
        switch (field, command) {
        case (.title, "add"): .syntax("quick-add")
        case (.title, _): .option("--title")
        case (.raw, "add"): .syntax("quick-add")
        case (.raw, "edit"): .not("raw is the quick-add text the todo was made from; edit changes the title")
        case (.raw, _): .option("--raw")
        case (.notes, _): .option("--notes")
        case (.remindAt, _): .option("--remind-at")
        case (.isImportant, "add"): .syntax("!important")
        case (.isImportant, _): .option("--important")
        case (.isLife, "add"): .syntax("@life")
        case (.isLife, _): .option("--life")
        case (.tagId, "add"): .syntax("#tag")
        case (.tagId, _): .option("--tag")
        case (.difficulty, "add"): .syntax("*1..*5")
        case (.difficulty, _): .option("--difficulty")
        case (.estimatedTime, "add"): .syntax("30m/2h")
        case (.estimatedTime, _): .option("--minutes")
        case (.deadline, _): .option("--date")
        case (.isCompleted, "resolve"): .option("--completed")
        case (.isCompleted, _): .not("a todo is added open; `done` and `done --undo` change it")
        }
    }

    static func way(_ field: TagField, _ command: String) -> Way {
        switch (field, command) {
        case (.name, "tag-add"): .syntax("<name>")
        case (.name, _): .option("--name")
        case (.color, "tag-add"): .syntax("<color>")
        case (.color, _): .option("--color")
        }
    }

    static var clientBinary: String? {
        let bundleDirectory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return [bundleDirectory, bundleDirectory.deletingLastPathComponent()]
            .map { $0.appendingPathComponent("todosync-client").path }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    static func help(_ command: String) throws -> String { try client([command, "--help"]) }

    /// What `todosync-client arguments` writes (stdout and stderr).
    static func client(_ arguments: [String]) throws -> String {
        guard let binary = clientBinary else {
            throw XCTSkip("todosync-client is not built beside the tests (swift build --build-tests builds it)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.environment = ["COLUMNS": "1000"]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self)
    }

    func testTheTerminalClientTakesEveryField() throws {
        func check(_ command: String, _ ways: [(field: String, way: Way)]) throws {
            let help = try Self.help(command)
            let options = Set(help.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "-") })
                .filter { $0.hasPrefix("--") }.map(String.init))
            for (field, way) in ways {
                switch way {
                case .option(let name):
                    XCTAssertTrue(options.contains(name), "todosync-client \(command) has no \(name) for \(field)")
                case .syntax(let token):
                    XCTAssertTrue(help.contains(token), "todosync-client \(command)'s help does not show \(token) for \(field)")
                case .not(let why):
                    XCTAssertFalse(why.isEmpty)
                }
            }
        }
        for command in ["add", "edit", "resolve"] {
            try check(command, TodoField.allCases.map { ($0.key, Self.way($0, command)) })
        }
        for command in ["tag-add", "tag-edit", "resolve"] {
            try check(command, TagField.allCases.map { ($0.key, Self.way($0, command)) })
        }
    }

    /// Each field `edit` takes as an option reaches the stored todo: `edit 1 --option SAMPLE`
    /// on a todo at its defaults, then `list --json` shows the sample.
    func testTheTerminalClientsEditSetsEveryField() throws {
        let path = directory.appendingPathComponent("edit.sqlite").path
        try {
            let store = try LocalStore(path: path)
            try store.addTag(name: "t", color: "#010203")
            try store.addTodo(NewTodo(title: "plain", deadline: Day("2026-01-01")!))
        }()
        for field in TodoField.allCases {
            guard case .option(let option) = Self.way(field, "edit") else { continue }
            let text: String
            switch Self.sample(field) {
            case .string(let value): text = value
            case .bool(let flag): text = String(flag)
            case .number(let number): text = number.literal
            default: text = ""
            }
            let value = field == .tagId ? "t" : text
            let output = try Self.client(["edit", "1", option, value, "--json", "--db", path])
            let todo = try XCTUnwrap(JSONParser.parse(Array(output.utf8)).objectValue?["todo"]?.objectValue,
                                     "edit \(option) printed no todo: \(output)")
            if field == .tagId {
                XCTAssertEqual(todo["tag"], .string("t"), "todosync-client edit \(option) does not set \(field)")
            } else {
                XCTAssertEqual(todo[field.key], Self.sample(field), "todosync-client edit \(option) does not set \(field)")
            }
        }
    }

    /// `todosync-client list --json` shows every field of a todo (its tag as `tagLocalId`, and
    /// `tag`, the tag's name).
    func testTheTerminalClientShowsEveryField() throws {
        let page = try Self.samplePage()
        let path = directory.appendingPathComponent("cli.sqlite").path
        let localTagID = try {
            let store = try LocalStore(path: path)
            return try store.pool.write { db in
                let tag = try ServerRecords.apply(db, .tag, localID: nil, try XCTUnwrap(page.tags.first))
                try ServerRecords.apply(db, .todo, localID: nil, try XCTUnwrap(page.todos.first))
                return tag
            }
        }()
        let output = try Self.client(["list", "--all", "--json", "--db", path])
        let listed = try JSONParser.parse(Array(output.utf8)).objectValue?["todos"]?.arrayValue?.first?.objectValue
        let todo = try XCTUnwrap(listed, "list --json printed no todo: \(output)")
        for field in TodoField.allCases {
            let (key, expected): (String, JSONValue) = field == .tagId ? ("tagLocalId", .int(localTagID)) : (field.key, Self.sample(field))
            XCTAssertEqual(todo[key], expected, "todosync-client list --json (Render.todo) misses \(field) as \(key)")
        }
    }
}
