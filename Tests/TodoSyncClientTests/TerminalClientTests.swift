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
    func run(_ arguments: [String], path: String, environment extra: [String: String] = [:]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Stack.clientBinary)
        process.arguments = arguments + ["--db", path]
        var environment = ProcessInfo.processInfo.environment
        environment["TODOSYNC_SERVER"] = baseURL.absoluteString
        environment["TODOSYNC_PASSWORD"] = password
        environment.merge(extra) { $1 }
        process.environment = environment
        // stderr goes to a file, so that reading one pipe cannot block on the other.
        let errorFile = directory.appendingPathComponent("stderr-\(UUID().uuidString)")
        FileManager.default.createFile(atPath: errorFile.path, contents: nil)
        let err = try FileHandle(forWritingTo: errorFile)
        let out = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
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
}
