#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TodoSyncCore
import XCTest
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@testable import TodoSyncClient

/// Live sync under faults, through the real stack (issue 22, "Faults"): nginx reloaded and
/// restarted, the publisher down or hung, responders killed and MariaDB stopped under running
/// engines. Nothing here calls `sync()` on a device that has an engine: every device catches up
/// by itself, and each test checks the path that must carry the change (the pull on reopening,
/// a poke, the periodic pull).
final class LiveFaultStackTests: StackTestCase {
    private let day = Day("2026-11-24")!

    /// A device with an engine, and the engine's event log.
    private struct Watched {
        let device: Device
        let engine: SyncEngine
        let log: EventLog
    }

    private func watched(_ name: String, _ settings: SyncEngine.Settings,
                         retry: RetryPolicy = RetryPolicy(maxAttempts: 8, initialDelay: 0.1, maxDelay: 2)) async throws -> Watched {
        let device = try await device(name, retry: retry)
        // The jitter at its ceiling: each wait is exactly the backoff, so the test knows when a
        // stream reopens (the engine's jitter itself is SyncEngineTests').
        let engine = SyncEngine(client: device.client, settings: settings, random: { $0.upperBound })
        return Watched(device: device, engine: engine, log: EventLog(engine))
    }

    private func startAll(_ all: [Watched]) async {
        for one in all { await one.engine.start() }
        await waitFor("every stream open and every first sync done", timeout: 10) {
            all.allSatisfy { $0.log.events.contains(.connected) && !$0.log.synced.isEmpty }
        }
        for one in all { await settle(one.engine) }
    }

    private func has(_ device: Device, _ title: String) -> Bool {
        ((try? device.store.todos(from: day, to: day)) ?? []).contains { $0.title == title }
    }

    /// A adds a todo and pushes it; returns how long the push (and its pull) took.
    @discardableResult
    private func write(_ a: Device, _ title: String) async throws -> Double {
        try a.store.addTodo(NewTodo(title: title, deadline: day))
        let start = Date()
        try await a.client.sync()
        return Date().timeIntervalSince(start)
    }

    private func waitHealthy(timeout: Double = 20) async {
        await waitFor("the stack answers /healthz", timeout: timeout) {
            var request = URLRequest(url: self.baseURL.appendingPathComponent("/healthz"))
            request.timeoutInterval = 2
            return (try? await URLSessionTransport().send(request))?.1.statusCode == 200
        }
    }

    // MARK: nginx reload and restart

    /// Three devices subscribed; nginx is reloaded, then restarted (its master stopped with
    /// SIGTERM and started again by its supervisor). Each time: every stream ends; a write made
    /// in the gap (nginx back, the streams not yet reopened) reaches every device through the
    /// pull on reopening; a write after the streams reopened reaches every device through a
    /// poke within 2 s. The timer is an hour away, so only these two paths can bring them.
    func testEveryDeviceCatchesUpAcrossAnNginxReloadAndAnNginxRestart() async throws {
        let a = try await device("A")
        // Reopening 6 s after a stream ended: behind the connection cap an old worker's streams end
        // within worker_shutdown_timeout (3 s) of a reload, not all at once, and the write in the gap
        // must come before the first of them reopens.
        let settings = SyncEngine.Settings(interval: 3600, liveInitialBackoff: 6, liveMaxBackoff: 12)
        var devices: [Watched] = []
        for name in ["B", "C", "D"] { devices.append(try await watched(name, settings)) }
        await startAll(devices)

        for fault in ["reload", "restart"] {
            let opened = devices.map { $0.log.connections }
            let closed = devices.map { $0.log.disconnections }
            if fault == "reload" {
                try Stack.command(["up"])  // nginx: configuration reloaded, old workers end their streams
            } else {
                try Stack.restartNginx()
            }
            // A reload ends an old worker's streams when it exits: behind the per-address
            // connection cap (nginx's stream module) that is at worker_shutdown_timeout (3 s),
            // since the stream server's sessions hold timers nginx waits for (docs/OPERATIONS.md,
            // "Slow and greedy clients").
            await waitFor("every stream ended by the \(fault)", timeout: 10) {
                zip(devices, closed).allSatisfy { $0.log.disconnections > $1 }
            }
            await waitHealthy()
            // The gap: nginx is back and nchan's channels are empty; the engines reopen 6 s after
            // their stream ended. A write now has no subscriber to poke.
            try await write(a, "During the \(fault)")
            XCTAssertEqual(devices.map { $0.log.connections }, opened, "a stream reopened before the gap write: not a gap")
            await waitFor("every device has the write made during the \(fault)", timeout: 15) {
                devices.allSatisfy { self.has($0.device, "During the \(fault)") }
            }
            await waitFor("every stream reopened after the \(fault)", timeout: 15) {
                zip(devices, opened).allSatisfy { $0.log.connections > $1 }
            }
            for one in devices { await settle(one.engine) }

            let poked = devices.map { $0.log.synced.filter { $0 == .poke }.count }
            try await write(a, "After the \(fault)")
            await waitFor("every device has the write made after the \(fault) within 2 s", timeout: 2) {
                devices.allSatisfy { self.has($0.device, "After the \(fault)") }
            }
            await waitFor("each device pulled it because of a poke", timeout: 2) {
                zip(devices, poked).allSatisfy { $0.log.synced.filter { $0 == .poke }.count > $1 }
            }
        }
        for one in devices { await one.engine.stop() }
        for one in devices { try await assertEqualsServer(one.device) }
    }

