import Foundation
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// `todosync-client password`, `sessions`, `sessions revoke`, `export`, `delete-account`
/// (issue 24, terminal client) against the real stack, with `TerminalClientTests`' helpers.
extension TerminalClientTests {
    /// The one JSON object a failed `--json` command printed on stderr.
    func failure(_ result: Run, file: StaticString = #filePath, line: UInt = #line) -> [String: JSONValue] {
        XCTAssertEqual(result.stdout, "", file: file, line: line)
        guard case .object(let object)? = try? JSONParser.parse(Array(result.stderr.utf8)),
              case .object(let error)? = object["error"] else {
            XCTFail("not a JSON error: \(result.stderr)", file: file, line: line)
            return [:]
        }
        return error
    }

    func storeFiles(_ path: String) -> [String] {
        [path, path + "-wal", path + "-shm"].filter { FileManager.default.fileExists(atPath: $0) }
    }

    func testAccountCommandsChangeThePasswordListAndRevokeSessionsAndExport() throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        try json(["register", "--email", email], path: a)
        try json(["login", "--email", email], path: b)
        try json(["add", "--date", "2026-11-26", "Queued on b"], path: b)
        let sessions = try json(["sessions"], path: a)["sessions"]?.arrayValue?.compactMap(\.objectValue) ?? []
        XCTAssertEqual(sessions.count, 2, "\(sessions)")
        XCTAssertEqual(sessions.filter { $0["current"] == .bool(true) }.count, 1)
        XCTAssertEqual(Set(sessions.first.map { Array($0.keys) } ?? []), ["id", "createdAt", "lastUsedAt", "current"])

        let wrong = try run(["password", "--password-stdin", "--json"], path: a, stdin: "not the password\nwhatever new\n")
        XCTAssertEqual(wrong.status, 1, wrong.stderr)
        XCTAssertEqual(failure(wrong)["code"], .string("wrong_password"))
        let newPassword = "the new password"
        let changed = try run(["password", "--password-stdin", "--json"], path: a, stdin: "\(password)\n\(newPassword)\n")
        XCTAssertEqual(changed.status, 0, changed.stderr)
        XCTAssertEqual(changed.stdout, #"{"passwordChanged":true}"# + "\n")
        try json(["sync"], path: a)  // a stays signed in

        // b was signed out by the change: it says so and keeps its queued change.
        let refused = try run(["sync", "--json"], path: b)
        XCTAssertEqual(refused.status, 1, refused.stderr)
        let error = failure(refused)
        XCTAssertEqual(error["code"], .string("unauthorized"))
        XCTAssertTrue(error["message"]?.stringValue?.contains("signed out: log in again") ?? false, "\(error)")
        let status = try json(["status"], path: b)
        XCTAssertEqual(status["signedOut"], .bool(true))
        XCTAssertEqual(status["pending"], .int(1))
        let human = try run(["status"], path: b)
        XCTAssertTrue(human.stdout.contains("account:    \(email) — signed out: log in again"), human.stdout)

        let login = try run(["login", "--email", email], path: b, environment: ["TODOSYNC_PASSWORD": newPassword])
        XCTAssertEqual(login.status, 0, login.stderr)
        XCTAssertEqual(try json(["sync"], path: b)["pending"], .int(0), "the queued change went out after the login")

        let now = try json(["sessions"], path: a)["sessions"]?.arrayValue?.compactMap(\.objectValue) ?? []
        let other = try XCTUnwrap(now.first { $0["current"] == .bool(false) }?["id"]?.stringValue)
        XCTAssertEqual(try json(["sessions", "revoke", other], path: a)["revoked"], .string(other))
        XCTAssertEqual(failure(try run(["sync", "--json"], path: b))["code"], .string("unauthorized"))
        let again = try run(["sessions", "revoke", other, "--json"], path: a)
        XCTAssertEqual(again.status, 1)
        XCTAssertEqual(failure(again)["code"], .string("not_found"))

        let exportFile = directory.appendingPathComponent("export.json").path
        let exported = try json(["export", exportFile], path: a)
        let data = try Data(contentsOf: URL(fileURLWithPath: exportFile))
        XCTAssertEqual(exported["bytes"], .int(data.count))
        let document = try XCTUnwrap(JSONParser.parse(Array(data)).objectValue)
        XCTAssertEqual(document["user"]?.objectValue?["email"], .string(email))
        XCTAssertEqual(document["todos"]?.arrayValue?.compactMap { $0.objectValue?["title"] }, [.string("Queued on b")])
    }

    func testDeleteAccountNeedsYesOffATerminalAndRemovesTheStoreOnlyAfterTheServerConfirmed() throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        try json(["register", "--email", email], path: a)
        try json(["add", "Mine"], path: a)
        try json(["sync"], path: a)
        try json(["add", "Not yet synced"], path: a)
        let store = try LocalStore(path: a)  // holds the file open, as an app would: -wal and -shm stay
        XCTAssertEqual(storeFiles(a).count, 3)

        let unconfirmed = try run(["delete-account"], path: a)
        XCTAssertEqual(unconfirmed.status, 2, unconfirmed.stderr)
        XCTAssertTrue(unconfirmed.stderr.contains("--yes"), unconfirmed.stderr)
        let wrong = try run(["delete-account", "--yes", "--json"], path: a, environment: ["TODOSYNC_PASSWORD": "not the password"])
        XCTAssertEqual(wrong.status, 1, wrong.stderr)
        XCTAssertEqual(failure(wrong)["code"], .string("wrong_password"))
        XCTAssertEqual(storeFiles(a).count, 3, "a wrong password keeps the store, its -wal and -shm")
        XCTAssertEqual(try store.pendingCount(), 1)

        let deleted = try run(["delete-account", "--yes", "--json"], path: a)
        XCTAssertEqual(deleted.status, 0, deleted.stderr)
        XCTAssertEqual(deleted.stdout, JSONText.encode(.object(["deleted": .bool(true), "account": .string(email), "store": .string(a)])) + "\n")
        XCTAssertEqual(storeFiles(a), [], "after the 204 the store, its -wal and -shm are gone")
        let relogin = try run(["login", "--email", email, "--json"], path: directory.appendingPathComponent("b.sqlite").path)
        XCTAssertEqual(relogin.status, 1, "the account is gone: \(relogin.stderr)")
    }

    /// On a terminal (util-linux `script`), `delete-account` asks first: anything but "delete"
    /// keeps everything.
    func testOnATerminalDeleteAccountAsksForConfirmation() throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        try json(["register", "--email", email], path: a)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { throw XCTSkip("no /usr/bin/script") }
        for (answer, deletes) in [("no", false), ("delete", true)] {
            let (status, text) = try runOnATerminal("delete-account --db '\(a)'", baseURL: baseURL,
                                                    environment: ["TODOSYNC_PASSWORD": password],
                                                    prompt: "to confirm: ", answer: answer)
            XCTAssertTrue(text.contains("This deletes the account \(email)"), text)
            XCTAssertEqual(status, deletes ? 0 : 1, text)
            XCTAssertEqual(FileManager.default.fileExists(atPath: a), !deletes, text)
        }
    }
}
