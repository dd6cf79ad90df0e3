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

/// A small deterministic generator (SplitMix64), so a failing history can be replayed.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE5_E4B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound`.
    mutating func next(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }
}
