import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// `todosync-client`: a terminal todo app on the TodoSyncClient library, one local SQLite file
/// per account. Every edit works offline and queues; `sync` pushes and pulls.
///
/// The files of this target: this one (the command tree, the options every command takes, and
/// `main`, which turns every outcome into one exit code of `ClientExit`), `Output.swift` (human
/// text or one `--json` document; the exit-code table), `AccountCommands.swift`,
/// `AccountControlCommands.swift` (password, sessions, export, delete-account), `TodoCommands.swift`,
/// `TagCommands.swift`, `SyncCommands.swift` (sync, conflicts, rejected changes), `WindowCommands.swift` (sync's window, purge), `FriendCommands.swift` (friends, nickname) and `ProgressBar.swift`. docs/CLIENT-CLI.md documents what a user and a script see.
@main
struct TodoSyncClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todosync-client",
        abstract: "An offline-first todo list that syncs with a TodoSync server.",
        discussion: """
            Records are addressed by the number `list` shows (a local id, stable for this store).
            Every command takes --json: one JSON document on stdout (an error: on stderr).
            Environment: TODOSYNC_CLIENT_DB (store file), TODOSYNC_SERVER (base URL), TODOSYNC_PASSWORD, TODOSYNC_NEW_PASSWORD,
            TODOSYNC_CLIENT_RETRIES, TODOSYNC_CLIENT_REQUEST_TIMEOUT, TODOSYNC_CLIENT_SYNC_TIMEOUT
            (every setting and its default: docs/CLIENT-SETTINGS.md; output and exit codes: docs/CLIENT-CLI.md).

            Exit codes:
            \(ClientExit.table)
            """,
        version: ClientVersion.description,
        subcommands: [
            Register.self, Login.self, Logout.self, Add.self, List.self, Done.self, Edit.self, Remove.self,
            Tags.self, TagAdd.self, TagRemove.self, Sync.self, Status.self, Conflicts.self, Resolve.self,
            Rejected.self, Acknowledge.self, Operations.self, Stat.self, ExportPending.self, TagEdit.self, Watch.self,
            ChangePassword.self, Sessions.self, Export.self, DeleteAccount.self, Purge.self, Friends.self, Nickname.self,
        ])

    /// Parses, runs, and ends with one of `ClientExit`'s codes; with `--json` a failure is one
    /// JSON document on stderr (usage errors too).
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let json = Output.wantsJSON(arguments)
        if arguments.contains("--version"), arguments.allSatisfy({ $0 == "--version" || $0 == "--json" }) {
            Output(json: json).finish(human: ClientVersion.description, json: ClientVersion.json)
            Foundation.exit(ClientExit.done.rawValue)
        }
        do {
            var command = try parseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            Foundation.exit(ClientExit.done.rawValue)
        } catch let code as ExitCode where code != .success {
            // A command that has said everything and only sets the exit code (sync: 6).
            Foundation.exit(code == .validationFailure ? ClientExit.usage.rawValue : code.rawValue)
        } catch {
            let failure = ClientFailure(error, parser: Self.self)
            guard let failure else { exit(withError: error) }  // --help: the parser prints it, exits 0
            Output(json: json).fail(failure)
            Foundation.exit(failure.exit.rawValue)
        }
    }
}

/// The client's version (`todosync-client --version`).
enum ClientVersion {
    static let number = "1.0.0"
    static let description = "todosync-client \(number) (API v1)"
    static var json: JSONValue { .object(["version": .string(number), "api": .string("v1")]) }
}

