import Foundation
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// A todo edited offline that names a tag another device deleted meanwhile (issue 20, item 1):
/// the server counts the deleted tag as none (API.md "Sync: push", `create`), so the todo
/// survives untagged on every device instead of being rejected and then lost with `ack`.
final class DeletedTagTests: StackTestCase {
    let day = Day("2026-11-24")!

    /// The report's steps, command for command, with two store files and the terminal client.
    func testAnOfflineTodoNamingATagDeletedElsewhereSurvivesUntagged() async throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        func run(_ path: String, _ arguments: String...) throws -> String {
            let result = try cli(arguments, path: path)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.output)")
            return result.output
        }
        _ = try run(a, "register", "--email", email)
        _ = try run(b, "login", "--email", email)

        _ = try run(a, "tag-add", "Work", "#ff8800")
        _ = try run(a, "add", "--date", "2026-11-24", "x #work")
        _ = try run(a, "sync", "--quiet")
        _ = try run(b, "sync", "--quiet")
        _ = try run(a, "tag-rm", "Work")
        _ = try run(a, "sync", "--quiet")
        // B has not synced since: it still has the tag, and names it.
        _ = try run(b, "add", "--date", "2026-11-24", "Made offline #work")
        let synced = try run(b, "sync", "--quiet")
        XCTAssertFalse(synced.contains("rejected"), synced)
        XCTAssertEqual(try run(b, "rejected"), "No rejected changes.\n")

        let listed = try run(b, "list", "--date", "2026-11-24")
        XCTAssertTrue(listed.contains("Made offline  (2026-11-24)"), "on B, untagged: \(listed)")
        XCTAssertFalse(listed.contains("#Work"), listed)
        let token = try XCTUnwrap(LocalStore(path: b).token())
        let server = try await serverItems("/api/v1/todos?date=2026-11-24", token: token)
        XCTAssertEqual(server.map { $0["title"]?.stringValue }, ["Made offline", "x"])
        XCTAssertEqual(server.map { $0["tagId"] }, [.null, .null])

        _ = try run(a, "sync", "--quiet")
        let onA = try run(a, "list", "--date", "2026-11-24")
        XCTAssertTrue(onA.contains("Made offline  (2026-11-24)"), "reaches A: \(onA)")
    }

    /// An offline update that moves a todo to a tag deleted meanwhile: its other fields go
    /// through and the todo ends untagged, on the device too.
    func testAnOfflineUpdateNamingATagDeletedMeanwhileApplies() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let work = try phone.store.addTag(name: "Work", color: "#ff8800")
        try phone.store.addTag(name: "Home", color: "#00aa00")
        let todo = try phone.store.quickAdd("Plan #home", date: day)[0]
        try await phone.client.sync()
        try await laptop.client.sync()
        let laptopWork = try XCTUnwrap(laptop.store.tags().first { $0.name == "Work" })
        let laptopTodo = try XCTUnwrap(laptop.store.todos(on: day).first)

        try phone.store.deleteTag(work.localID)
        try await phone.client.sync()
        try laptop.store.updateTodo(laptopTodo.localID, TodoChanges(title: "Plan the week", tag: .some(laptopWork.localID)))
        let report = try await laptop.client.sync()
        XCTAssertEqual(report.results[.rejected], nil, "\(String(describing: try? laptop.store.operations()))")
        XCTAssertEqual(report.results[.applied], 1)

        let after = try XCTUnwrap(laptop.store.todo(laptopTodo.localID))
        XCTAssertEqual(after.title, "Plan the week")
        XCTAssertNil(after.tagLocalID)
        try await phone.client.sync()
        XCTAssertEqual(try phone.store.todo(todo.localID)?.title, "Plan the week")
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }

    /// `client-wins` restores a todo deleted on the server: when the tag the device gave it is
    /// gone too, the todo comes back untagged.
    func testAClientWinsRestoreOfATodoWhoseTagIsGone() async throws {
        let phone = try await device("phone")
        let laptop = try await device("laptop")
        let work = try phone.store.addTag(name: "Work", color: "#ff8800")
        try phone.store.addTag(name: "Home", color: "#00aa00")
        let todo = try phone.store.quickAdd("Keep me #home", date: day)[0]
        try await phone.client.sync()
        try await laptop.client.sync()
        let laptopWork = try XCTUnwrap(laptop.store.tags().first { $0.name == "Work" })
        let laptopTodo = try XCTUnwrap(laptop.store.todos(on: day).first)

        try phone.store.deleteTodo(todo.localID)
        try phone.store.deleteTag(work.localID)
        try await phone.client.sync()
        try laptop.store.updateTodo(laptopTodo.localID, TodoChanges(title: "Kept", tag: .some(laptopWork.localID)))
        let report = try await laptop.client.sync(policy: .clientWins)
        XCTAssertEqual(report.results[.rejected], nil, "\(String(describing: try? laptop.store.operations()))")
        XCTAssertEqual(report.results[.applied], 1)

        let restored = try XCTUnwrap(laptop.store.todo(laptopTodo.localID))
        XCTAssertEqual(restored.title, "Kept")
        XCTAssertNil(restored.tagLocalID)
        try await phone.client.sync()
        let onPhone = try XCTUnwrap(phone.store.todos(on: day).first)
        XCTAssertEqual(onPhone.title, "Kept")
        XCTAssertNil(onPhone.tagLocalID)
        try await assertEqualsServer(phone)
        try await assertEqualsServer(laptop)
    }
}
