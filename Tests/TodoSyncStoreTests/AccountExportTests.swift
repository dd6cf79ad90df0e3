import MariaDB
import TodoSyncCore
import XCTest

@testable import TodoSyncStore

/// An export holds a worker and a long read transaction, so a process runs only `exportSlots` at once,
/// one per account (issue 34).
final class AccountExportTests: StoreTestCase {
    func testAnExportBeyondTheAccountsShareIsTurnedAwayAtOnce() throws {
        // The account already holds the slot (its share is one export at a time): turned away at
        // once, not queued behind itself.
        let held = try store.configuration.exportSlots.withSlot(client: "\(userID)") { () throws -> DomainError? in
            do {
                _ = try store.exportAccount(userID: userID) { _ in true }
                return nil
            } catch let error as DomainError {
                return error
            }
        }
        guard case .throttled(_, let retryAfter)?? = held else {
            return XCTFail("an export while every slot is taken must be throttled, got \(String(describing: held))")
        }
        XCTAssertEqual(retryAfter, Store.exportRetryAfterSeconds)
        // With the slot free again, it runs.
        var bytes: [UInt8] = []
        XCTAssertTrue(try store.exportAccount(userID: userID) { bytes += $0; return true })
        let body = try JSONParser.parse(bytes)
        guard case .object(let members) = body else { return XCTFail("not an object: \(body)") }
        XCTAssertEqual(Set(members.keys), ["user", "tags", "todos", "dailyStats", "friends", "friendRequests"])
    }
}
