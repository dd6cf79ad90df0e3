import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// What a signed-in user controls of the account (API.md "Account"; docs/CLIENT-CLI.md
/// "Account"): `password`, `sessions [list]`, `sessions revoke ID`, `export FILE`,
/// `delete-account`. A wrong password exits 1 with `wrong_password` (still signed in); a refused
/// token exits 1 with `unauthorized` ("signed out: log in again").

struct ChangePassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password",
        abstract: "Change the account's password; every other session is signed out.",
        discussion: """
            The current password comes like login's (--password-stdin: the first line of stdin, \
            --password, TODOSYNC_PASSWORD, or a prompt on a terminal); the new one from the second \
            line of stdin, --new-password, TODOSYNC_NEW_PASSWORD, or a prompt asked twice.
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "The current password (visible in `ps`: prefer --password-stdin, TODOSYNC_PASSWORD, or the prompt).")
    var password: String?
    @Option(help: "The new password, 8-128 characters (visible in `ps`: prefer the alternatives).")
    var newPassword: String?
    @Flag(help: "Read the current password from the first line of stdin and the new one from the second.")
    var passwordStdin = false

    func run() async throws {
        let store = try options.openStore()
        let current = try accountPassword(password, fromStdin: passwordStdin, prompt: "Current password: ")
        let new = try accountPassword(newPassword, fromStdin: passwordStdin && newPassword == nil, variable: "TODOSYNC_NEW_PASSWORD",
                                      prompt: "New password: ")
        if !passwordStdin, newPassword == nil, ProcessInfo.processInfo.environment["TODOSYNC_NEW_PASSWORD"] == nil {
            guard try promptWithoutEcho("New password again: ") == new else {
                throw ValidationError("the new passwords differ; nothing changed")
            }
        }
        try await options.client(store).changePassword(current: current, new: new)
        options.output.finish(
            human: "Password changed; every other session of the account is signed out (this one stays).",
            json: .object(["passwordChanged": .bool(true)]))
    }
}

struct Sessions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The account's sessions (one per login), or `sessions revoke ID` to end one.",
        subcommands: [SessionList.self, SessionRevoke.self], defaultSubcommand: SessionList.self)
}

struct SessionList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "The account's sessions, newest first.")
    @OptionGroup var options: StoreOptions

    func run() async throws {
        let store = try options.openStore()
        let sessions = try await options.client(store).sessions()
        for session in sessions {
            options.output.say("\(session.id)  created \(session.createdAt)  last used \(session.lastUsedAt)"
                + (session.current ? "  (this device)" : ""))
        }
        options.output.finish(json: .object(["sessions": .array(sessions.map { session in
            .object(["id": .string(session.id), "createdAt": .string(session.createdAt),
                     "lastUsedAt": .string(session.lastUsedAt), "current": .bool(session.current)])
        })]))
    }
}

struct SessionRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "End one session at once (a lost device); this device's own is a logout.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The session's id, as `sessions` shows it.") var id: String

    func run() async throws {
        let store = try options.openStore()
        try await options.client(store).revokeSession(id: id)
        options.output.finish(human: "Revoked session \(id).", json: .object(["revoked": .string(id)]))
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a copy of every live record of the account (the server's JSON export) to FILE.",
        discussion: "Streamed to disk; FILE is replaced only when the whole export has arrived.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "Where to write it (replaced atomically).") var file: String

    func run() async throws {
        let store = try options.openStore()
        let bytes = try await options.client(store).exportAccount(to: URL(fileURLWithPath: file))
        options.output.finish(human: "Exported the account to \(file) (\(bytes) bytes).",
                              json: .object(["file": .string(file), "bytes": .int(bytes)]))
    }
}

struct DeleteAccount: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-account",
        abstract: "Delete the account on the server, then this store (its queued changes too).",
        discussion: """
            On a terminal it asks for confirmation first; scripts pass --yes (without it, a stdin \
            that is not a terminal is refused, exit 2). The store file and its -wal/-shm are \
            removed only after the server confirmed; a wrong password keeps everything.
            """)
    @OptionGroup var options: StoreOptions
    @Option(help: "The password (visible in `ps`: prefer --password-stdin, TODOSYNC_PASSWORD, or the prompt).")
    var password: String?
    @Flag(help: "Read the password from the first line of stdin.") var passwordStdin = false
    @Flag(help: "Do not ask for confirmation (for scripts).") var yes = false

    func run() async throws {
        let store = try options.openStore()
        let status = try store.status()
        guard try store.isLoggedIn else { throw ClientFailure(sync: status.signedOut ? .unauthorized : .notLoggedIn) }
        let account = status.email ?? "this account"
        if !yes {
            guard isatty(STDIN_FILENO) != 0 else {
                throw ValidationError("delete-account deletes the account for good: give --yes (stdin is not a terminal to ask on)")
            }
            let unsent = status.pending > 0 ? " and \(status.pending) change(s) not yet synced" : ""
            let question = "This deletes the account \(account) on the server, every record of it, and this device's store "
                + "\(options.db)\(unsent). It cannot be undone. Type \"delete\" to confirm: "
            FileHandle.standardError.write(Data(question.utf8))
            guard readLine(strippingNewline: true) == "delete" else {
                throw ClientFailure(.error, code: "not_confirmed", "not deleted: not confirmed")
            }
        }
        let secret = try accountPassword(password, fromStdin: passwordStdin)
        try await options.client(store).deleteAccount(password: secret)
        options.output.finish(
            human: "Deleted the account \(account) and this device's store \(options.db).",
            json: .object(["deleted": .bool(true), "account": .string(account), "store": .string(options.db)]))
    }
}
