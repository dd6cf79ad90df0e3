import Foundation
import MariaDB
import XCTest

@testable import TodoSyncStore

/// A test of the store against the migrated test database (`StoreTestDatabase`), with a new user
/// of its own (`userID`) so tests do not see each other's records.
class StoreTestCase: XCTestCase {
    var db: Connection!
    var store: Store!
    var userID: Int64 = 0

    override func setUpWithError() throws {
        db = Connection(configuration: try StoreTestDatabase.configuration())
        _ = try Migrator(connection: db, directory: StoreTestDatabase.sqlDirectory).run()
        store = Store(connection: db)
        let email = "store-\(UUID().uuidString.lowercased())@example.com"
        userID = Int64(try db.execute(
            "INSERT INTO users (email, email_key, password_hash, created_at) VALUES (?, ?, 'x', NOW(3))",
            [.text(email), .text(email)]).lastInsertID)
    }

    override func tearDownWithError() throws {
        db?.close()
    }
}
