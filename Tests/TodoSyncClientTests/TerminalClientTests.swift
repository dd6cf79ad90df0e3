import Foundation
import TodoSyncCore
import XCTest

@testable import TodoSyncClient

/// The terminal client as scripts and people use it (issue 20, item 5): `--json` on every
/// command, `--version`, the exit-code table, `status` naming the server in use, `list`'s
/// markers, progress only on a terminal, and the server's `details` in errors. Every test runs
/// the built `todosync-client` against the real stack.
final class TerminalClientTests: StackTestCase {
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs the client with stdout and stderr apart (`cli` merges them).
    func run(_ arguments: [String], path: String, environment extra: [String: String] = [:], unset: [String] = [],
             stdin: String? = nil) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Stack.clientBinary)
        process.arguments = arguments + ["--db", path]
        var environment = ProcessInfo.processInfo.environment
        environment["TODOSYNC_SERVER"] = baseURL.absoluteString
        environment["TODOSYNC_PASSWORD"] = password
        environment.merge(extra) { $1 }
        for name in unset { environment[name] = nil }
        process.environment = environment
        let input = Pipe()
        process.standardInput = input
        // stderr goes to a file, so that reading one pipe cannot block on the other.
        let errorFile = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        let err = try FileHandle(forWritingTo: errorFile)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        if let stdin { input.fileHandleForWriting.write(Data(stdin.utf8)) }
        try input.fileHandleForWriting.close()
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try err.close()
        let stderrData = try Data(contentsOf: errorFile)
        return Run(status: process.terminationStatus, stdout: String(decoding: stdoutData, as: UTF8.self),
                   stderr: String(decoding: stderrData, as: UTF8.self))
    }

    /// Runs a command with `--json`; it must exit `status` and print exactly one JSON object
    /// (on stdout when it succeeded, on stderr otherwise) and nothing on the other stream.
    @discardableResult
    func json(_ arguments: [String], path: String, status: Int32 = 0, file: StaticString = #filePath,
              line: UInt = #line) throws -> [String: JSONValue] {
        let result = try run(arguments + ["--json"], path: path)
        XCTAssertEqual(result.status, status, "\(arguments): \(result.stdout) \(result.stderr)", file: file, line: line)
        let (document, other) = status == 0 ? (result.stdout, result.stderr) : (result.stderr, result.stdout)
        XCTAssertEqual(other, "", "\(arguments): the other stream stays empty", file: file, line: line)
        XCTAssertEqual(document.filter { $0 == "\n" }.count, 1, "\(arguments): one line: \(document)", file: file, line: line)
        guard let parsed = try? JSONParser.parse(Array(document.utf8)), case .object(let object) = parsed else {
            XCTFail("\(arguments): not a JSON object: \(document)", file: file, line: line)
            return [:]
        }
        return object
    }

    func testEveryCommandAnswersOneJSONDocument() async throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let registered = try json(["register", "--email", email], path: a)
        XCTAssertEqual(registered["email"], .string(email))
        let tag = try json(["tag-add", "Work", "#ff8800"], path: a)
        XCTAssertEqual(tag["tag"]?.objectValue?["name"], .string("Work"))
        let added = try json(["add", "--date", "2026-11-24", "Plan the week #work", "Call mum"], path: a)
        XCTAssertEqual(added["added"]?.arrayValue?.count, 2)
        XCTAssertEqual(added["pending"], .int(3))
        let first = try XCTUnwrap(added["added"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(first["title"], .string("Plan the week"))
        XCTAssertEqual(first["tag"], .string("Work"))
        XCTAssertEqual(first["pending"], .bool(true))
        let localID = try XCTUnwrap(first["localId"]?.int64Value)
        XCTAssertEqual(try json(["tags"], path: a)["tags"]?.arrayValue?.count, 1)
        try json(["edit", String(localID), "--title", "Plan the month"], path: a)
        try json(["done", String(localID)], path: a)
        let synced = try json(["sync"], path: a)
        XCTAssertEqual(synced["sent"], .int(3), "\(synced)")
        XCTAssertEqual(synced["pending"], .int(0))
        let listed = try json(["list", "--date", "2026-11-24"], path: a)
        let todos = try XCTUnwrap(listed["todos"]?.arrayValue?.compactMap(\.objectValue))
        XCTAssertEqual(todos.map { $0["title"] }, [.string("Call mum"), .string("Plan the month")])
        XCTAssertEqual(todos.map { $0["synced"] }, [.bool(true), .bool(true)])
        let status = try json(["status"], path: a)
        XCTAssertEqual(status["account"], .string(email))
        XCTAssertEqual(status["pending"], .int(0))
        XCTAssertEqual(try json(["conflicts"], path: a)["conflicts"], .array([]))
        XCTAssertEqual(try json(["rejected"], path: a)["rejected"], .array([]))
        XCTAssertEqual(try json(["stat", "--date", "2026-11-24"], path: a)["date"], .string("2026-11-24"))
        try json(["rm", String(localID)], path: a)
        try json(["tag-rm", "Work"], path: a)
        XCTAssertEqual(try json(["logout"], path: a)["loggedIn"], .bool(false))

        // Failures: one document on stderr with the exit code.
        let missing = try json(["edit", "999", "--title", "x"], path: a, status: 1)
        XCTAssertEqual(missing["exitCode"], .int(1))
        XCTAssertNotNil(missing["error"]?.objectValue?["message"]?.stringValue)
        let usage = try json(["list", "--bogus"], path: a, status: 2)
        XCTAssertEqual(usage["error"]?.objectValue?["code"], .string("usage"))
    }

    /// docs/CLIENT-CLI.md's exit-code table lists exactly the codes `--help` prints from
    /// `ClientExit`, with the same numbers.
    func testTheDocumentedExitCodesAreTheCodes() throws {
        let help = try runProcess(Stack.clientBinary, ["--help"]).output
        let fromCode = Set(help.split(separator: "\n").compactMap { line -> Int? in
            let parts = line.split(separator: " ", maxSplits: 1)
            return line.hasPrefix("  ") && parts.count == 2 ? Int(parts[0]) : nil
        })
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/CLIENT-CLI.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let table = try XCTUnwrap(text.components(separatedBy: "## Exit codes").last)
        let fromDocs = Set(table.split(separator: "\n").compactMap { line -> Int? in
            guard line.hasPrefix("| ") else { return nil }
            return Int(line.dropFirst(2).prefix { $0 != " " })
        })
        XCTAssertEqual(fromCode, [0, 1, 2, 3, 4, 5, 6], help)
        XCTAssertEqual(fromDocs, fromCode)
    }

    func testVersionAndUsageExitCodes() throws {
        let path = directory.appendingPathComponent("v.sqlite").path
        let process = try runProcess(Stack.clientBinary, ["--version"])
        XCTAssertEqual(process.status, 0, process.output)
        XCTAssertTrue(process.output.hasPrefix("todosync-client 1.0.0"), process.output)
        let versionJSON = try runProcess(Stack.clientBinary, ["--version", "--json"])
        XCTAssertEqual(versionJSON.output, "{\"api\":\"v1\",\"version\":\"1.0.0\"}\n")

        let usage = try run(["list", "--no-such-flag"], path: path)
        XCTAssertEqual(usage.status, 2, usage.stderr)
        XCTAssertTrue(usage.stderr.contains("Unknown option '--no-such-flag'"), usage.stderr)
        let policy = try run(["sync", "--policy", "whatever"], path: path)
        XCTAssertEqual(policy.status, 2, policy.stderr)
    }

    func testStatusNamesTheServerInUse() throws {
        let path = directory.appendingPathComponent("s.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: path).status, 0)
        let result = try run(["status"], path: path)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("server:     \(baseURL.absoluteString) (from TODOSYNC_SERVER)"), result.stdout)
        let other = try run(["status", "--server", "http://127.0.0.1:1"], path: path)
        XCTAssertTrue(other.stdout.contains("server:     http://127.0.0.1:1 (from --server)"), other.stdout)
    }

    func testListMarksPendingChangesAndConflictsAtTheEndOfTheLine() throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: a).status, 0)
        XCTAssertEqual(try run(["login", "--email", email], path: b).status, 0)
        XCTAssertEqual(try run(["add", "--date", "2026-11-24", "Plan"], path: a).status, 0)
        let pending = try run(["list", "--date", "2026-11-24"], path: a).stdout
        XCTAssertTrue(pending.hasSuffix("Plan  (2026-11-24 not synced)  [pending]\n"), pending)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        XCTAssertEqual(try run(["list", "--date", "2026-11-24"], path: a).stdout, "    1  [ ] Plan  (2026-11-24)\n")
        XCTAssertEqual(try run(["sync", "--quiet"], path: b).status, 0)

        XCTAssertEqual(try run(["edit", "1", "--title", "Plan A"], path: a).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        let onB = try json(["list", "--date", "2026-11-24"], path: b)
        let bID = try XCTUnwrap(onB["todos"]?.arrayValue?.first?.objectValue?["localId"]?.int64Value)
        XCTAssertEqual(try run(["edit", String(bID), "--title", "Plan B"], path: b).status, 0)
        let asked = try run(["sync", "--quiet", "--policy", "ask"], path: b)
        XCTAssertEqual(asked.status, 6, "synced, a conflict waits: \(asked.stdout) \(asked.stderr)")
        XCTAssertTrue(asked.stdout.contains("1 conflict(s) wait for you"), asked.stdout)
        let listed = try run(["list", "--date", "2026-11-24"], path: b).stdout
        XCTAssertTrue(listed.hasSuffix("  [conflict]\n"), listed)
        let marked = try json(["list", "--date", "2026-11-24"], path: b)
        XCTAssertEqual(marked["todos"]?.arrayValue?.first?.objectValue?["conflict"], .bool(true))
    }

    /// `add`/`edit --remind-at` (any RFC 3339 offset, kept in UTC; '-' removes it), shown in the
    /// `list` line and `--json`, synced to the server and to another device; a bad instant is a
    /// usage error that changes nothing.
    func testRemindAtIsAddedEditedListedAndSynced() async throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: a).status, 0)
        XCTAssertEqual(try run(["login", "--email", email], path: b).status, 0)
        let added = try run(["add", "--date", "2026-11-24", "--remind-at", "2026-11-24t09:15:30.98765+02:00", "Call"], path: a)
        XCTAssertEqual(added.status, 0, added.stderr)
        XCTAssertTrue(added.stdout.contains("Call  (2026-11-24 remind 2026-11-24T07:15:30.987Z not synced)"), added.stdout)
        let listed = try json(["list", "--date", "2026-11-24"], path: a)
        XCTAssertEqual(listed["todos"]?.arrayValue?.first?.objectValue?["remindAt"], .string("2026-11-24T07:15:30.987Z"))
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        let token = try XCTUnwrap(LocalStore(path: a).token())
        var onServer = try await serverItems("/api/v1/todos?date=2026-11-24", token: token)
        XCTAssertEqual(onServer.first?["remindAt"], .string("2026-11-24T07:15:30.987Z"))

        XCTAssertEqual(try run(["sync", "--quiet"], path: b).status, 0)
        XCTAssertEqual(try run(["list", "--date", "2026-11-24"], path: b).stdout,
                       "    1  [ ] Call  (2026-11-24 remind 2026-11-24T07:15:30.987Z)\n")
        let bad = try run(["edit", "1", "--remind-at", "2026-11-24T09:15:60Z"], path: b)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("remindAt"), bad.stderr)
        XCTAssertEqual(try json(["status"], path: b)["pending"]?.int64Value ?? 0, 0, "the refused edit queued nothing")
        XCTAssertEqual(try run(["edit", "1", "--remind-at", "-"], path: b).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: b).status, 0)
        onServer = try await serverItems("/api/v1/todos?date=2026-11-24", token: token)
        XCTAssertEqual(onServer.first?["remindAt"], .null)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        XCTAssertEqual(try json(["list", "--date", "2026-11-24"], path: a)["todos"]?.arrayValue?.first?.objectValue?["remindAt"], .null)
    }

    func testProgressOnlyOnATerminalOrWhenAskedAndNeverAnUnmeasuredBar() throws {
        let path = directory.appendingPathComponent("p.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: path).status, 0)
        XCTAssertEqual(try run(["add", "--date", "2026-11-24", "One", "Two"], path: path).status, 0)
        let plain = try run(["sync"], path: path)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertEqual(plain.stderr, "", "stderr is not a terminal: no progress")
        XCTAssertEqual(try run(["add", "--date", "2026-11-24", "Three"], path: path).status, 0)
        let asked = try run(["sync", "--progress"], path: path)
        XCTAssertEqual(asked.status, 0, asked.stderr)
        XCTAssertTrue(asked.stderr.contains("Pushing [########################] 1/1 changes"), asked.stderr)
        let pulling = asked.stderr.split(separator: "\n").filter { $0.hasPrefix("Pulling") }
        XCTAssertFalse(pulling.isEmpty, asked.stderr)
        for line in pulling where !line.contains("/") {
            XCTAssertFalse(line.contains("["), "a bar without a total measures nothing: \(line)")
        }
    }

    func testErrorsShowTheServersDetails() throws {
        let path = directory.appendingPathComponent("d.sqlite").path
        let result = try run(["register", "--email", "no-at-sign"], path: path)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("email: must contain exactly one @"), result.stderr)
        let document = try json(["register", "--email", "no-at-sign"], path: path, status: 1)
        let details = document["error"]?.objectValue?["details"]?.arrayValue?.compactMap(\.objectValue)
        XCTAssertEqual(details?.first?["field"], .string("email"))
    }

    // MARK: Step 3: the store's secrets

    func testTheStoreFileAndItsWALAndSHMAreTheOwnersOnly() throws {
        let path = directory.appendingPathComponent("m.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: path).status, 0)
        func mode(_ file: String) throws -> Int {
            try XCTUnwrap((FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue)
        }
        XCTAssertEqual(try mode(path), 0o600, "the store file")
        let store = try LocalStore(path: path)  // open: SQLite keeps its -wal and -shm next to it
        _ = try store.quickAdd("Keep it private", date: Day("2026-11-24")!)
        XCTAssertEqual(try mode(path + "-wal"), 0o600, "-wal")
        XCTAssertEqual(try mode(path + "-shm"), 0o600, "-shm")
    }

    func testThePasswordComesFromStdinAndTheTokenIsNeverPrinted() throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        let registered = try run(["register", "--email", email, "--password-stdin"], path: a, unset: ["TODOSYNC_PASSWORD"],
                                 stdin: password + "\n")
        XCTAssertEqual(registered.status, 0, registered.stderr)
        let wrong = try run(["login", "--email", email, "--password-stdin"], path: b, unset: ["TODOSYNC_PASSWORD"], stdin: "nope\n")
        XCTAssertEqual(wrong.status, 1, wrong.stderr)
        let nothing = try run(["login", "--email", email], path: b, unset: ["TODOSYNC_PASSWORD"])
        XCTAssertEqual(nothing.status, 2, "stdin is no terminal and no password was given: \(nothing.stderr)")
        XCTAssertTrue(nothing.stderr.contains("--password-stdin"), nothing.stderr)
        let login = try run(["login", "--email", email, "--password-stdin", "--json"], path: b, unset: ["TODOSYNC_PASSWORD"],
                            stdin: password + "\n")
        XCTAssertEqual(login.status, 0, login.stderr)
        XCTAssertEqual(try run(["add", "Secret plans"], path: b).status, 0)

        let token = try XCTUnwrap(LocalStore(path: b).token())
        var said = registered.stdout + registered.stderr + login.stdout + login.stderr
        for arguments in [["status"], ["status", "--json"], ["sync"], ["sync", "--json", "--progress"], ["list", "--json"]] {
            let result = try run(arguments, path: b)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr)")
            said += result.stdout + result.stderr
        }
        XCTAssertFalse(said.contains(token), "the token never appears in output")
        XCTAssertFalse(said.contains(password), "nor the password")
    }

    /// On a terminal (a pseudo-terminal made by util-linux `script`), `login` asks for the
    /// password and the terminal does not echo it.
    func testOnATerminalThePasswordIsAskedForWithoutEcho() throws {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: a).status, 0)
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { throw XCTSkip("no /usr/bin/script") }
        // The client turns echo off right after the prompt: wait a moment before typing.
        let (status, text) = try runOnATerminal("login --db '\(b)' --email '\(email)'", baseURL: baseURL,
                                                environment: ["TODOSYNC_PASSWORD": nil], prompt: "Password: ",
                                                answer: password, pause: 0.2)
        XCTAssertEqual(status, 0, text)
        XCTAssertTrue(text.contains("Logged in as \(email)"), text)
        XCTAssertFalse(text.contains(password), "the password is not echoed: \(text)")
    }

    // MARK: Step 4: stores that are not there or not readable

    func testAMistypedStoreIsAnErrorNotANewEmptyStore() throws {
        let path = directory.appendingPathComponent("typo.sqlite").path
        for arguments in [["list"], ["add", "Lost?"], ["status"], ["sync"]] {
            let result = try run(arguments, path: path)
            XCTAssertEqual(result.status, 1, "\(arguments): \(result.stdout)")
            XCTAssertTrue(result.stderr.contains("no local store at \(path)"), result.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: path), "nothing was created")
        XCTAssertEqual(try json(["list"], path: path, status: 1)["error"]?.objectValue?["code"], .string("no_store"))
    }

    func testACorruptStoreSaysWhatItIsAndHowToStartAgainKeepingItsChanges() throws {
        let path = directory.appendingPathComponent("c.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: path).status, 0)
        XCTAssertEqual(try run(["add", "--date", "2026-11-24", "Keep me"], path: path).status, 0)
        let exported = try json(["export-pending"], path: path)
        let change = try XCTUnwrap(exported["pending"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(change["action"], .string("create"))
        XCTAssertEqual(change["fields"]?.objectValue?["title"], .string("Keep me"))

        let broken = directory.appendingPathComponent("broken.sqlite").path
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: broken))
        let result = try run(["list"], path: broken)
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("is not a readable TodoSync store"), result.stderr)
        XCTAssertTrue(result.stderr.contains("todosync-client export-pending --db \(broken)"), result.stderr)
        XCTAssertTrue(result.stderr.contains("mv \(broken) \(broken).broken"), result.stderr)
    }

    // MARK: Step 4: conflicts said plainly, tags edited, every field resolvable

    /// Two stores of one account, both holding "Plan" (local id 1 on each) after a sync.
    func twoStoresSharingATodo() throws -> (a: String, b: String) {
        let a = directory.appendingPathComponent("a.sqlite").path
        let b = directory.appendingPathComponent("b.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: a).status, 0)
        XCTAssertEqual(try run(["login", "--email", email], path: b).status, 0)
        XCTAssertEqual(try run(["add", "--date", "2026-11-24", "Plan"], path: a).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: b).status, 0)
        return (a, b)
    }

    func testMergeAndRejectSayWhichFieldsOfWhichTodoKeptTheServersValue() throws {
        let (a, b) = try twoStoresSharingATodo()
        XCTAssertEqual(try run(["edit", "1", "--title", "Plan A"], path: a).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        XCTAssertEqual(try run(["edit", "1", "--title", "Plan B", "--important", "true"], path: b).status, 0)
        let merged = try run(["sync", "--quiet"], path: b)
        XCTAssertEqual(merged.status, 0, merged.stderr)
        XCTAssertTrue(merged.stdout.hasPrefix("Synced: sent 1 change(s) (1 merged)"), "today's line first: \(merged.stdout)")
        XCTAssertTrue(merged.stdout.contains("  kept the server's title of todo 1 \"Plan A\" (merge)\n"), merged.stdout)
        let operations = try run(["operations", "--last", "5"], path: b)
        XCTAssertTrue(operations.stdout.contains("kept the server's: title"), operations.stdout)

        XCTAssertEqual(try run(["edit", "1", "--title", "Plan C"], path: a).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        XCTAssertEqual(try run(["edit", "1", "--title", "Plan D"], path: b).status, 0)
        let rejected = try json(["sync", "--quiet", "--policy", "reject"], path: b)
        let dropped = try XCTUnwrap(rejected["dropped"]?.arrayValue?.first?.objectValue)
        XCTAssertEqual(dropped["localId"], .int(1))
        XCTAssertEqual(dropped["fields"], .array([.string("title")]))
        XCTAssertEqual(try run(["list", "--date", "2026-11-24"], path: b).stdout, "    1  [ ] ! Plan C  (2026-11-24)\n")
    }

    func testTagEditRenamesAndRecolors() async throws {
        let path = directory.appendingPathComponent("t.sqlite").path
        XCTAssertEqual(try run(["register", "--email", email], path: path).status, 0)
        XCTAssertEqual(try run(["tag-add", "Work", "#ff8800"], path: path).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: path).status, 0)
        let edited = try json(["tag-edit", "Work", "--name", "Job", "--color", "#00AA00"], path: path)
        XCTAssertEqual(edited["tag"]?.objectValue?["name"], .string("Job"))
        XCTAssertEqual(try run(["sync", "--quiet"], path: path).status, 0)
        let token = try XCTUnwrap(LocalStore(path: path).token())
        let tags = try await serverItems("/api/v1/tags", token: token)
        XCTAssertEqual(tags.map { $0["name"] }, [.string("Job")])
        XCTAssertEqual(tags.first?["color"]?.stringValue?.lowercased(), "#00aa00")
        XCTAssertEqual(try run(["tag-edit", "Job"], path: path).status, 2, "nothing to change is a usage error")
    }

    func testResolveSetsAnySyncedField() async throws {
        let (a, b) = try twoStoresSharingATodo()
        XCTAssertEqual(try run(["tag-add", "Work", "#ff8800"], path: b).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: b).status, 0)
        XCTAssertEqual(try run(["edit", "1", "--title", "Plan A"], path: a).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet"], path: a).status, 0)
        XCTAssertEqual(try run(["edit", "1", "--title", "Plan B"], path: b).status, 0)
        XCTAssertEqual(try run(["sync", "--quiet", "--policy", "ask"], path: b).status, 6)
        let conflict = try XCTUnwrap(try json(["conflicts"], path: b)["conflicts"]?.arrayValue?.first?.objectValue?["conflictId"]?.int64Value)
        let resolved = try run(["resolve", String(conflict), "--title", "Plan AB", "--date", "2026-11-25", "--important", "true",
                                "--life", "true", "--difficulty", "3", "--minutes", "45", "--tag", "Work", "--completed", "true",
                                "--notes", "both", "--remind-at", "2026-11-25T08:00:00-05:00"],
                               path: b)
        XCTAssertEqual(resolved.status, 0, resolved.stderr)
        XCTAssertEqual(try run(["sync", "--quiet"], path: b).status, 0)
        let token = try XCTUnwrap(LocalStore(path: b).token())
        let onServer = try await serverItems("/api/v1/todos?date=2026-11-25", token: token)
        let todo = try XCTUnwrap(onServer.first)
        XCTAssertEqual(todo["title"], .string("Plan AB"))
        XCTAssertEqual(todo["isImportant"], .bool(true))
        XCTAssertEqual(todo["isLife"], .bool(true))
        XCTAssertEqual(todo["difficulty"]?.int64Value, 3)
        XCTAssertEqual(todo["estimatedTime"]?.int64Value, 45)
        XCTAssertEqual(todo["isCompleted"], .bool(true))
        XCTAssertEqual(todo["notes"], .string("both"))
        XCTAssertEqual(todo["remindAt"], .string("2026-11-25T13:00:00.000Z"))
        let tags = try await serverItems("/api/v1/tags", token: token)
        XCTAssertEqual(todo["tagId"], tags.first?["id"])
    }
}

