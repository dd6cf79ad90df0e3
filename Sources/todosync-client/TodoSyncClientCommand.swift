import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// `todosync-client`: a terminal todo app on the TodoSyncClient library, one local SQLite file
/// per account. Every edit works offline and queues; `sync` pushes and pulls.
@main
struct TodoSyncClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "todosync-client",
        abstract: "An offline-first todo list that syncs with a TodoSync server.",
        discussion: """
            Records are addressed by the number `list` shows (a local id, stable for this store).
            Environment: TODOSYNC_CLIENT_DB (store file), TODOSYNC_SERVER (base URL), TODOSYNC_PASSWORD,
            TODOSYNC_CLIENT_RETRIES, TODOSYNC_CLIENT_REQUEST_TIMEOUT, TODOSYNC_CLIENT_SYNC_TIMEOUT
            (every setting and its default: docs/CLIENT-SETTINGS.md).
            """,
        subcommands: [
            Register.self, Login.self, Logout.self, Add.self, List.self, Done.self, Edit.self, Remove.self,
            Tags.self, TagAdd.self, TagRemove.self, Sync.self, Status.self, Conflicts.self, Resolve.self,
            Rejected.self, Acknowledge.self, Stat.self,
        ])
}

/// Options every command takes.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "The local store file (one per account).")
    var db: String = ProcessInfo.processInfo.environment["TODOSYNC_CLIENT_DB"] ?? "todosync-client.sqlite"

    @Option(name: .long, help: "The server's base URL (remembered by the store once set).")
    var server: String?

    func openStore() throws -> LocalStore { try LocalStore(path: db) }

    func client(_ store: LocalStore) throws -> TodoSyncClient {
        let url = try server ?? ProcessInfo.processInfo.environment["TODOSYNC_SERVER"] ?? store.serverURL ?? "http://127.0.0.1:8080"
        guard let baseURL = URL(string: url) else { throw ValidationError("--server is not a URL: \(url)") }
        if server != nil { try store.setServerURL(url) }
        let environment = ProcessInfo.processInfo.environment
        let attempts = environment["TODOSYNC_CLIENT_RETRIES"].flatMap(Int.init) ?? 4
        var timeouts = SyncTimeouts()
        if let seconds = try Self.seconds(environment, "TODOSYNC_CLIENT_REQUEST_TIMEOUT") { timeouts.request = seconds }
        if let seconds = try Self.seconds(environment, "TODOSYNC_CLIENT_SYNC_TIMEOUT") { timeouts.sync = seconds }
        // An older client's shapes, for tests of mixed fleets (docs/CLIENT-SETTINGS.md).
        let schemaVersion = environment["TODOSYNC_CLIENT_SCHEMA_VERSION"].flatMap(Int.init) ?? SchemaVersion.current
        return TodoSyncClient(
            store: store, baseURL: baseURL, retry: RetryPolicy(maxAttempts: attempts, initialDelay: 0.2, maxDelay: 5),
            timeouts: timeouts, hooks: CrashHooks.fromEnvironment(), schemaVersion: schemaVersion)
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

/// The terminal client's exit codes (docs/CLIENT-SETTINGS.md, "Exit codes").
enum ClientExit {
    /// The server could not be reached, kept answering 429/5xx, or did not answer in time.
    static let offline = ExitCode(3)
    /// Another process is syncing the same store file.
    static let syncRunning = ExitCode(4)
    /// The server answered 426 `upgrade_required`: this client's schema version is too old.
    static let upgradeRequired = ExitCode(5)
}

/// `TODOSYNC_CLIENT_CRASH_AT=push-response:N | page-written:N | page-committed:N` makes the
/// process SIGKILL itself at that point of a sync: how the tests prove crash safety.
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

func accountPassword(_ given: String?) throws -> String {
    if let given { return given }
    if let fromEnvironment = ProcessInfo.processInfo.environment["TODOSYNC_PASSWORD"] { return fromEnvironment }
    throw ValidationError("give --password or set TODOSYNC_PASSWORD")
}

func resolveTag(_ store: LocalStore, _ name: String) throws -> Int64 {
    let tags = try store.tags()
    if let number = Int64(name), tags.contains(where: { $0.localID == number }) { return number }
    guard let tag = tags.first(where: { $0.name.lowercased() == name.lowercased() }) else {
        throw ValidationError("no tag named \(name) (see `todosync-client tags`)")
    }
    return tag.localID
}

func printTodo(_ todo: LocalTodo, tags: [Int64: LocalTag]) {
    var line = String(format: "%5lld  [%@] ", todo.localID, todo.isCompleted ? "x" : " ")
    if todo.isImportant { line += "! " }
    line += todo.title
    var extras: [String] = [todo.deadline.description]
    if let tag = todo.tagLocalID.flatMap({ tags[$0] }) { extras.append("#\(tag.name)") }
    if todo.isLife { extras.append("@life") }
    if todo.estimatedTime > 0 { extras.append("\(todo.estimatedTime)m") }
    if todo.difficulty > 0 { extras.append("*\(todo.difficulty)") }
    if todo.serverID == nil { extras.append("not synced") }
    print(line + "  (" + extras.joined(separator: " ") + ")" + compactNotes(todo.notes))
}

/// Notes on the todo's line: `  -- ` and their first 60 characters, newlines as `⏎`.
func compactNotes(_ notes: String?) -> String {
    guard let notes, !notes.isEmpty else { return "" }
    let flat = notes.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: " ⏎ ")
    return "  -- " + (flat.count > 60 ? String(flat.prefix(59)) + "…" : flat)
}

