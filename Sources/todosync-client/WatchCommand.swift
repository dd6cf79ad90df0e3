import ArgumentParser
import Dispatch
import Foundation
import TodoSyncClient
import TodoSyncCore

struct Watch: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Keep this store in sync until Ctrl-C: live pokes, a periodic pull, retries by themselves.",
        discussion: """
            Runs a SyncEngine in the foreground (docs/CLIENT-CLI.md "watch"): syncs at once, on \
            every poke from the server's live stream, after changes queued meanwhile by other \
            invocations on the same store, every --interval seconds, and after failures with a \
            jittered backoff. Another invocation's change is noticed when the store file changes \
            (Linux: inotify), or by a check every --check-every seconds (--poll-store, or other \
            platforms). Prints one line per sync that moved something and per status \
            change (with --json: one JSON object per line). With --friends the stream also \
            carries friends events: a line when a friend's month changes (`friend N: month \
            changed`) or the friends list or requests do. SIGINT/SIGTERM stop it cleanly \
            (exit 0); 426 exits 5, a refused login 1.
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "Seconds between periodic pulls (pokes can be lost).") var interval: Double = 60
    @Option(help: "Seconds with no other change after a change queued by another invocation before it is synced.") var quiet: Double = 0.02
    @Option(help: "Longest wait, in seconds, from a burst's first change to its sync while changes keep coming.") var debounce: Double = 0.3
    // 20 ms (issue 39, item 6): `PRAGMA data_version` is one read of the file's header, and the
    // check was most of the delay from a write to the other device (0.5 s: 604 ms p50). Where
    // the platform tells of the file's changes (Linux: inotify) the watch wakes on them instead,
    // and this is only the poll of --poll-store or of a platform without.
    @Option(help: "Seconds between checks of the store file for changes of other invocations, when it is polled (--poll-store, or no inotify).")
    var checkEvery: Double = 0.02
    @Flag(help: "Poll the store file every --check-every seconds instead of waking when it changes (Linux inotify).")
    var pollStore = false
    @Flag(help: "No live stream: only the periodic pull and local changes.") var noLive = false
    @Flag(help: "Also print syncs that moved nothing.") var verbose = false
    @Flag(help: "Also watch friends: a line when a friend's month, the friends list or the requests change.")
    var friends = false

    func validate() throws {
        for (name, value) in [("--interval", interval), ("--check-every", checkEvery)] where !(value > 0 && value.isFinite) {
            throw ValidationError("\(name) must be a positive number of seconds")
        }
        for (name, value) in [("--debounce", debounce), ("--quiet", quiet)] where !(value >= 0 && value.isFinite) {
            throw ValidationError("\(name) must be 0 or more seconds")
        }
        if friends && noLive { throw ValidationError("--friends needs the live stream: drop --no-live") }
    }

    func run() async throws {
        let store = try options.openStore()
        let client = try options.client(store)
        let engine = SyncEngine(client: client, settings: SyncEngine.Settings(
            debounce: debounce, interval: interval, live: !noLive, storeCheckInterval: checkEvery, quiet: quiet,
            storeWake: pollStore ? .poll : .onChange))
        let signals = StopSignals { Task { await engine.stop() } }
        defer { signals.cancel() }
        let printer = WatchPrinter(json: options.json, verbose: verbose)
        await engine.start()
        // Reading the engine's friend signals is what opens the stream with friends=1; the
        // lines come from the engine's `.friend` events below.
        let friendWatch = friends ? Task {
            for await _ in await engine.friendSignals() {}
        } : nil
        defer { friendWatch?.cancel() }
        var reason = SyncEngine.StopReason.requested
        for await event in engine.events {
            printer.show(event)
            if case .stopped(let why) = event { reason = why }
        }
        switch reason {
        case .requested: return
        case .upgradeRequired(let required): throw ClientFailure(sync: .upgradeRequired(required), prefix: "Stopped: ")
        case .loginRequired: throw ClientFailure(sync: .unauthorized, prefix: "Stopped: ")
        }
    }
}

/// SIGINT and SIGTERM call `handler` once (the engine then ends the watch) instead of killing
/// the process mid-write.
final class StopSignals: @unchecked Sendable {
    private var sources: [DispatchSourceSignal] = []

    init(_ handler: @escaping @Sendable () -> Void) {
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler(handler: handler)
            source.resume()
            sources.append(source)
        }
    }

    func cancel() {
        for source in sources { source.cancel() }
    }
}

/// One line per event worth a line, human or JSON (docs/CLIENT-CLI.md "watch").
struct WatchPrinter {
    let json: Bool
    let verbose: Bool

    func show(_ event: SyncEngine.Event) {
        let at = Self.seconds.string(from: Date())
        var fields: [String: JSONValue] = ["at": .string(at)]
        let line: String?
        switch event {
        case .syncing:
            return
        case .synced(let report, let trigger):
            let moved = report.operationsSent > 0 || report.recordsPulled > 0
            guard moved || verbose || json else { return }
            for change in report.changes { showChange(change) }
            fields["event"] = .string("synced")
            fields["trigger"] = .string(trigger.rawValue)
            fields["sent"] = .int(Int64(report.operationsSent))
            fields["pulled"] = .int(Int64(report.recordsPulled))
            line = "synced (\(trigger.rawValue)): sent \(report.operationsSent), pulled \(report.recordsPulled)"
        case .failed(let message, let offline, let retryIn):
            fields["event"] = .string(offline ? "offline" : "failed")
            fields["message"] = .string(message)
            fields["retryIn"] = .number(JSONNumber(literal: String(format: "%.3f", retryIn)))
            line = "\(offline ? "offline" : "sync failed"): \(message); retrying in \(Self.seconds(retryIn)) s"
        case .connected:
            fields["event"] = .string("connected")
            line = "live: connected"
        case .disconnected(let reason, let retryIn):
            fields["event"] = .string("disconnected")
            fields["message"] = .string(reason)
            fields["retryIn"] = .number(JSONNumber(literal: String(format: "%.3f", retryIn)))
            line = "live: disconnected (\(reason)); reconnecting in \(Self.seconds(retryIn)) s"
        case .poke(let version, let deviceID):
            fields["event"] = .string("poke")
            fields["version"] = .int(version)
            fields["deviceId"] = deviceID.map(JSONValue.string) ?? .null
            guard verbose || json else { return }
            line = "poke: version \(version)"
        case .friend(let friendID):
            fields["event"] = .string("friend")
            fields["friendId"] = friendID.map(JSONValue.int) ?? .null
            line = friendID.map { "friend \($0): month changed" } ?? "friends: list or requests changed"
        case .reachability(let up):
            fields["event"] = .string(up ? "online" : "offline")
            line = up ? "network: back" : "network: gone"
        case .stopped(let reason):
            fields["event"] = .string("stopped")
            switch reason {
            case .requested: fields["reason"] = .string("requested")
            case .upgradeRequired: fields["reason"] = .string("upgrade_required")
            case .loginRequired: fields["reason"] = .string("login_required")
            }
            line = json ? nil : "stopped"
        }
        if json {
            print(JSONText.encode(.object(fields)))
        } else if let line {
            print("\(at) \(line)")
        }
        fflush(nil)
    }

    static func seconds(_ value: Double) -> String { String(format: "%.1f", value) }

    /// One line per record a pull brought (a window's `left` too: "left the window", forgotten),
    /// with how long after the server's change it is in the store (its `updatedAt`/`deletedAt` against this machine's clock: meaningful when the
    /// clocks agree, as on one host or with NTP).
    func showChange(_ change: PulledChange) {
        let now = Date()
        let lag = change.changedAt.flatMap { Self.timestamp.date(from: $0) }.map { now.timeIntervalSince($0) }
        if json {
            var fields: [String: JSONValue] = [
                "at": .string(Self.seconds.string(from: now)), "event": .string("change"),
                "kind": .string(change.kind.rawValue), "deleted": .bool(change.deleted), "left": .bool(change.left),
                "id": change.id.map(JSONValue.int) ?? .null, "version": change.version.map(JSONValue.int) ?? .null,
                "label": change.label.map(JSONValue.string) ?? .null, "changedAt": change.changedAt.map(JSONValue.string) ?? .null,
            ]
            if let lag { fields["lagSeconds"] = .number(JSONNumber(literal: String(format: "%.3f", lag))) }
            print(JSONText.encode(.object(fields)))
        } else {
            let what = change.deleted ? "deleted" : change.left ? "left the window" : "changed"
            let label = change.label.map { " \"\($0)\"" } ?? ""
            let after = lag.map { String(format: " (%.3f s after the server)", $0) } ?? ""
            print("\(Self.seconds.string(from: now)) \(change.kind.rawValue) \(change.id.map(String.init) ?? "?")\(label) \(what)\(after)")
        }
    }

    /// The time of an output line: RFC 3339 UTC to the second (one formatter, not one a line).
    nonisolated(unsafe) static let seconds = ISO8601DateFormatter()

    /// The contract's timestamps: RFC 3339 UTC with milliseconds.
    nonisolated(unsafe) static let timestamp: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}
