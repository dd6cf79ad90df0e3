import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// Live sync through the real stack (nginx nchan → responders → MariaDB): a change pushed by
/// one device reaches another device's store through its engine, with no `sync()` call on it.
final class LiveSyncStackTests: StackTestCase {
    func testAChangePushedFromAReachesBsStoreWithinTwoSeconds() async throws {
        let a = try await device("A")
        let b = try await device("B")
        // The timer is out of the way: only the live stream can bring the change in time.
        let engine = SyncEngine(client: b.client, settings: SyncEngine.Settings(interval: 3600))
        let log = EventLog(engine)
        await engine.start()
        await waitFor("B's stream is open and its first sync done", timeout: 10) {
            log.events.contains(.connected) && !log.synced.isEmpty
        }
        await settle(engine)

        let day = Day("2026-11-24")!
        var latencies: [Double] = []
        for index in 0..<3 {
            let title = "From A \(index)"
            try a.store.addTodo(NewTodo(title: title, deadline: day))
            try await a.client.sync()
            let pushed = Date()
            await waitFor("B has \(title)", timeout: 2) {
                ((try? b.store.todos(from: day, to: day)) ?? []).contains { $0.title == title }
            }
            latencies.append(Date().timeIntervalSince(pushed))
        }
        print("live propagation A → B (push answered → in B's store), seconds: \(latencies)")
        XCTAssertTrue(latencies.allSatisfy { $0 < 2 }, "\(latencies)")
        XCTAssertTrue(log.synced.contains(.poke), "B pulled because of a poke")
        await engine.stop()
        try await assertEqualsServer(b)
    }

    /// nginx reloads (its streams close) while B's engine is subscribed: the engine reconnects
    /// by itself after its jittered wait, and the pull when the stream opens brings what A pushed
    /// meanwhile (no poke needed).
    func testAfterAnNginxReloadTheEngineReconnectsAndCatchesUp() async throws {
        let a = try await device("A")
        let b = try await device("B")
        let engine = SyncEngine(client: b.client, settings: SyncEngine.Settings(interval: 3600, liveInitialBackoff: 1))
        let log = EventLog(engine)
        await engine.start()
        await waitFor("B's stream is open", timeout: 10) { log.events.contains(.connected) && !log.synced.isEmpty }
        try Stack.command(["up"])  // reloads nginx: its streams end
        await waitFor("B's stream closed", timeout: 5) {
            log.events.contains { if case .disconnected = $0 { return true } else { return false } }
        }
        let day = Day("2026-11-24")!
        try a.store.addTodo(NewTodo(title: "During the reload", deadline: day))
        try await a.client.sync()
        await waitFor("B caught up after reconnecting", timeout: 4) {
            ((try? b.store.todos(from: day, to: day)) ?? []).contains { $0.title == "During the reload" }
        }
        XCTAssertEqual(log.events.filter { $0 == .connected }.count, 2, "\(log.events)")
        await engine.stop()
    }

    /// `todosync-client watch` on B's store file: A's change lands in B's file within 2 s, a
    /// change queued by another invocation on B's file goes out by itself, and SIGTERM ends the
    /// watch at once with exit 0 and a last `stopped` line.
    func testWatchKeepsAStoreFileInSyncAndStopsCleanlyOnSIGTERM() async throws {
        let a = try await device("A")
        let b = try await device("B")
        let binary = Stack.clientBinary
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw TestFailure("todosync-client is not built at \(binary)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["watch", "--json", "--interval", "3600", "--db", b.path]
        var environment = ProcessInfo.processInfo.environment
        environment["TODOSYNC_SERVER"] = baseURL.absoluteString
        process.environment = environment
        let outputPath = directory.appendingPathComponent("watch.out").path
        FileManager.default.createFile(atPath: outputPath, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardOutput = output
        process.standardError = output
        try process.run()
        defer { if process.isRunning { process.terminate() } }
        let lines = OutputFile(path: outputPath)
        await waitFor("watch connected", timeout: 10) { lines.text.contains(#""event":"connected""#) }

        let day = Day("2026-11-24")!
        try a.store.addTodo(NewTodo(title: "Pushed by A", deadline: day))
        try await a.client.sync()
        await waitFor("A's todo in B's file", timeout: 2) {
            ((try? LocalStore(path: b.path, create: false).todos(from: day, to: day)) ?? []).contains { $0.title == "Pushed by A" }
        }
        // Another invocation on B's file (here: this process's own store handle) queues a change.
        try b.store.addTodo(NewTodo(title: "Queued on B", deadline: day))
        await waitFor("the watch syncs B's queued change", timeout: 3) { lines.text.contains(#""trigger":"local-write""#) }
        let onServer = try await serverItems("/api/v1/todos?from=2026-11-24&to=2026-11-24", token: a.token)
        XCTAssertTrue(onServer.contains { $0["title"]?.stringValue == "Queued on B" }, "\(onServer)")
        process.terminate()
        let stopped = Date()
        process.waitUntilExit()
        XCTAssertLessThan(Date().timeIntervalSince(stopped), 2, "SIGTERM ends the watch at once")
        XCTAssertEqual(process.terminationReason, .exit)
        XCTAssertEqual(process.terminationStatus, 0, lines.text)
        // The poke may arrive during the sync of the stream opening and coalesce into its follow-up.
        XCTAssertTrue(lines.text.contains(#""event":"poke""#), lines.text)
        XCTAssertTrue(lines.text.contains(#""trigger":"local-write""#), lines.text)
        XCTAssertTrue(lines.text.contains(#""event":"stopped","reason":"requested""#) || lines.text.contains(#""reason":"requested""#), lines.text)
        XCTAssertEqual(try b.store.pendingCount(), 0)
    }
}

/// A file a child process writes to, read whole each time.
struct OutputFile {
    let path: String
    var text: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}
