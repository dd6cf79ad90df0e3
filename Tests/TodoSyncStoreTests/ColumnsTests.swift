import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// `TodoColumn` and `TagColumn` describe the `todos` and `tags` tables once for the SQL, the row
/// decoding and the writes; `DailyStatColumn`, `UserColumn` and `FeedColumn` likewise describe
/// `daily_stats`, `users` and `sync_feed`. Each must name every column of the migrated table (but
/// those it declares `notDescribed`: the owner, keys, the device), so a migration that adds a
/// column the code does not describe fails here; and a record must survive a create and an update
/// through it.
final class ColumnsTests: StoreTestCase {

    private func columns(of table: String) throws -> Set<String> {
        Set(try db.query("""
            SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?
            """, [.text(table)]).map { $0.string(0)! })
    }

    private func assertDescribed<Columns: TableColumns>(_ table: String, by _: Columns.Type,
                                                        file: StaticString = #filePath, line: UInt = #line) throws {
        let described = Columns.allCases.map(\.sqlName)
        XCTAssertEqual(Set(described).count, described.count, "\(table): a column described twice", file: file, line: line)
        XCTAssertEqual(try columns(of: table).subtracting(Columns.notDescribed), Set(described),
                       "\(table): the migrated table and \(Columns.self) differ", file: file, line: line)
    }

    func testEveryColumnOfTheTablesIsDescribed() throws {
        try assertDescribed("todos", by: TodoColumn.self)
        try assertDescribed("tags", by: TagColumn.self)
        try assertDescribed("daily_stats", by: DailyStatColumn.self)
        try assertDescribed("daily_stats", by: DailyAggregateColumn.self)
        try assertDescribed("users", by: UserColumn.self)
        try assertDescribed("sync_feed", by: FeedColumn.self)
    }

    /// The fields a client writes (`TodoField`, `TagField`: JSON, validation, merge) are exactly
    /// the columns a create and an update write (`content`): one list, seen from both sides.
    func testTheSyncedFieldsAreTheContentColumns() {
        func snake(_ name: String) -> String {
            name.reduce(into: "") { result, character in
                result += character.isUppercase ? "_" + character.lowercased() : String(character)
            }
        }
        XCTAssertEqual(TodoField.allCases.map { snake($0.rawValue) }, TodoColumn.content.map(\.column.sqlName))
        XCTAssertEqual(TagField.allCases.map { snake($0.rawValue) }, TagColumn.content.map(\.column.sqlName))
    }

    /// Each synced field's column in the migrated table has the type the field list declares
    /// (`TodoField.columnType`, `TagField.columnType`), and room for the field's limits.
    func testTheMigratedColumnsHaveTheListsTypes() throws {
        func check<Field: SyncedField>(_ table: String, _: Field.Type, file: StaticString = #filePath, line: UInt = #line) throws {
            let rows = try db.query("""
                SELECT column_name, column_type, character_maximum_length FROM information_schema.columns
                WHERE table_schema = DATABASE() AND table_name = ?
                """, [.text(table)])
            var types: [String: (type: String, length: Int64?)] = [:]
            for row in rows { types[row.string(0)!] = (row.string(1)!, row.int64(2)) }
            for field in Field.allCases {
                guard let column = types[field.column] else {
                    XCTFail("\(table) has no column \(field.column) for \(field)", file: file, line: line)
                    continue
                }
                XCTAssertEqual(Self.normalized(column.type), Self.normalized(field.columnType),
                               "\(table).\(field.column): the migrated type and \(Field.self).columnType differ", file: file, line: line)
                if let length = field.length, let capacity = column.length {
                    // VARCHAR(n) counts characters; TEXT counts bytes (4 per utf8mb4 character).
                    let characters = column.type.hasPrefix("varchar") || column.type.hasPrefix("char") ? capacity : capacity / 4
                    XCTAssertGreaterThanOrEqual(characters, Int64(length.upperBound),
                                                "\(table).\(field.column) cannot hold \(field)'s longest value", file: file, line: line)
                }
            }
        }
        try check("todos", TodoField.self)
        try check("tags", TagField.self)
    }