/// Options every command takes.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "The local store file (one per account).")
    var db: String = ProcessInfo.processInfo.environment["TODOSYNC_CLIENT_DB"] ?? "todosync-client.sqlite"

    @Option(name: .long, help: "The server's base URL (remembered by the store once set).")
    var server: String?

    @Flag(name: .long, help: "One JSON document on stdout (an error: on stderr); docs/CLIENT-CLI.md.")
    var json = false

    var output: Output { Output(json: json) }

    /// Opens the store; only `register` and `login` create a missing one (`create`), so a
    /// mistyped --db is an error, not a new empty store.
    func openStore(create: Bool = false) throws -> LocalStore {
        do {
            return try LocalStore(path: db, create: create)
        } catch LocalStoreError.noStore {
            throw ClientFailure(
                .error, code: "no_store",
                "no local store at \(db) (check --db or TODOSYNC_CLIENT_DB); `todosync-client register` or `login` creates one")
        } catch LocalStoreError.unreadable(_, let reason) {
            throw ClientFailure(
                .error, code: "unreadable_store",
                """
                \(db) is not a readable TodoSync store (\(reason)): it is damaged, not a store, or from a newer client.
                Keep what it still queues, then start a new store and sync:
                  todosync-client export-pending --db \(db) > pending.json
                  mv \(db) \(db).broken
                  todosync-client login --db \(db) --email EMAIL
                """)
        }
    }

    /// The server this command talks to, and where that choice came from: --server, then
    /// TODOSYNC_SERVER, then the URL the store remembers, then the default.
    func serverInUse(_ store: LocalStore) throws -> (url: String, source: String) {
        if let server { return (server, "--server") }
        if let fromEnvironment = ProcessInfo.processInfo.environment["TODOSYNC_SERVER"] { return (fromEnvironment, "TODOSYNC_SERVER") }
        if let remembered = try store.serverURL { return (remembered, "store") }
        return ("http://127.0.0.1:8080", "default")
    }

    func client(_ store: LocalStore, useSnapshot: Bool = true) throws -> TodoSyncClient {
        let url = try serverInUse(store).url
        guard let baseURL = URL(string: url) else { throw ValidationError("--server is not a URL: \(url)") }
        if server != nil { try store.setServerURL(url) }
        let environment = ProcessInfo.processInfo.environment
        let attempts = environment["TODOSYNC_CLIENT_RETRIES"].flatMap(Int.init) ?? 4
        var timeouts = SyncTimeouts()
        if let seconds = try Self.seconds(environment, "TODOSYNC_CLIENT_REQUEST_TIMEOUT") { timeouts.request = seconds }
        if let seconds = try Self.seconds(environment, "TODOSYNC_CLIENT_SYNC_TIMEOUT") { timeouts.sync = seconds }
        // An older client's shapes, for tests of mixed fleets (docs/CLIENT-SETTINGS.md).
        let schemaVersion = environment["TODOSYNC_CLIENT_SCHEMA_VERSION"].flatMap(Int.init) ?? SchemaVersion.current
        let rangeBytes = environment["TODOSYNC_CLIENT_SNAPSHOT_RANGE_BYTES"].flatMap(Int.init) ?? TodoSyncClient.defaultSnapshotRangeBytes
        return TodoSyncClient(
            store: store, baseURL: baseURL, retry: RetryPolicy(maxAttempts: attempts, initialDelay: 0.2, maxDelay: 5),
            timeouts: timeouts, hooks: CrashHooks.fromEnvironment(), schemaVersion: schemaVersion,
            useSnapshot: useSnapshot, snapshotRangeBytes: rangeBytes)
    }

    /// A positive number of seconds from the environment, or nil when the variable is unset.
    static func seconds(_ environment: [String: String], _ name: String) throws -> Double? {
        guard let text = environment[name] else { return nil }
        guard let seconds = Double(text), seconds > 0, seconds.isFinite else {
            throw ValidationError("\(name) must be a positive number of seconds, not \(text)")
        }
        return seconds
    }
}

/// `TODOSYNC_CLIENT_CRASH_AT=push-response:N | page-written:N | page-committed:N |
/// snapshot-bytes:N | snapshot-install:1` makes the process SIGKILL itself at that point of a
/// sync (`snapshot-bytes`: once N bytes of a snapshot download are on disk; `snapshot-install`:
/// inside the install transaction, before it commits): how the tests prove crash safety.
enum CrashHooks {
    static func fromEnvironment() -> SyncHooks {
        guard let spec = ProcessInfo.processInfo.environment["TODOSYNC_CLIENT_CRASH_AT"] else { return SyncHooks() }
        let parts = spec.split(separator: ":")
        guard parts.count == 2, let n = Int(parts[1]) else { return SyncHooks() }
        let die: @Sendable (Int) -> Void = { index in if index == n { kill(getpid(), SIGKILL) } }
        switch parts[0] {
        case "push-response": return SyncHooks(pushResponseReceived: die)
        case "page-written": return SyncHooks(pageWritten: die)
        case "page-committed": return SyncHooks(pageCommitted: die)
        case "snapshot-bytes": return SyncHooks(snapshotBytesWritten: { bytes in if bytes >= Int64(n) { kill(getpid(), SIGKILL) } })
        case "snapshot-install": return SyncHooks(snapshotInstalling: { kill(getpid(), SIGKILL) })
        default: return SyncHooks()
        }
    }
}

func parseDay(_ text: String?) throws -> Day {
    guard let text else { return today() }
    guard let day = Day(text) else { throw ValidationError("not a date (YYYY-MM-DD): \(text)") }
    return day
}

func today() -> Day {
    let parts = Calendar(identifier: .gregorian).dateComponents(in: TimeZone.current, from: Date())
    return Day(year: parts.year!, month: parts.month!, day: parts.day!)!
}

func resolveTag(_ store: LocalStore, _ name: String) throws -> Int64 {
    let tags = try store.tags()
    if let number = Int64(name), tags.contains(where: { $0.localID == number }) { return number }
    guard let tag = tags.first(where: { $0.name.lowercased() == name.lowercased() }) else {
        throw ValidationError("no tag named \(name) (see `todosync-client tags`)")
    }
    return tag.localID
}
