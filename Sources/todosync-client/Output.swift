import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// The terminal client's exit codes: the one place they are defined. docs/CLIENT-CLI.md
/// ("Exit codes") shows this table; `--help` prints it from here.
enum ClientExit: Int32, CaseIterable {
    /// Done.
    case done = 0
    /// An error: the server refused (login, validation, not found), an unexpected answer, a
    /// local error. Queued changes stay queued.
    case error = 1
    /// Usage: an unknown command or flag, a bad value, a bad setting.
    case usage = 2
    /// Offline or timed out: the server could not be reached, kept answering 429/5xx, or did
    /// not answer in time. Queued changes stay queued.
    case offline = 3
    /// Another process is syncing this store; nothing was done.
    case syncRunning = 4
    /// The server answered 426 `upgrade_required`: this client's schema version is too old.
    /// Nothing was sent; every record and queued change stays as it was.
    case upgradeRequired = 5
    /// Synced, but conflicts wait for a decision (`conflicts`, `resolve`).
    case conflictsWaiting = 6

    /// The machine-readable name of the outcome (`error.code` of a `--json` failure when the
    /// server gave none).
    var name: String {
        switch self {
        case .done: return "done"
        case .error: return "error"
        case .usage: return "usage"
        case .offline: return "offline"
        case .syncRunning: return "sync_running"
        case .upgradeRequired: return "upgrade_required"
        case .conflictsWaiting: return "conflicts_waiting"
        }
    }

    var meaning: String {
        switch self {
        case .done: return "done"
        case .error: return "error (refused by the server, unexpected answer, local error); changes stay queued"
        case .usage: return "usage: unknown command or flag, bad value or setting"
        case .offline: return "offline or timed out; changes stay queued"
        case .syncRunning: return "another process is syncing this store; nothing was done"
        case .upgradeRequired: return "upgrade required: the server no longer serves this client's schema version; nothing was sent, changes stay queued"
        case .conflictsWaiting: return "synced, but conflicts wait for a decision (`conflicts`)"
        }
    }

    /// The table as `--help` prints it.
    static var table: String {
        allCases.map { ($0.rawValue, $0.meaning) }
            .sorted { $0.0 < $1.0 }.map { "  \($0.0)  \($0.1)" }.joined(separator: "\n")
    }
}

/// A command that did not succeed: its exit code, a machine-readable code, the message, and
/// the server's `details` when it sent some.
struct ClientFailure: Error {
    var exit: ClientExit
    var code: String
    var message: String
    var details: [ServerProblem] = []
    /// Extra members of the `--json` error object (e.g. `queued`).
    var extra: [String: JSONValue] = [:]
    /// The human text of a usage error (the message and the command's usage line).
    var usageText: String?

    init(_ exit: ClientExit, code: String? = nil, _ message: String, details: [ServerProblem] = [],
         extra: [String: JSONValue] = [:]) {
        self.exit = exit
        self.code = code ?? exit.name
        self.message = message
        self.details = details
        self.extra = extra
    }

    /// Any error a command can end with, classified; nil for `--help` (not a failure).
    init?<Root: ParsableCommand>(_ error: Error, parser: Root.Type) {
        switch error {
        case let failure as ClientFailure:
            self = failure
        case let error as SyncError:
            self = ClientFailure(sync: error)
        case let error as LocalStoreError:
            self.init(.error, code: "local", error.description)
        default:
            let code = Root.exitCode(for: error)
            if code == .success { return nil }
            if code == .validationFailure {
                self.init(.usage, Root.message(for: error))
                usageText = Root.fullMessage(for: error)
            } else {
                self.init(.error, Root.message(for: error))
            }
        }
    }

    /// A sync error, with its exit code: offline and timeouts 3, another sync 4, the rest 1.
    init(sync error: SyncError, prefix: String = "", extra: [String: JSONValue] = [:]) {
        switch error {
        case .alreadyRunning:
            self.init(.syncRunning, "\(error)", extra: extra)
        case .upgradeRequired:
            self.init(.upgradeRequired, code: "upgrade_required", prefix + "\(error)", extra: extra)
        case .timedOut:
            self.init(.offline, code: "timed_out", prefix + "\(error)", extra: extra)
        case .offline, .unavailable:
            self.init(.offline, prefix + "\(error)", extra: extra)
        case .server(_, let code, _, let details):
            self.init(.error, code: code, prefix + "\(error)", details: details, extra: extra)
        case .notLoggedIn:
            self.init(.error, code: "not_logged_in", prefix + "\(error)", extra: extra)
        case .unauthorized:
            self.init(.error, code: "unauthorized", prefix + "\(error)", extra: extra)
        case .wrongPassword(let field):
            self.init(.error, code: "wrong_password", prefix + "\(error)", details: [ServerProblem(field: field, problem: "is incorrect")],
                      extra: extra)
        case .protocolError:
            self.init(.error, code: "protocol_error", prefix + "\(error)", extra: extra)
        }
    }

