import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// The account calls of the library through the real stack (issue 24, client side): a password
/// change signs the other device out, which keeps its queue and sends it after logging in
/// again; sessions are listed and revoked; the export file holds what a full pull brings; a
/// delete removes the store only after the server's 204.
final class AccountStackTests: StackTestCase {
    let day = Day("2026-11-26")!

    func files(_ device: Device) -> [String] {
        [device.path, device.path + "-wal", device.path + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
    }

    func assertSignedOut(_ device: Device, pending: Int, file: StaticString = #filePath, line: UInt = #line) async throws {
        do {
            try await device.client.sync()
            XCTFail("\(device.name) synced with a revoked token", file: file, line: line)
        } catch let error as SyncError {
            XCTAssertEqual(error, .unauthorized, file: file, line: line)
            XCTAssertEqual(error.description, "signed out: log in again (changes stay queued)", file: file, line: line)
        }
        let status = try device.store.status()
        XCTAssertTrue(status.signedOut, file: file, line: line)
        XCTAssertEqual(status.pending, pending, "\(device.name): its queue stays", file: file, line: line)
    }

    func testAPasswordChangeSignsOutTheOtherDeviceWhichKeepsItsQueueUntilItLogsInAgain() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        try laptop.store.addTodo(NewTodo(title: "Written on the laptop, offline", deadline: day))

        do {
            try await phone.client.changePassword(current: "not the password", new: "a brand new password")
            XCTFail("a wrong current password changed it")
        } catch SyncError.wrongPassword(let field) {
            XCTAssertEqual(field, "currentPassword")
        }
        XCTAssertFalse(try phone.store.status().signedOut, "a wrong password does not sign the phone out")

        let newPassword = "a brand new password"
        try await phone.client.changePassword(current: password, new: newPassword)
        try phone.store.addTodo(NewTodo(title: "Written on the phone", deadline: day))
        try await phone.client.sync()  // the phone's own session stays valid
        XCTAssertEqual(try phone.store.pendingCount(), 0)

        try await assertSignedOut(laptop, pending: 1)
        XCTAssertEqual(try laptop.store.allTodos().map(\.title), ["Written on the laptop, offline"])

        do {
            try await laptop.client.login(email: email, password: password)
            XCTFail("the old password still logs in")
        } catch SyncError.server(status: 401, _, _, _) {}
        try await laptop.client.login(email: email, password: newPassword)
        XCTAssertFalse(try laptop.store.status().signedOut)
        try await laptop.client.sync()
        XCTAssertEqual(try laptop.store.pendingCount(), 0, "the queued change went out after the login")
        try await phone.client.sync()
        XCTAssertEqual(Set(try phone.store.todos(on: day).map(\.title)), ["Written on the laptop, offline", "Written on the phone"])
        try await assertEqualsServer(laptop)
    }

    func testSessionsAreListedAndARevokedOneIsSignedOut() async throws {
        let phone = try await device("phone")
        let lost = try await device("lost-phone")
        let sessions = try await phone.client.sessions()
        XCTAssertEqual(sessions.count, 2, "\(sessions)")
        XCTAssertEqual(sessions.filter(\.current).count, 1)
        let lostSessions = try await lost.client.sessions()
        let lostID = try XCTUnwrap(lostSessions.first(where: \.current)?.id)
        XCTAssertNotEqual(sessions.first(where: \.current)?.id, lostID)
        XCTAssertEqual(Set(sessions.map(\.id)), Set(lostSessions.map(\.id)))
        XCTAssertFalse(sessions.contains { $0.id == (try? phone.token) || $0.id == (try? lost.token) }, "an id is not a token")

        try lost.store.addTodo(NewTodo(title: "Queued on the lost phone", deadline: day))
        try await phone.client.revokeSession(id: lostID)
        try await assertSignedOut(lost, pending: 1)
        let remaining = try await phone.client.sessions()
        XCTAssertEqual(remaining.map(\.id), sessions.filter(\.current).map(\.id))
        do {
            try await phone.client.revokeSession(id: lostID)
            XCTFail("a revoked session was revoked twice")
        } catch SyncError.server(let status, let code, _, _) {
            XCTAssertEqual(status, 404)
            XCTAssertEqual(code, "not_found")
        }
        try await phone.client.sync()
    }

