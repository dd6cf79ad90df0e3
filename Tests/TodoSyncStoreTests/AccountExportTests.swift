import MariaDB
import TodoSyncCore
import XCTest

@testable import TodoSyncStore

/// The export holds its whole body in memory, so a process builds only `exportSlots` at once.
final class AccountExportTests: StoreTestCase {
    func testAnExportBeyondTheSlotsIsTurnedAwayAtOnce() throws {
        let held = try store.configuration.exportSlots.withSlot { () throws -> DomainError? in
            do {
                _ = try store.exportAccount(userID: userID)
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
        let body = try JSONParser.parse(try store.exportAccount(userID: userID))
        guard case .object(let members) = body else { return XCTFail("not an object: \(body)") }
        XCTAssertEqual(Set(members.keys), ["user", "tags", "todos", "dailyStats"])
    }
}
