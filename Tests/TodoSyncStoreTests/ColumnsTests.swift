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