    // MARK: The publisher down

    /// The publisher's socket gone (nginx's publisher unreachable), then a publisher that accepts
    /// and never answers (a hung nchan): each write still succeeds, within a bound, is counted in
    /// `/metrics` and logged; no poke arrives, and the engines' periodic pull (1.5 s here) brings
    /// both writes to every device. With the publisher back, the next write pokes again.
    func testWithThePublisherDownEveryWriteSucceedsAndThePeriodicPullCatchesUp() async throws {
        let publisher = try XCTUnwrap(Stack.environment()["TODOSYNC_LIVE_PUBLISHER"], "the stack sets TODOSYNC_LIVE_PUBLISHER")
        XCTAssertTrue(FileManager.default.fileExists(atPath: publisher), publisher)
        let a = try await device("A")
        let settings = SyncEngine.Settings(interval: 1.5, liveInitialBackoff: 1, liveMaxBackoff: 2)
        let devices = [try await watched("B", settings), try await watched("C", settings)]
        await startAll(devices)
        let failedBefore = try await publishFailures()
        let eventsBefore = devices.map { $0.log.events.count }

        let aside = publisher + ".down"
        XCTAssertEqual(rename(publisher, aside), 0, "move the publisher's socket away")
        var restored = false
        let failingFrom = Date()
        defer { if !restored { unlink(publisher); rename(aside, publisher) } }
        let refused = try await write(a, "Publisher gone")
        let hung = try HungListener(path: publisher)
        let silent = try await write(a, "Publisher hung")
        hung.close()
        XCTAssertEqual(rename(aside, publisher), 0, "put the publisher's socket back")
        restored = true
        // A push and its pull on loopback take milliseconds; the publish may add its timeout
        // (100 ms per step) but never fails or holds the write for long.
        XCTAssertLessThan(refused, 1.5, "a write with the publisher gone took \(refused) s")
        XCTAssertLessThan(silent, 1.5, "a write with the publisher hung took \(silent) s")
        let failedAfter = try await publishFailures()
        XCTAssertEqual(failedAfter - failedBefore, 2, "each unpublished poke is counted in /metrics")
        // Logged: a line now, or one less than 10 s before (each process logs at most once per
        // 10 s; a publish that timed out under load in an earlier test may have taken the turn).
        let parser = ISO8601DateFormatter()
        parser.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let lastLogged = Stack.responderLogs().joined(separator: "\n").split(separator: "\n")
            .filter { $0.contains("live-sync poke not published") }
            .compactMap { line -> Date? in
                guard let object = (try? JSONParser.parse(Array(line.utf8)))?.objectValue, let ts = object["ts"]?.stringValue else { return nil }
                return parser.date(from: ts)
            }.max()
        XCTAssertNotNil(lastLogged, "the failure is logged")
        if let lastLogged { XCTAssertGreaterThan(lastLogged, failingFrom.addingTimeInterval(-10.5), "the failure is logged") }

        func timerSynced(_ one: Watched, since before: Int) -> Bool {
            one.log.events.dropFirst(before).contains { if case .synced(_, .timer) = $0 { return true } else { return false } }
        }
        await waitFor("the periodic pull brings both writes to every device", timeout: 5) {
            zip(devices, eventsBefore).allSatisfy {
                self.has($0.device, "Publisher gone") && self.has($0.device, "Publisher hung") && timerSynced($0, since: $1)
            }
        }
        for (one, before) in zip(devices, eventsBefore) {
            let since = one.log.events.dropFirst(before)
            XCTAssertFalse(since.contains { if case .poke = $0 { return true } else { return false } }, "a poke arrived: \(since)")
        }

        let poked = devices.map { $0.log.synced.filter { $0 == .poke }.count }
        try await write(a, "Publisher back")
        await waitFor("the publisher is back: a poke brings the next write", timeout: 1.4) {
            zip(devices, poked).allSatisfy { self.has($0.device, "Publisher back") && $0.log.synced.filter { $0 == .poke }.count > $1 }
        }
        for one in devices { await one.engine.stop() }
        for one in devices { try await assertEqualsServer(one.device) }
    }