/// Runs `todosync-client ARGUMENTS` on a pseudo-terminal (util-linux `script`), waits (at most
/// 10 s) until it shows `prompt`, types `answer` and a newline after `pause` seconds, and returns
/// its exit status and everything it showed. `environment`: added to this process's (nil removes).
func runOnATerminal(_ arguments: String, baseURL: URL, environment extra: [String: String?], prompt: String,
                    answer: String, pause: Double = 0) throws -> (status: Int32, text: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
    process.arguments = ["-qec", "'\(Stack.clientBinary)' \(arguments)", "/dev/null"]
    var environment = ProcessInfo.processInfo.environment
    environment["TODOSYNC_SERVER"] = baseURL.absoluteString
    for (name, value) in extra { environment[name] = value }
    process.environment = environment
    let input = Pipe(), output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    process.standardError = output
    try process.run()
    var seen = Data()
    let deadline = Date().addingTimeInterval(10)
    while !String(decoding: seen, as: UTF8.self).contains(prompt), Date() < deadline {
        seen.append(output.fileHandleForReading.availableData)
    }
    if pause > 0 { Thread.sleep(forTimeInterval: pause) }
    signal(SIGPIPE, SIG_IGN)  // a client that did not ask has exited: the write fails, the caller's checks report it
    try? input.fileHandleForWriting.write(contentsOf: Data((answer + "\n").utf8))
    seen.append(output.fileHandleForReading.readDataToEndOfFile())
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: seen, as: UTF8.self))
}