/// The account options of `register` and `login`.
struct AccountOptions: ParsableArguments {
    @Option var email: String
    @Option(help: "The password (or set TODOSYNC_PASSWORD).") var password: String?

    /// Registers or logs the store in, and says as whom.
    func signIn(_ options: StoreOptions, register: Bool) async throws {
        let store = try options.openStore()
        let client = try options.client(store)
        let secret = try accountPassword(password)
        if register {
            try await client.register(email: email, password: secret)
        } else {
            try await client.login(email: email, password: secret)
        }
        print("\(register ? "Registered and logged in" : "Logged in") as \(try store.status().email ?? email).")
    }
}

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create an account and log this store in.")
    @OptionGroup var options: StoreOptions
    @OptionGroup var account: AccountOptions

    func run() async throws { try await account.signIn(options, register: true) }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Log this store in to an existing account.")
    @OptionGroup var options: StoreOptions
    @OptionGroup var account: AccountOptions

    func run() async throws { try await account.signIn(options, register: false) }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Log out (local data and queued changes stay).")
    @OptionGroup var options: StoreOptions

    func run() async throws {
        let store = try options.openStore()
        try await options.client(store).logout()
        print("Logged out.")
    }
}

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add todos in the quick-add syntax (one per line): !important #tag @life 30m/2h *1..*5.")
    @OptionGroup var options: StoreOptions
    @Option(help: "Deadline (YYYY-MM-DD); today when omitted.") var date: String?
    @Option(help: "Notes for each added todo (up to 10,000 characters).") var notes: String?
    @Argument(help: "The text; each argument is one line.") var lines: [String]

    func run() throws {
        let store = try options.openStore()
        let changes = try store.quickAdd(lines.joined(separator: "\n"), date: try parseDay(date), notes: notes)
        let tags = Dictionary(uniqueKeysWithValues: try store.tags().map { ($0.localID, $0) })
        for change in changes { if let todo = try store.todo(change.localID) { printTodo(todo, tags: tags) } }
        print("\(changes.count) added; \(try store.pendingCount()) change(s) waiting to sync.")
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List todos of a day (the server's order), or of a range.")
    @OptionGroup var options: StoreOptions
    @Option(help: "The day (YYYY-MM-DD); today when omitted.") var date: String?
    @Option var from: String?
    @Option var to: String?
    @Flag(help: "Every todo in the store.") var all = false

    func run() throws {
        let store = try options.openStore()
        let todos: [LocalTodo]
        if all {
            todos = try store.allTodos()
        } else if from != nil || to != nil {
            todos = try store.todos(from: try parseDay(from), to: try parseDay(to))
        } else {
            todos = try store.todos(on: try parseDay(date))
        }
        let tags = Dictionary(uniqueKeysWithValues: try store.tags().map { ($0.localID, $0) })
        for todo in todos { printTodo(todo, tags: tags) }
        if todos.isEmpty { print("Nothing to do.") }
    }
}

struct Done: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mark a todo completed (--undo: not completed).")
    @OptionGroup var options: StoreOptions
    @Argument var ref: Int64
    @Flag var undo = false

    func run() throws {
        let store = try options.openStore()
        try store.updateTodo(ref, TodoChanges(isCompleted: !undo))
        print(undo ? "Reopened \(ref)." : "Completed \(ref).")
    }
}

struct Edit: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change a todo's fields.")
    @OptionGroup var options: StoreOptions
    @Argument var ref: Int64
    @Option var title: String?
    @Option(help: "New deadline (YYYY-MM-DD).") var date: String?
    @Option(help: "true or false.") var important: Bool?
    @Option(help: "true or false.") var life: Bool?
    @Option(help: "0 to 5.") var difficulty: Int?
    @Option(help: "Estimated minutes, 0 to 1440.") var minutes: Int?
    @Option(help: "A tag name or number; '-' removes the tag.") var tag: String?
    @Option(help: "New notes (up to 10,000 characters); '-' removes them.") var notes: String?

    func run() throws {
        let store = try options.openStore()
        var changes = TodoChanges(title: title, isImportant: important, isLife: life, difficulty: difficulty, estimatedTime: minutes)
        if let notes { changes.notes = notes == "-" ? .some(nil) : .some(notes) }
        if let date { changes.deadline = try parseDay(date) }
        if let tag { changes.tag = tag == "-" ? .some(nil) : .some(try resolveTag(store, tag)) }
        try store.updateTodo(ref, changes)
        print("Changed \(ref); \(try store.pendingCount()) change(s) waiting to sync.")
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete a todo.")
    @OptionGroup var options: StoreOptions
    @Argument var ref: Int64

    func run() throws {
        let store = try options.openStore()
        try store.deleteTodo(ref)
        print("Deleted \(ref).")
    }
}

