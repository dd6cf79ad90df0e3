import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// `TodoColumn` describes the `todos` table once for the SQL, the row decoding and the writes:
/// it must name every column of the migrated table (but the user, the client key and the device,
/// which are not part of a record), and a record must survive a create and an update through it.
final class TodoColumnsTests: XCTestCase {
    private var db: Connection!
    private var store: Store!
    private var userID: Int64 = 0

    override func setUpWithError() throws {
        db = Connection(configuration: try StoreTestDatabase.configuration())
        _ = try Migrator(connection: db, directory: StoreTestDatabase.sqlDirectory).run()
        store = Store(connection: db)
        let email = "columns-\(UUID().uuidString.lowercased())@example.com"
        userID = Int64(try db.execute(
            "INSERT INTO users (email, email_key, password_hash, created_at) VALUES (?, ?, 'x', NOW(3))",
            [.text(email), .text(email)]).lastInsertID)
    }

    override func tearDownWithError() throws {
        db?.close()
    }

    func testEveryColumnOfTheTableIsDescribed() throws {
        let columns = try db.query("""
            SELECT column_name FROM information_schema.columns
             WHERE table_schema = DATABASE() AND table_name = 'todos' ORDER BY ordinal_position
            """).map { $0.string(0)! }
        let notInARecord: Set<String> = ["user_id", "client_key", "changed_by_device"]
        XCTAssertEqual(Set(columns).subtracting(notInARecord), Set(TodoColumn.allCases.map(\.name)))
    }

    func testARecordRoundTripsThroughTheColumns() throws {
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
}
