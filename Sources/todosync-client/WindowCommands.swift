import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// `sync`'s window options: which dates this device holds (docs/CLIENT.md "Windows and purge").
struct WindowOptions: ParsableArguments {
    @Option(help: "Hold only todos due in the last N days (and later); the window moves with the date. Remembered by the store.")
    var windowDays: Int?
    @Option(name: .customLong("from"), help: "Hold only todos due on or after this date (YYYY-MM-DD). Remembered by the store.")
    var windowFrom: String?
    @Option(name: .customLong("to"), help: "Hold only todos due on or before this date (YYYY-MM-DD). Remembered by the store.")
    var windowTo: String?
    @Flag(help: "Hold the whole account again (forgets a window set before).") var wholeAccount = false

    /// The window the options ask for; nil when they name none (the store's stays).
    func setting() throws -> WindowSetting? {
        let kinds = [windowDays != nil, windowFrom != nil || windowTo != nil, wholeAccount].filter { $0 }.count
        guard kinds <= 1 else { throw ValidationError("give one of --window-days, --from/--to, --whole-account") }
        if wholeAccount { return .whole }
        if let days = windowDays {
            guard (0...365_000).contains(days) else { throw ValidationError("--window-days must be 0 or more, not \(days)") }
            return .lastDays(days)
        }
        guard windowFrom != nil || windowTo != nil else { return nil }
        let from = try windowFrom.map { try parseDay($0) }, to = try windowTo.map { try parseDay($0) }
        if let from, let to, to < from { throw ValidationError("--from \(from) is after --to \(to)") }
        return .dates(from: from, to: to)
    }
}

enum WindowRender {
    static func json(_ window: SyncWindow?) -> JSONValue {
        guard let window else { return .null }
        return .object(["from": window.from.map { .string($0.description) } ?? .null,
                        "to": window.to.map { .string($0.description) } ?? .null])
    }

    /// "outside this device's window (from …)" when `day` is outside what the store holds.
    static func outside(_ store: LocalStore, _ day: Day) throws -> String? {
        guard let held = try store.heldWindow(), !held.contains(day) else { return nil }
        return "\(day) is outside this device's window (\(held)): `todosync-client sync --from …` to hold it."
    }
}

struct Purge: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Forget local todos due before a date, and their daily stats; the window then starts at that date.",
        discussion: """
            Nothing changes on the server. Refused, listing them, when any of those todos has a \
            change not yet on the server, unless --force (which drops those changes, after \
            saying how many). The device's window then starts at the date, so that no pull \
            brings them back; `sync --from`, `--window-days` or `--whole-account` set it again.
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "Forget todos due before this date (YYYY-MM-DD).") var before: String
    @Flag(help: "Drop the queued changes of those todos too.") var force = false

    func run() async throws {
        let day = try parseDay(before)
        let store = try options.openStore()
        let client = try options.client(store)
        let out = options.output
        let report: PurgeReport
        do {
            report = try client.purge(before: day, force: force)
        } catch PurgeError.queuedChanges(let changes) {
            throw ClientFailure(.error, code: "queued_changes", """
                Not purged: \(changes.count) change(s) of todos due before \(day) are not on the server yet:
                \(changes.map { "  \($0.todoLocalID)  \($0.deadline)  \($0.title)  (\($0.action.rawValue), \($0.status.rawValue))" }.joined(separator: "\n"))
                Sync first, or purge --force to drop them.
                """, extra: ["queued": .array(changes.map { change in
                    .object(["opId": .string(change.opID), "action": .string(change.action.rawValue),
                             "status": .string(change.status.rawValue), "localId": .int(change.todoLocalID),
                             "title": .string(change.title), "deadline": .string(change.deadline.description)])
                })])
        } catch let error as PurgeError {
            throw ClientFailure(.usage, code: "bad_request", "Not purged: \(error).")
        }
        if report.changesDropped > 0 { out.say("Dropped \(report.changesDropped) queued change(s): they will not be sent.") }
        out.finish(
            human: "Purged \(report.todosRemoved) todo(s) and \(report.statsRemoved) daily stat(s) due before \(day); "
                + "this device now holds \(report.window).",
            json: .object(["todosRemoved": .int(report.todosRemoved), "statsRemoved": .int(report.statsRemoved),
                           "changesDropped": .int(report.changesDropped), "window": WindowRender.json(report.window)]))
    }
}
