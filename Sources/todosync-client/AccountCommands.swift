import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// The password, never echoed and never printed: `--password-stdin` reads the first line of
/// stdin (for scripts), then `--password`, then TODOSYNC_PASSWORD; otherwise, on a terminal, a
/// prompt without echo. `password`'s new one comes the same way: the next line of stdin,
/// `--new-password`, TODOSYNC_NEW_PASSWORD, or a prompt.
func accountPassword(_ given: String?, fromStdin: Bool, variable: String = "TODOSYNC_PASSWORD",
                     prompt: String = "Password: ") throws -> String {
    if fromStdin {
        guard let line = readLine(strippingNewline: true), !line.isEmpty else {
            throw ValidationError("--password-stdin: no \(prompt.lowercased().dropLast(2)) on stdin")
        }
        return line
    }
    if let given { return given }
    if let fromEnvironment = ProcessInfo.processInfo.environment[variable] { return fromEnvironment }
    guard isatty(STDIN_FILENO) != 0 else {
        throw ValidationError("give --password-stdin (or set \(variable)); stdin is not a terminal to ask on")
    }
    return try promptWithoutEcho(prompt)
}

/// Asks on stderr and reads a line from the terminal with echo off (restored afterwards).
func promptWithoutEcho(_ prompt: String) throws -> String {
    FileHandle.standardError.write(Data(prompt.utf8))
    var saved = termios()
    let canHide = tcgetattr(STDIN_FILENO, &saved) == 0
    if canHide {
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
    }
    defer {
        if canHide { tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
        FileHandle.standardError.write(Data("\n".utf8))
    }
    guard let line = readLine(strippingNewline: true), !line.isEmpty else { throw ValidationError("no password given") }
    return line
}

/// The account options of `register` and `login`.
struct AccountOptions: ParsableArguments {
    @Option var email: String
    @Option(help: "The password (visible to other users in `ps`: prefer --password-stdin, TODOSYNC_PASSWORD, or the prompt).")
    var password: String?
    @Flag(help: "Read the password from the first line of stdin.") var passwordStdin = false

    /// Registers or logs the store in, and says as whom.
    func signIn(_ options: StoreOptions, register: Bool) async throws {
        let secret = try accountPassword(password, fromStdin: passwordStdin)
        let store = try options.openStore(create: true)
        let client = try options.client(store)
        if register {
            try await client.register(email: email, password: secret)
        } else {
            try await client.login(email: email, password: secret)
        }
        let account = try store.status().email ?? email
        options.output.finish(
            human: "\(register ? "Registered and logged in" : "Logged in") as \(account).",
            json: .object(["email": .string(account), "registered": .bool(register), "loggedIn": .bool(true)]))
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
        options.output.finish(human: "Logged out.", json: .object(["loggedIn": .bool(false)]))
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Account, server, queued changes, last sync, conflicts.")
    @OptionGroup var options: StoreOptions

    func run() throws {
        let store = try options.openStore()
        let status = try store.status()
        let server = try options.serverInUse(store)
        let queue = try store.operations(historyLimit: 0)
        let out = options.output
        out.say("account:    \(status.email ?? "(not logged in)")\(status.signedOut ? " — \(SyncError.unauthorized)" : "")")
        out.say("server:     \(server.url) (from \(server.source))")
        out.say("device:     \(status.deviceID)")
        out.say("pending:    \(status.pending) change(s) waiting to sync")
        out.say("rejected:   \(status.rejected)")
        out.say("conflicts:  \(status.conflicts)")
        out.say("last sync:  \(status.lastSyncAt ?? "never")")
        let setting = try store.windowSetting(), held = try store.heldWindow()
        if setting != .whole || !(held?.isWhole ?? true) {
            out.say("window:     \(setting) (holds \(held.map(\.description) ?? "nothing yet"))")
        }
        if let error = status.lastSyncError { out.say("last error: \(error)") }
        if let required = status.upgradeRequired { out.say("sync:       stopped, \(required)") }
        for op in queue { out.say("  " + (try operationLine(op, store))) }
        out.finish(json: .object([
            "account": .optionalString(status.email), "loggedIn": .bool(try store.isLoggedIn), "signedOut": .bool(status.signedOut),
            "server": .string(server.url), "serverSource": .string(server.source), "store": .string(options.db),
            "deviceId": .string(status.deviceID), "pending": .int(status.pending), "rejected": .int(status.rejected),
            "conflicts": .int(status.conflicts), "lastSyncAt": .optionalString(status.lastSyncAt),
            "lastSyncError": .optionalString(status.lastSyncError),
            "window": .string(setting.description), "heldWindow": WindowRender.json(held),
            "upgradeRequired": status.upgradeRequired.map { .string("\($0)") } ?? .null, "operations": .array(queue.map(Render.operation)),
        ]))
    }
}
