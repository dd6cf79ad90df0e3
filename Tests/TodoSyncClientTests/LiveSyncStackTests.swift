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

    /// Three engines on one account, random local edits for a few seconds while each device's
    /// network is cut and restored at random (the engines are not told): every store ends equal
    /// to the server's view, and nothing in the test calls `sync()`.
    func testThreeEnginesWithTheNetworkCutConvergeByThemselves() async throws {
        let day = Day("2026-11-24")!
        var devices: [Device] = []
        var links: [CuttableLink] = []
        var engines: [SyncEngine] = []
        let settings = SyncEngine.Settings(debounce: 0.05, interval: 2, initialBackoff: 0.2, maxBackoff: 1,
                                           liveInitialBackoff: 0.2, liveMaxBackoff: 1)
        for name in ["A", "B", "C"] {
            let link = CuttableLink(baseURL: baseURL)
            let device = try await device(name, transport: link)
            devices.append(device)
            links.append(link)
            engines.append(SyncEngine(client: device.client, settings: settings, live: link))
        }
        for engine in engines { await engine.start() }
        var generator = SystemRandomNumberGenerator()
        let end = Date().addingTimeInterval(4)
        var edits = 0
        while Date() < end {
            let index = Int.random(in: 0..<3, using: &generator)
            let device = devices[index]
            if Int.random(in: 0..<10, using: &generator) == 0 { links[index].cut.toggle() }
            let todos = try device.store.todos(from: day, to: day)
            if todos.isEmpty || Bool.random(using: &generator) {
                try device.store.addTodo(NewTodo(title: "\(device.name) \(edits)", deadline: day))
            } else {
                let todo = todos.randomElement(using: &generator)!
                _ = try? device.store.updateTodo(todo.localID, TodoChanges(title: "\(device.name) edit \(edits)"))
            }
            edits += 1
            await engines[index].localWrite()
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        for link in links { link.cut = false }
        let token = try devices[0].token
        await waitFor("every store equals the server's view", timeout: 15) {
            guard let server = try? await self.serverItems("/api/v1/todos?from=2026-11-24&to=2026-11-24", token: token) else { return false }
            let expected = server.map { "\($0["id"]?.int64Value ?? 0)/\($0["version"]?.int64Value ?? 0)" }
            return devices.allSatisfy { device in
                let local = ((try? device.store.todos(from: day, to: day)) ?? []).map { "\($0.serverID ?? 0)/\($0.version ?? 0)" }
                return local == expected && ((try? device.store.pendingCount()) ?? 1) == 0
            }
        }
        for engine in engines { await engine.stop() }
        for device in devices { try await assertEqualsServer(device) }
        XCTAssertGreaterThan(edits, 50)
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
        // --verbose: the first sync is printed even when it moves nothing (below, it is waited for).
        process.arguments = ["watch", "--json", "--verbose", "--interval", "3600", "--db", b.path]
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
        // Idle with its stream open, the watch costs (almost) no CPU: FoundationNetworking's
        // URLSession spun a core here (2 s of CPU in 2 s), hence CurlLiveStream on Linux.
        await waitFor("the stream's opening sync", timeout: 5) { lines.text.contains(#""trigger":"stream-opened""#) }
        let cpuBefore = try processCPUSeconds(process.processIdentifier)
        try await Task.sleep(nanoseconds: 2_000_000_000)
        let idleCPU = try processCPUSeconds(process.processIdentifier) - cpuBefore
        XCTAssertLessThan(idleCPU, 0.3, "CPU seconds an idle watch used in 2 s")
        // The first sync of B's empty store (from the snapshot) is over before anything is queued
        // on B; a change queued while it runs would go out with it, not as a local write.
        await waitFor("the watch's first sync", timeout: 10) { lines.text.contains(#""trigger":"start""#) }

        let day = Day("2026-11-24")!
        try a.store.addTodo(NewTodo(title: "Pushed by A", deadline: day))
        try await a.client.sync()
        await waitFor("A's todo in B's file", timeout: 2) {
            ((try? LocalStore(path: b.path, create: false).todos(from: day, to: day)) ?? []).contains { $0.title == "Pushed by A" }
        }
        // The watch prints the change itself, with how long after the server's commit it landed.
        await waitFor("the watch prints A's todo", timeout: 2) { lines.text.contains(#""label":"Pushed by A""#) }
        let printed = try XCTUnwrap(lines.text.split(separator: "\n").first { $0.contains(#""label":"Pushed by A""#) })
        let change = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(printed.utf8)) as? [String: Any])
        XCTAssertEqual(change["event"] as? String, "change")
        XCTAssertEqual(change["kind"] as? String, "todo")
        XCTAssertEqual(change["deleted"] as? Bool, false)
        let lag = try XCTUnwrap(change["lagSeconds"] as? Double, "\(change)")
        XCTAssert(lag > -0.05 && lag < 2, "lag \(lag) s after the server's change")
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
        // Whether A's change came by its poke or by a sync already under way (the stream's opening
        // sync, which a poke coalesces into) is timing; that it came within 2 s is asserted above.
        XCTAssertTrue(lines.text.contains(#""trigger":"local-write""#), lines.text)
        XCTAssertTrue(lines.text.contains(#""event":"stopped","reason":"requested""#) || lines.text.contains(#""reason":"requested""#), lines.text)
        XCTAssertEqual(try b.store.pendingCount(), 0)
    }
}

/// User + system CPU seconds a process has used so far (/proc/PID/stat, clock ticks).
func processCPUSeconds(_ pid: Int32) throws -> Double {
    let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
    // Fields after the command name, which is in parentheses and may hold spaces.
    let fields = stat[stat.index(after: stat.lastIndex(of: ")")!)...].split(separator: " ")
    let ticks = Double(fields[11])! + Double(fields[12])!  // utime, stime: fields 14 and 15 of stat
    return ticks / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// A file a child process writes to, read whole each time.
struct OutputFile {
    let path: String
    var text: String { (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
}

/// A device's network, which the test cuts and restores: requests fail as with no route, and
/// the live stream breaks and cannot reopen while cut.
final class CuttableLink: HTTPTransport, LiveStream, @unchecked Sendable {
    private let inner = URLSessionTransport()
    private let live: any LiveStream
    private let lock = NSLock()
    private var isCut = false
    private var streams: [Int: AsyncThrowingStream<LiveEvent, Error>.Continuation] = [:]
    private var nextID = 0

    init(baseURL: URL) { live = defaultLiveStream(baseURL: baseURL) }

    var cut: Bool {
        get { lock.withLock { isCut } }
        set {
            let broken = lock.withLock { () -> [AsyncThrowingStream<LiveEvent, Error>.Continuation] in
                isCut = newValue
                return newValue ? Array(streams.values) : []
            }
            for stream in broken { stream.finish(throwing: URLError(.networkConnectionLost)) }
        }
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        if cut { throw URLError(.notConnectedToInternet) }
        let answer = try await inner.send(request)
        if cut { throw URLError(.networkConnectionLost) }
        return answer
    }

    func open(token: String, schemaVersion: Int) -> AsyncThrowingStream<LiveEvent, Error> {
        AsyncThrowingStream { continuation in
            let id = lock.withLock { () -> Int? in
                guard !isCut else { return nil }
                nextID += 1
                streams[nextID] = continuation
                return nextID
            }
            guard let id else { return continuation.finish(throwing: URLError(.notConnectedToInternet)) }
            let forward = Task {
                do {
                    for try await event in live.open(token: token, schemaVersion: schemaVersion) { continuation.yield(event) }
                    continuation.finish()
                } catch {
                    continuation.finish(throwing: error)
                }
            }
            continuation.onTermination = { [weak self] _ in
                forward.cancel()
                self?.lock.withLock { _ = self?.streams.removeValue(forKey: id) }
            }
        }
    }
}