    var json: JSONValue {
        var error: [String: JSONValue] = ["code": .string(code), "message": .string(message)]
        if !details.isEmpty {
            error["details"] = .array(details.map { .object(["field": .string($0.field), "problem": .string($0.problem)]) })
        }
        for (key, value) in extra { error[key] = value }
        return .object(["error": .object(error), "exitCode": .int(Int(exit.rawValue))])
    }
}

/// Where a command's words go: human lines on stdout, or with `--json` one document on stdout
/// at the end (and a failure as one document on stderr). Progress goes to stderr either way.
struct Output {
    let json: Bool

    /// Whether the command line asks for JSON (also for failures the parser reports before any
    /// command runs).
    static func wantsJSON(_ arguments: [String]) -> Bool {
        arguments.prefix { $0 != "--" }.contains("--json")
    }

    /// A line of the human output.
    func say(_ line: String) {
        if !json { print(line) }
    }

    /// The command's result: the JSON document, or a last human line.
    func finish(human: String? = nil, json document: JSONValue) {
        if json {
            print(JSONText.encode(document))
        } else if let human {
            print(human)
        }
    }

    /// A failure, on stderr: `error: message` and the server's details, or the JSON document.
    func fail(_ failure: ClientFailure) {
        let text: String
        if json {
            text = JSONText.encode(failure.json) + "\n"
        } else {
            // The message already lists the server's details (SyncError's description).
            let plain = failure.message.hasPrefix("Not synced") || failure.exit == .syncRunning
            text = (failure.usageText ?? (plain ? failure.message : "error: \(failure.message)")) + "\n"
        }
        FileHandle.standardError.write(Data(text.utf8))
    }
}

/// The `--json` shapes of the records (docs/CLIENT-CLI.md, "Records").
enum Render {
    /// `sync --json`'s `snapshot`: null when no snapshot was tried (the store was not empty).
    static func snapshot(_ outcome: SnapshotOutcome?) -> JSONValue {
        switch outcome {
        case nil: return .null
        case .installed(let records, let bytes):
            return .object(["outcome": .string("installed"), "records": .int(records), "bytes": .int(bytes)])
        case .unavailable: return .object(["outcome": .string("unavailable")])
        case .refused(let reason): return .object(["outcome": .string("refused"), "reason": .string(reason)])
        }
    }

    static func todo(_ todo: LocalTodo, tags: [Int64: LocalTag], marks: RecordMarks) -> JSONValue {
        var object: [String: JSONValue] = [
            "localId": .int(todo.localID), "serverId": .optionalInt(todo.serverID), "tagLocalId": .optionalInt(todo.tagLocalID),
            "tag": .optionalString(todo.tagLocalID.flatMap { tags[$0]?.name }), "version": .optionalInt(todo.version),
            "synced": .bool(todo.serverID != nil),
        ]
        // Every synced field by its key (the tag above, as its local handle and name).
        for field in TodoField.allCases where field != .tagId { object[field.key] = todo.value(field) }
        let mark = marks.todo(todo.localID)
        object["pending"] = .bool(mark.pending)
        object["conflict"] = .bool(mark.conflict)
        object["rejected"] = .bool(mark.rejected)
        return .object(object)
    }

    static func tag(_ tag: LocalTag) -> JSONValue {
        .object([
            "localId": .int(tag.localID), "serverId": .optionalInt(tag.serverID), "name": .string(tag.name),
            "color": .string(tag.color), "version": .optionalInt(tag.version), "synced": .bool(tag.serverID != nil),
        ])
    }

    static func operation(_ op: OperationInfo) -> JSONValue {
        .object([
            "opId": .string(op.opID), "entity": .string(op.entity.rawValue), "action": .string(op.action.rawValue),
            "localId": .int(op.recordLocalID), "status": .string(op.status.rawValue),
            "fields": .array(op.fields.map { .string($0) }), "errorCode": .optionalString(op.errorCode),
            "errorMessage": .optionalString(op.errorMessage),
            "conflictingFields": .array(op.conflictingFields.map { .string($0) }),
        ])
    }

    static func tagsByID(_ store: LocalStore) throws -> [Int64: LocalTag] {
        Dictionary(uniqueKeysWithValues: try store.tags().map { ($0.localID, $0) })
    }
}

/// Which records have an operation on its way, a conflict waiting, or a rejected change:
/// the markers `list` prints at the end of a line.
struct RecordMarks {
    struct Mark { var pending = false, conflict = false, rejected = false }
    private var todos: [Int64: Mark] = [:]

    init(_ store: LocalStore) throws {
        for op in try store.operations(historyLimit: 0) where op.entity == .todo {
            if op.status == .pending || op.status == .sending { todos[op.recordLocalID, default: Mark()].pending = true }
            if op.status == .rejected { todos[op.recordLocalID, default: Mark()].rejected = true }
        }
        for conflict in try store.conflicts() where conflict.entity == .todo {
            todos[conflict.recordLocalID, default: Mark()].conflict = true
        }
    }

    func todo(_ localID: Int64) -> Mark { todos[localID] ?? Mark() }
}
