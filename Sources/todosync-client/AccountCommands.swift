import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

func accountPassword(_ given: String?) throws -> String {
    if let given { return given }
    if let fromEnvironment = ProcessInfo.processInfo.environment["TODOSYNC_PASSWORD"] { return fromEnvironment }
    throw ValidationError("give --password or set TODOSYNC_PASSWORD")
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
        out.say("account:    \(status.email ?? "(not logged in)")")
        out.say("server:     \(server.url) (from \(server.source))")
        out.say("device:     \(status.deviceID)")
        out.say("pending:    \(status.pending) change(s) waiting to sync")
        out.say("rejected:   \(status.rejected)")
        out.say("conflicts:  \(status.conflicts)")
        out.say("last sync:  \(status.lastSyncAt ?? "never")")
        if let error = status.lastSyncError { out.say("last error: \(error)") }
        for op in queue {
            out.say("  \(op.status.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(op.action.rawValue) \(op.entity.rawValue) \(op.recordLocalID) \(op.fields.joined(separator: ","))  op \(op.opID)")
        }
        out.finish(json: .object([
            "account": .optionalString(status.email), "loggedIn": .bool(try store.isLoggedIn),
            "server": .string(server.url), "serverSource": .string(server.source), "store": .string(options.db),
            "deviceId": .string(status.deviceID), "pending": .int(status.pending), "rejected": .int(status.rejected),
            "conflicts": .int(status.conflicts), "lastSyncAt": .optionalString(status.lastSyncAt),
            "lastSyncError": .optionalString(status.lastSyncError), "operations": .array(queue.map(Render.operation)),
        ]))
    }
}