    func testTheExportFileHoldsWhatAFullPullBrings() async throws {
        let phone = try await device("phone")
        let work = try phone.store.addTag(name: "Work", color: "#336699")
        try phone.store.addTodo(NewTodo(title: "한국어 ✓ emoji 🎉", deadline: day, tag: work.localID, isCompleted: true))
        try phone.store.addTodo(NewTodo(title: "second", deadline: Day("2026-11-27")!, isLife: true))
        let doomed = try phone.store.addTodo(NewTodo(title: "doomed", deadline: day))
        try await phone.client.sync()
        try phone.store.deleteTodo(doomed.localID)
        try await phone.client.sync()

        let file = directory.appendingPathComponent("export.json")
        let bytes = try await phone.client.exportAccount(to: file)
        let data = try Data(contentsOf: file)
        XCTAssertEqual(Int64(data.count), bytes)
        let export = try XCTUnwrap(JSONParser.parse(Array(data)).objectValue)
        XCTAssertEqual(Set(export.keys), ["user", "tags", "todos", "dailyStats", "friends", "friendRequests"])
        XCTAssertEqual(export["user"]?.objectValue?["email"]?.stringValue, email)

        let full = try await fullPull(token: try phone.token)
        for kind in ["tags", "todos", "dailyStats"] {
            let exported = (export[kind]?.arrayValue ?? []).compactMap(\.objectValue)
            XCTAssertEqual(byID(exported), full[kind], kind)
        }
        XCTAssertEqual(export["todos"]?.arrayValue?.count, 2, "the deleted todo is not exported")
        XCTAssertEqual(export["dailyStats"]?.arrayValue?.isEmpty, false)
    }

    func testDeletingTheAccountRemovesTheStoreOnlyAfterTheServerConfirmed() async throws {
        let phone = try await device("phone")
        let tablet = try await device("tablet")
        try phone.store.addTodo(NewTodo(title: "Mine", deadline: day))
        try await phone.client.sync()
        try phone.store.addTodo(NewTodo(title: "Never sent", deadline: day))
        try tablet.store.addTodo(NewTodo(title: "Queued on the tablet", deadline: day))
        XCTAssertEqual(files(phone).count, 3)

        do {
            try await phone.client.deleteAccount(password: "not the password")
            XCTFail("a wrong password deleted the account")
        } catch SyncError.wrongPassword(let field) {
            XCTAssertEqual(field, "password")
        }
        XCTAssertEqual(files(phone).count, 3, "a wrong password keeps the store, its -wal and -shm")
        XCTAssertEqual(try phone.store.pendingCount(), 1)
        let token = try phone.token
        _ = try await get("/api/v1/tags", token: token)  // still signed in

        try await phone.client.deleteAccount(password: password)
        XCTAssertEqual(files(phone), [], "the store, its -wal and -shm are gone after the 204")
        do {
            _ = try await get("/api/v1/tags", token: token)
            XCTFail("the deleted account's token still works")
        } catch let failure as TestFailure {
            XCTAssertTrue(failure.description.contains("HTTP 401"), failure.description)
        }
        // Deleted elsewhere: the tablet is signed out and keeps its queue (only the device that
        // deleted the account drops its data).
        try await assertSignedOut(tablet, pending: 1)
        // The email registers again, as a new, empty account.
        let again = try Device("again", directory: directory, baseURL: baseURL)
        try await again.client.register(email: email, password: password)
        try await again.client.sync()
        XCTAssertEqual(try again.store.allTodos(), [])
    }

    // MARK: Helpers

    /// Every live record of a full pull at the current schema version, by kind and id.
    func fullPull(token: String) async throws -> [String: [Int64: JSONObject]] {
        var result: [String: [Int64: JSONObject]] = ["tags": [:], "todos": [:], "dailyStats": [:]]
        var cursor: String?
        repeat {
            var path = "/api/v1/sync/pull?limit=1000&schemaVersion=\(SchemaVersion.current)"
            if let cursor { path += "&cursor=" + (cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? cursor) }
            let page = try await get(path, token: token)
            let changes = page["changes"]?.objectValue ?? [:]
            for kind in result.keys {
                for record in (changes[kind]?.objectValue?["upserted"]?.arrayValue ?? []).compactMap(\.objectValue) {
                    result[kind]![record["id"]!.int64Value!] = record
                }
            }
            cursor = page["hasMore"] == .bool(true) ? page["cursor"]?.stringValue : nil
        } while cursor != nil
        return result
    }

    func byID(_ records: [JSONObject]) -> [Int64: JSONObject] {
        Dictionary(uniqueKeysWithValues: records.map { ($0["id"]!.int64Value!, $0) })
    }
}