struct Tags: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "List tags.")
    @OptionGroup var options: StoreOptions

    func run() throws {
        for tag in try options.openStore().tags() {
            print(String(format: "%5lld  %@  %@%@", tag.localID, tag.color, tag.name, tag.serverID == nil ? "  (not synced)" : ""))
        }
    }
}

struct TagAdd: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tag-add", abstract: "Add a tag.")
    @OptionGroup var options: StoreOptions
    @Argument var name: String
    @Argument(help: "#RRGGBB") var color: String

    func run() throws {
        let change = try options.openStore().addTag(name: name, color: color)
        print("Added tag \(change.localID).")
    }
}

struct TagRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "tag-rm", abstract: "Delete a tag (its todos lose it).")
    @OptionGroup var options: StoreOptions
    @Argument var tag: String

    func run() throws {
        let store = try options.openStore()
        try store.deleteTag(try resolveTag(store, tag))
        print("Deleted tag \(tag).")
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Push queued changes, then pull everything new.",
        discussion: """
            Exit codes: 0 synced; 1 error; 3 offline (not reachable, busy, or no answer within \
            TODOSYNC_CLIENT_REQUEST_TIMEOUT, default 30 s); 4 another process is syncing this \
            store (it says "Sync already running on STORE" and changes nothing; run it again \
            later); 5 upgrade required (the server no longer serves this client's schema version: \
            update todosync-client; nothing was sent); 64 usage. Changes stay queued in every \
            case but 0.
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "merge, reject, client-wins, or ask (conflicts go to `conflicts`).") var policy: String = "merge"
    @Option(help: "Records per pull page (1 to 1000).") var pageSize: Int = 1000
    @Flag(help: "No progress output.") var quiet = false
    @Flag(help: "Print how long the sync took (for benchmarks).") var timing = false

    func run() async throws {
        guard let conflictPolicy = ConflictStrategy(rawValue: policy) else {
            throw ValidationError("--policy must be one of: merge, reject, client-wins, ask")
        }
        let store = try options.openStore()
        let client = try options.client(store)
        let bar = ProgressBar(enabled: !quiet)
        do {
            let started = Date()
            let report = try await client.sync(policy: conflictPolicy, pageSize: pageSize) { bar.update($0) }
            bar.finish()
            if timing { print(String(format: "sync_seconds=%.4f", Date().timeIntervalSince(started))) }
            var parts = ["sent \(report.operationsSent) change(s)"]
            let results = report.results.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.rawValue)" }
            if !results.isEmpty { parts.append("(" + results.joined(separator: ", ") + ")") }
            parts.append("pulled \(report.recordsPulled) record(s) in \(report.pages) page(s)")
            if report.resyncedAfterExpiry { parts.append("after a full resync (the server's history moved on)") }
            print("Synced: " + parts.joined(separator: " ") + ".")
            let status = try store.status()
            if status.conflicts > 0 { print("\(status.conflicts) conflict(s) wait for you: `todosync-client conflicts`.") }
            if status.rejected > 0 { print("\(status.rejected) change(s) were rejected: `todosync-client rejected`.") }
        } catch let error as SyncError {
            bar.finish()
            let pending = try store.pendingCount()
            switch error {
            case .alreadyRunning:
                print("Sync already running on \(options.db)")
                throw ClientExit.syncRunning
            case .upgradeRequired:
                print("Not synced: \(error); \(pending) change(s) are queued.")
                throw ClientExit.upgradeRequired
            case .timedOut:
                print("Not synced: \(error).")
                throw ClientExit.offline
            case .offline, .unavailable:
                print("Not synced: \(error). \(pending) change(s) stay queued and go out with the next sync.")
                throw ClientExit.offline
            default:
                print("Not synced: \(error). \(pending) change(s) stay queued.")
                throw ExitCode(1)
            }
        }
    }
}

/// A one-line progress display on stderr (the pull's total is not known in advance, so it
/// counts records and pages; pushing shows sent of queued).
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let lock = NSLock()
    private var shown = false
    private let interactive = isatty(STDERR_FILENO) != 0

    init(enabled: Bool) { self.enabled = enabled }

    func update(_ progress: SyncProgress) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let text: String
        switch progress.phase {
        case .pushing:
            let total = max(progress.operationsTotal, 1)
            text = "Pushing \(bar(Double(progress.operationsSent) / Double(total))) \(progress.operationsSent)/\(progress.operationsTotal) changes"
        case .pulling:
            let fraction = progress.recordsTotal.map { Double(progress.recordsPulled) / Double(max($0, 1)) }
            text = "Pulling \(bar(fraction ?? Double(progress.pages % 20) / 20)) \(progress.recordsPulled) records, \(progress.pages) pages"
        }
        if interactive {
            FileHandle.standardError.write(Data(("\r" + text + "   ").utf8))
        } else if progress.phase == .pushing || progress.pages % 10 == 1 {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
        shown = true
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if shown && interactive { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    private func bar(_ fraction: Double) -> String {
        let width = 24
        let filled = max(0, min(width, Int(fraction * Double(width))))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Account, queued changes, last sync, conflicts.")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let store = try options.openStore()
        let status = try store.status()
        print("account:    \(status.email ?? "(not logged in)")")
        print("server:     \(try store.serverURL ?? "(not set)")")
        print("device:     \(status.deviceID)")
        print("pending:    \(status.pending) change(s) waiting to sync")
        print("rejected:   \(status.rejected)")
        print("conflicts:  \(status.conflicts)")
        print("last sync:  \(status.lastSyncAt ?? "never")")
        if let error = status.lastSyncError { print("last error: \(error)") }
        if let required = status.upgradeRequired { print("sync:       stopped, \(required)") }
        for op in try store.operations(historyLimit: 0) {
            print("  \(op.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(op.action.rawValue) \(op.entity.rawValue) \(op.recordLocalID) \(op.fields.joined(separator: ","))  op \(op.opID)")
        }
    }
}

struct Conflicts: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Conflicts waiting for a decision (sync --policy ask).")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let conflicts = try options.openStore().conflicts()
        if conflicts.isEmpty { print("No conflicts.") }
        for conflict in conflicts {
            print("conflict \(conflict.conflictID): \(conflict.action.rawValue) of \(conflict.entity.rawValue) \(conflict.recordLocalID)")
            for field in conflict.local.keys.sorted() {
                print("  \(field): base \(show(conflict.base[field])), mine \(show(conflict.local[field])), theirs \(show(conflict.server[field]))")
            }
            if let deletedAt = conflict.server["deletedAt"], deletedAt != .null { print("  deleted on the server") }
        }
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
    static let configuration = CommandConfiguration(abstract: "Settle a conflict: --mine, --theirs, or new values (e.g. --title).")
    @OptionGroup var options: StoreOptions
    @Argument var conflict: Int64
    @Flag var mine = false
    @Flag var theirs = false
    @Option var title: String?
    @Option(help: "true or false.") var completed: Bool?

    func run() throws {
        let store = try options.openStore()
        let resolution: ConflictResolution
        if mine {
            resolution = .keepMine
        } else if theirs {
            resolution = .takeTheirs
        } else {
            var fields: [String: JSONValue] = [:]
            if let title { fields["title"] = .string(title) }
            if let completed { fields["isCompleted"] = .bool(completed) }
            guard !fields.isEmpty else { throw ValidationError("give --mine, --theirs, or values such as --title") }
            resolution = .edited(fields)
        }
        try store.resolveConflict(conflict, resolution)
        print("Resolved conflict \(conflict); \(try store.pendingCount()) change(s) waiting to sync.")
    }
}

struct Rejected: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Changes the server refused (kept until acknowledged).")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let rejected = try options.openStore().operations(historyLimit: 0).filter { $0.status == .rejected }
        if rejected.isEmpty { print("No rejected changes.") }
        for op in rejected {
            print("op \(op.opID): \(op.action.rawValue) \(op.entity.rawValue) \(op.recordLocalID): \(op.errorCode ?? "") \(op.errorMessage ?? "")")
        }
    }
}

struct Acknowledge: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "ack", abstract: "Acknowledge a rejected change (the record returns to the server's state).")
    @OptionGroup var options: StoreOptions
    @Argument var opID: String

    func run() throws {
        try options.openStore().acknowledgeRejected(opID)
        print("Acknowledged \(opID).")
    }
}

struct Stat: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The daily statistic of a day (as last synced).")
    @OptionGroup var options: StoreOptions
    @Option var date: String?

    func run() throws {
        let day = try parseDay(date)
        guard let stat = try options.openStore().dailyStat(for: day) else {
            print("No statistic for \(day) (yet).")
            return
        }
        print("\(day): \(stat.completedCount)/\(stat.todoCount) done, productivity \(stat.productivityNum), balance \(stat.balanceNum) (\(stat.balanceTitle))")
    }
}