    /// `todosync_live_publishes_total{result="failed"}` summed over the responders.
    private func publishFailures() async throws -> Double {
        let (data, response) = try await URLSessionTransport().send(URLRequest(url: baseURL.appendingPathComponent("/metrics")))
        guard response.statusCode == 200 else { throw TestFailure("GET /metrics: HTTP \(response.statusCode)") }
        return String(decoding: data, as: UTF8.self).split(separator: "\n")
            .filter { $0.hasPrefix("todosync_live_publishes_total{") && $0.contains(#"result="failed""#) }
            .compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }
            .reduce(0, +)
    }

    // MARK: Responders killed, MariaDB stopped

    /// Three engines on one account edit at random for a few seconds while every responder is
    /// killed with SIGKILL (its supervisor starts it again) and MariaDB is stopped and started:
    /// every store ends equal to the server's view, with nothing left to send, and nothing in
    /// the test calls `sync()`.
    func testEnginesConvergeAfterRespondersAreKilledAndMariaDBStopsAndStarts() async throws {
        addTeardownBlock { try? Stack.command(["db-start"]) }  // never leave the stack without its database
        let settings = SyncEngine.Settings(debounce: 0.05, interval: 2, initialBackoff: 0.2, maxBackoff: 1,
                                           liveInitialBackoff: 0.2, liveMaxBackoff: 1)
        var devices: [Watched] = []
        // Few retries inside a sync: the outages reach the engines, whose own backoff must retry.
        let retry = RetryPolicy(maxAttempts: 2, initialDelay: 0.1, maxDelay: 0.2)
        for name in ["A", "B", "C"] { devices.append(try await watched(name, settings, retry: retry)) }
        await startAll(devices)

        let token = try devices[0].device.token
        let killed = try Stack.responderPIDs()
        XCTAssertFalse(killed.isEmpty)
        let base = baseURL!
        let faults = Task.detached { () throws -> Int in
            try await Task.sleep(nanoseconds: 1_000_000_000)
            for pid in killed { kill(pid, SIGKILL) }
            try await Task.sleep(nanoseconds: 1_500_000_000)
            try Stack.command(["db-stop"])
            // The outage is real: a read needs the database.
            var probe = URLRequest(url: base.appendingPathComponent("/api/v1/tags"))
            probe.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let status = (try? await URLSessionTransport().send(probe))?.1.statusCode ?? 0
            try await Task.sleep(nanoseconds: 1_500_000_000)
            try Stack.command(["db-start"])
            return status
        }
        var generator = SystemRandomNumberGenerator()
        var edits = 0
        let editUntil = Date().addingTimeInterval(6)
        while Date() < editUntil {
            let one = devices.randomElement(using: &generator)!
            let todos = try one.device.store.todos(from: day, to: day)
            if todos.isEmpty || Bool.random(using: &generator) {
                try one.device.store.addTodo(NewTodo(title: "\(one.device.name) \(edits)", deadline: day))
            } else {
                _ = try? one.device.store.updateTodo(todos.randomElement(using: &generator)!.localID,
                                                     TodoChanges(title: "\(one.device.name) edit \(edits)"))
            }
            edits += 1
            await one.engine.localWrite()
            try await Task.sleep(nanoseconds: 30_000_000)
        }
        let duringOutage = try await faults.value
        XCTAssertTrue(Set(try Stack.responderPIDs()).isDisjoint(with: killed), "the responders were restarted")
        XCTAssertTrue((500...599).contains(duringOutage), "with MariaDB stopped a read answers 5xx, got \(duringOutage)")
        XCTAssertTrue(devices.contains { !$0.log.failures.isEmpty }, "the faults reached the engines (a sync failed)")

        await waitFor("every store equals the server's view", timeout: 30) {
            guard let server = try? await self.serverItems("/api/v1/todos?from=2026-11-24&to=2026-11-24", token: token) else { return false }
            let expected = server.map { "\($0["id"]?.int64Value ?? 0)/\($0["version"]?.int64Value ?? 0)" }
            return devices.allSatisfy { one in
                let local = ((try? one.device.store.todos(from: self.day, to: self.day)) ?? [])
                    .map { "\($0.serverID ?? 0)/\($0.version ?? 0)" }
                return local == expected && ((try? one.device.store.pendingCount()) ?? 1) == 0
            }
        }
        for one in devices { await one.engine.stop() }
        for one in devices { try await assertEqualsServer(one.device) }
        XCTAssertGreaterThan(edits, 50)
    }
}

extension EventLog {
    var connections: Int { events.filter { $0 == .connected }.count }
    var disconnections: Int { events.filter { if case .disconnected = $0 { return true } else { return false } }.count }
}

extension Stack {
    /// The stack's configuration (`stack.sh env`: KEY=VALUE lines).
    static func environment() throws -> [String: String] {
        var values: [String: String] = [:]
        for line in try output(["env"]).split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    static func responderPIDs() throws -> [pid_t] {
        try output(["responder-pids"]).split(separator: "\n").compactMap { pid_t($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// The test stack's state directory (logs in log/, nginx's pid in nginx/nginx.pid).
    static var stateDirectory: String {
        get throws {
            guard let state = ProcessInfo.processInfo.environment["TODOSYNC_TEST_STATE_DIR"] else {
                throw XCTSkip("TODOSYNC_TEST_STATE_DIR is not set")
            }
            return state
        }
    }

    /// The responders' log files, whole, in index order.
    static func responderLogs() -> [String] {
        guard let log = try? stateDirectory + "/log" else { return [] }
        return (1...16).compactMap { try? String(contentsOfFile: "\(log)/responder-\($0).log", encoding: .utf8) }
    }

    /// Stops nginx's master with SIGTERM (fast shutdown: every connection closes) and waits until
    /// its supervisor has started a new one.
    static func restartNginx() throws {
        let pidFile = try stateDirectory + "/nginx/nginx.pid"
        func current() -> pid_t? {
            (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        guard let old = current() else { throw TestFailure("no nginx pid in \(pidFile)") }
        guard kill(old, SIGTERM) == 0 else { throw TestFailure("kill nginx \(old): errno \(errno)") }
        let end = Date().addingTimeInterval(15)
        while Date() < end {
            if let new = current(), new != old, kill(new, 0) == 0 { return }
            usleep(20_000)
        }
        throw TestFailure("nginx did not come back after SIGTERM")
    }
}

/// A Unix socket that accepts connections into its backlog and never answers: a publisher that
/// hangs (connect and send succeed, the answer never comes).
final class HungListener {
    private var fd: Int32
    let path: String

    init(path: String) throws {
        self.path = path
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0, listen(fd, 64) == 0 else { throw TestFailure("bind/listen \(path): errno \(errno)") }
        chmod(path, 0o666)  // as nginx's own publisher socket: the responders' user connects
    }

    func close() {
        guard fd >= 0 else { return }
        Glibc.close(fd)
        fd = -1
        unlink(path)
    }

    deinit { close() }
}
