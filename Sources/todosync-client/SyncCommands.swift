import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push queued changes, then pull everything new.",
        discussion: """
            Changes stay queued whatever happens; the exit code says what did (the table: \
            `todosync-client --help`). Another process syncing this store is reported ("Sync \
            already running on STORE"), not waited for. Progress goes to stderr, only on a \
            terminal or with --progress. The first sync of an empty store starts from the \
            server's snapshot when it offers one (docs/CLIENT.md).
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "merge, reject, client-wins, or ask (conflicts go to `conflicts`).") var policy: String = "merge"
    @Option(help: "Records per pull page (1 to 1000).") var pageSize: Int = 1000
    @Flag(help: "No progress output.") var quiet = false
    @Flag(help: "Progress on stderr even when it is not a terminal.") var progress = false
    @Flag(help: "Print how long the sync took (for benchmarks).") var timing = false
    @Flag(help: "A first sync pulls page by page even when the server offers a snapshot.") var noSnapshot = false
    @OptionGroup var window: WindowOptions

    func run() async throws {
        guard let conflictPolicy = ConflictStrategy(rawValue: policy) else {
            throw ValidationError("--policy must be one of: merge, reject, client-wins, ask")
        }
        let setting = try window.setting()
        let store = try options.openStore()
        if let setting { try store.setWindowSetting(setting) }
        let client = try options.client(store, useSnapshot: !noSnapshot)
        let out = options.output
        let bar = ProgressBar(enabled: !quiet && !options.json && (progress || isatty(STDERR_FILENO) != 0))
        let queuedBefore = Set(try store.operations(historyLimit: 0).map(\.opID))
        let started = Date()
        let report: SyncReport
        do {
            report = try await client.sync(policy: conflictPolicy, pageSize: pageSize) { bar.update($0) }
            bar.finish()
        } catch let error as SyncError {
            bar.finish()
            let pending = try store.pendingCount()
            let extra: [String: JSONValue] = ["queued": .int(pending)]
            switch error {
            case .alreadyRunning:
                throw ClientFailure(.syncRunning, "Sync already running on \(options.db)", extra: extra)
            case .upgradeRequired:
                var failure = ClientFailure(sync: error, prefix: "Not synced: ", extra: extra)
                failure.message += "; \(pending) change(s) are queued."
                throw failure
            case .timedOut:
                var failure = ClientFailure(sync: error, prefix: "Not synced: ", extra: extra)
                failure.message += "."
                throw failure
            case .offline, .unavailable:
                var failure = ClientFailure(sync: error, prefix: "Not synced: ", extra: extra)
                failure.message += ". \(pending) change(s) stay queued and go out with the next sync."
                throw failure
            default:
                var failure = ClientFailure(sync: error, prefix: "Not synced: ", extra: extra)
                failure.message += ". \(pending) change(s) stay queued."
                throw failure
            }
        }
        let seconds = Date().timeIntervalSince(started)
        if timing {
            out.say(String(format: "sync_seconds=%.4f", seconds) + " pull_bytes=\(report.bytesPulled)")
            if !report.snapshotPhases.isEmpty {
                out.say("snapshot_phases " + report.snapshotPhases.map { "\($0.name)=" + String(format: "%.3f", $0.seconds) }.joined(separator: " "))
            }
        }
        var parts = ["sent \(report.operationsSent) change(s)"]
        let sortedResults = report.results.sorted { $0.key.rawValue < $1.key.rawValue }
        let results = sortedResults.map { "\($0.value) \($0.key.rawValue)" }
        if !results.isEmpty { parts.append("(" + results.joined(separator: ", ") + ")") }
        parts.append("pulled \(report.recordsPulled) record(s) in \(report.pages) page(s)")
        if report.resyncedAfterExpiry { parts.append("after a full resync (the server's history moved on)") }
        if case .installed(let records, let bytes) = report.snapshot {
            parts.append("after installing a snapshot of \(records) record(s) (\(ProgressBar.megabytes(bytes)) MB downloaded)")
        }
        if report.windowChanged { parts.append("of a new window, pulled anew") }
        if report.recordsLeft > 0 { parts.append("\(report.recordsLeft) of them left the window (forgotten)") }
        out.say("Synced: " + parts.joined(separator: " ") + ".")
        if !report.window.isWhole { out.say("This device holds \(report.window).") }
        if case .refused(let reason) = report.snapshot { out.say("The server's snapshot was refused (\(reason)); pulled page by page instead.") }
        let outcomes = try store.operations(historyLimit: 1000).filter { queuedBefore.contains($0.opID) }
        let settled = try SettledChanges(outcomes, policy: conflictPolicy, store: store)
        for line in settled.lines { out.say(line) }
        let status = try store.status()
        if status.conflicts > 0 { out.say("\(status.conflicts) conflict(s) wait for you: `todosync-client conflicts`.") }
        if status.rejected > 0 { out.say("\(status.rejected) change(s) were rejected: `todosync-client rejected`.") }
        out.finish(json: .object([
            "sent": .int(report.operationsSent),
            "results": .object(Dictionary(uniqueKeysWithValues: sortedResults.map { ($0.key.rawValue, JSONValue.int($0.value)) })),
            "pulled": .int(report.recordsPulled), "pages": .int(report.pages), "fullPull": .bool(report.fullPull),
            "resyncedAfterExpiry": .bool(report.resyncedAfterExpiry), "pending": .int(status.pending),
            "snapshot": Render.snapshot(report.snapshot),
            "window": WindowRender.json(report.window), "windowChanged": .bool(report.windowChanged), "left": .int(report.recordsLeft),
            "conflicts": .int(status.conflicts), "rejected": .int(status.rejected),
            "seconds": .number(JSONNumber(literal: String(format: "%.4f", seconds))),
            "kept": .array(settled.kept.map(Render.operation)), "dropped": .array(settled.dropped.map(Render.operation)),
        ]))
        if status.conflicts > 0 { throw ExitCode(ClientExit.conflictsWaiting.rawValue) }
    }
}

struct Conflicts: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Conflicts waiting for a decision (sync --policy ask).")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let conflicts = try options.openStore().conflicts()
        let out = options.output
        if conflicts.isEmpty { out.say("No conflicts.") }
        for conflict in conflicts {
            out.say("conflict \(conflict.conflictID): \(conflict.action.rawValue) of \(conflict.entity.rawValue) \(conflict.recordLocalID)")
            for field in conflict.local.keys.sorted() {
                out.say("  \(field): base \(show(conflict.base[field])), mine \(show(conflict.local[field])), theirs \(show(conflict.server[field]))")
            }
            if let deletedAt = conflict.server["deletedAt"], deletedAt != .null { out.say("  deleted on the server") }
        }
        out.finish(json: .object(["conflicts": .array(conflicts.map { conflict in
            .object([
                "conflictId": .int(conflict.conflictID), "opId": .string(conflict.opID),
                "entity": .string(conflict.entity.rawValue), "action": .string(conflict.action.rawValue),
                "localId": .int(conflict.recordLocalID), "base": .object(conflict.base), "mine": .object(conflict.local),
                "theirs": .object(conflict.server), "serverVersion": .int(conflict.serverVersion),
            ])
        })]))
    }

    private func show(_ value: JSONValue?) -> String {
        switch value {
        case nil: return "-"
        case .string(let text)?: return "\"\(text)\""
        case .number(let number)?: return number.literal
        case .bool(let flag)?: return String(flag)
        case .null?: return "null"
        default: return "…"
        }
    }
}

struct Resolve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Settle a conflict: --mine, --theirs, or new values of any synced field (e.g. --title).")
    @OptionGroup var options: StoreOptions
    @Argument var conflict: Int64
    @Flag var mine = false
    @Flag var theirs = false
    @OptionGroup var todo: ResolveTodoOptions
    @Option(help: "A tag's name.") var name: String?
    @Option(help: "A tag's color (#RRGGBB).") var color: String?

    func run() throws {
        let store = try options.openStore()
        let resolution: ConflictResolution
        if mine {
            resolution = .keepMine
        } else if theirs {
            resolution = .takeTheirs
        } else {
            let fields = try values(store)
            guard !fields.isEmpty else { throw ValidationError("give --mine, --theirs, or values such as --title") }
            resolution = .edited(fields)
        }
        try store.resolveConflict(conflict, resolution)
        let pending = try store.pendingCount()
        options.output.finish(
            human: "Resolved conflict \(conflict); \(pending) change(s) waiting to sync.",
            json: .object(["resolved": .int(conflict), "pending": .int(pending)]))
    }

    /// The given values under the contract's field names (a tag by its server id).
    private func values(_ store: LocalStore) throws -> [String: JSONValue] {
        var fields = try todo.values(store)
        if let name { fields["name"] = .string(name) }
        if let color { fields["color"] = .string(color) }
        return fields
    }
}

/// What a sync's conflicts did to the changes it sent: under `merge`, the fields that kept the
/// server's value (`kept`); under `reject`, the changes dropped whole (`dropped`). `sync` prints
/// them after its summary line; `operations` shows them later.
struct SettledChanges {
    var kept: [OperationInfo] = []
    var dropped: [OperationInfo] = []
    var lines: [String] = []

    init(_ outcomes: [OperationInfo], policy: ConflictStrategy, store: LocalStore) throws {
        for op in outcomes {
            let what = try SettledChanges.name(op, store)
            if op.status == .merged, !op.conflictingFields.isEmpty {
                kept.append(op)
                lines.append("  kept the server's \(op.conflictingFields.joined(separator: ", ")) of \(what) (merge)")
            } else if op.status == .conflict, policy != .askApp {
                dropped.append(op)
                lines.append("  dropped your \(op.action.rawValue) of \(what) (\(op.fields.joined(separator: ", "))): the server's version stays (\(policy.rawValue))")
            }
        }
    }

    /// `todo 3 "Plan"`, `tag 2 "Work"` (without the title when the record is gone).
    static func name(_ op: OperationInfo, _ store: LocalStore) throws -> String {
        let title: String?
        switch op.entity {
        case .todo: title = try store.todo(op.recordLocalID)?.title
        case .tag: title = try store.tag(op.recordLocalID)?.name
        }
        return "\(op.entity.rawValue) \(op.recordLocalID)" + (title.map { " \"\($0)\"" } ?? "")
    }
}

/// One operation as `status` and `operations` show it.
func operationLine(_ op: OperationInfo, _ store: LocalStore) throws -> String {
    "\(op.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(op.action.rawValue) \(try SettledChanges.name(op, store)) \(op.fields.joined(separator: ","))  op \(op.opID)"
}

struct Operations: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The outbox, then the last results: which fields kept the server's value, which changes were dropped.")
    @OptionGroup var options: StoreOptions
    @Option(help: "How many final results to show (newest first).") var last: Int = 20

    func run() throws {
        let store = try options.openStore()
        let operations = try store.operations(historyLimit: max(0, last))
        if operations.isEmpty { options.output.say("No operations.") }
        for op in operations {
            var line = try operationLine(op, store)
            if op.status == .merged, !op.conflictingFields.isEmpty {
                line += "  kept the server's: \(op.conflictingFields.joined(separator: ","))"
            }
            if op.status == .conflict { line += "  dropped (the server's version stays, or see `conflicts`)" }
            if let code = op.errorCode { line += "  \(code): \(op.errorMessage ?? "")" }
            options.output.say(line)
        }
        options.output.finish(json: .object(["operations": .array(operations.map(Render.operation))]))
    }
}

struct Rejected: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Changes the server refused (kept until acknowledged).")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let rejected = try options.openStore().operations(historyLimit: 0).filter { $0.status == .rejected }
        if rejected.isEmpty { options.output.say("No rejected changes.") }
        for op in rejected {
            options.output.say("op \(op.opID): \(op.action.rawValue) \(op.entity.rawValue) \(op.recordLocalID): \(op.errorCode ?? "") \(op.errorMessage ?? "")")
        }
        options.output.finish(json: .object(["rejected": .array(rejected.map(Render.operation))]))
    }
}

struct Acknowledge: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ack", abstract: "Acknowledge a rejected change (the record returns to the server's state).")
    @OptionGroup var options: StoreOptions
    @Argument var opID: String

    func run() throws {
        try options.openStore().acknowledgeRejected(opID)
        options.output.finish(human: "Acknowledged \(opID).", json: .object(["acknowledged": .string(opID)]))
    }
}

struct ExportPending: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export-pending",
        abstract: "Print the changes a store still queues, read-only (also from a damaged store).",
        discussion: "Always one JSON document: {\"store\": PATH, \"pending\": [...]}; keep it before replacing a store.")
    @OptionGroup var options: StoreOptions

    func run() throws {
        guard FileManager.default.fileExists(atPath: options.db) else { _ = try options.openStore(); return }
        let changes: [PendingChange]
        do {
            changes = try LocalStore.pendingChanges(atPath: options.db)
        } catch {
            throw ClientFailure(.error, code: "unreadable_store", "nothing could be read from \(options.db): \(error)")
        }
        let document: JSONValue = .object([
            "store": .string(options.db),
            "pending": .array(changes.map { change in
                .object([
                    "opId": .string(change.opID), "entity": .string(change.entity.rawValue),
                    "action": .string(change.action.rawValue), "localId": .int(change.recordLocalID),
                    "status": .string(change.status.rawValue), "baseVersion": .optionalInt(change.baseVersion),
                    "fields": .object(change.fields),
                ])
            }),
        ])
        print(JSONText.encode(document))
    }
}