    /// A column type without integer display widths (MariaDB shows `bigint(20)` for `BIGINT`),
    /// but for `tinyint(1)`, the migrations' boolean.
    private static func normalized(_ type: String) -> String {
        let lowered = type.lowercased()
        guard !lowered.hasPrefix("tinyint(1)") else { return lowered }
        return lowered.replacingOccurrences(of: #"^(tinyint|smallint|mediumint|int|bigint)\(\d+\)"#, with: "$1",
                                            options: .regularExpression)
    }

    /// Every synced field survives a create and an update through the columns and `Todo(row:)`,
    /// at a value unlike its default (from its kind and limits): a field the row decoding or the
    /// write's bindings forgot comes back at its default.
    func testEveryFieldRoundTripsThroughTheColumns() throws {
        let tag = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "t", color: "#010203")).record
        func body(_ pick: (TodoField) -> JSONValue) -> [String: JSONValue] {
            var object: [String: JSONValue] = [:]
            for field in TodoField.allCases { object[field.key] = pick(field) }
            return object
        }
        func value(_ field: TodoField, _ variant: Int64) -> JSONValue {
            switch field.kind {
            case .text: .string(String("\(variant)-\(field.key)".prefix(field.length?.upperBound ?? 100)))
            case .bool: .bool(variant == 1)
            case .integer: .number(JSONNumber(literal: String((field.range?.upperBound ?? 9) - variant + 1)))
            case .day: .string("2030-01-0\(variant)")
            case .instant: .string("2030-01-0\(variant)T0\(variant):04:05.678Z")
            case .reference: variant == 1 ? .number(JSONNumber(literal: String(tag.id))) : .null
            }
        }
        var reader = FieldReader(object: body { value($0, 1) })
        let created = try store.createTodo(userID: userID, try TodoDraft.parse(&reader)).record
        let read = try XCTUnwrap(try store.todo(userID: userID, id: created.id))
        for field in TodoField.allCases {
            XCTAssertEqual(field.value(of: read), FieldValue(json: value(field, 1), field: field.key), "created: \(field)")
        }
        reader = FieldReader(object: body { value($0, 2) })
        _ = try store.updateTodo(userID: userID, id: created.id, try TodoPatch.parse(&reader), ifMatch: nil)
        let updated = try XCTUnwrap(try store.todo(userID: userID, id: created.id))
        for field in TodoField.allCases {
            XCTAssertEqual(field.value(of: updated), FieldValue(json: value(field, 2), field: field.key), "updated: \(field)")
        }
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
    }

    func testATodoRoundTripsThroughTheColumns() throws {
        let tag = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "t", color: "#010203")).record
        let draft = TodoDraft(clientID: "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d", title: "Write ✓", raw: "Write ✓ #t",
                              isImportant: true, isLife: true, tagID: tag.id, difficulty: 4, estimatedTime: 95,
                              deadline: Day("2026-06-07")!, isCompleted: true)
        let created = try store.createTodo(userID: userID, draft).record
        XCTAssertEqual(try store.todo(userID: userID, id: created.id), created, "read back as created")
        let updated = try store.updateTodo(userID: userID, id: created.id,
                                           TodoPatch(title: "Rewrite", isImportant: false, tagID: .some(nil), difficulty: 1,
                                                     estimatedTime: 5, deadline: Day("2026-06-08")!, isCompleted: false),
                                           ifMatch: nil)
        XCTAssertEqual(try store.todo(userID: userID, id: created.id), updated, "read back as updated")
        XCTAssertEqual([updated.title, updated.raw], ["Rewrite", "Write ✓ #t"])
        XCTAssertEqual(updated.tagID, nil)
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
    }

    func testATagRoundTripsThroughTheColumns() throws {
        let draft = TagDraft(clientID: "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d", name: "Home ✓", color: "#0A0B0C")
        let created = try store.createTag(userID: userID, draft).record
        XCTAssertEqual([created.name, created.color], ["Home ✓", "#0A0B0C"])
        XCTAssertEqual(try store.tag(userID: userID, id: created.id), created, "read back as created")
        let updated = try store.updateTag(userID: userID, id: created.id, TagPatch(name: "Away", color: "#FFEEDD"),
                                          ifMatch: nil)
        XCTAssertEqual(try store.tag(userID: userID, id: created.id), updated, "read back as updated")
        XCTAssertEqual([updated.name, updated.color, updated.clientID], ["Away", "#FFEEDD", draft.clientID])
        XCTAssertGreaterThan(updated.version, created.version)
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [])
    }
}
