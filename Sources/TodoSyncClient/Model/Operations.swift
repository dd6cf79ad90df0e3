import TodoSyncCore

/// The kinds of record a device edits (daily stats are derived by the server).
public enum EntityKind: String, Sendable, Codable {
    case tag, todo
}

/// What an operation does to its record.
public enum OperationAction: String, Sendable, Codable {
    case create, update, delete
}

/// Where an operation is in its life: `pending → sending → applied | merged | conflict | rejected`.
/// `pending`, `sending` and `rejected` operations are in the outbox; the final ones are in the log.
public enum OperationStatus: String, Sendable, Codable {
    /// Queued on the device; later edits of the same record fold into it.
    case pending
    /// Handed to the network with its opId: frozen, resent as it is until a result arrives.
    case sending
    /// The server applied it.
    case applied
    /// Applied with some fields kept at the server's values (`merge` policy).
    case merged
    /// The record had changed on the server; the operation changed nothing there.
    case conflict
    /// The server refused it (`error` says why); kept until the app acknowledges it.
    case rejected

    /// Whether the server has given its final word.
    public var isFinal: Bool { self != .pending && self != .sending }
}

/// How `sync()` settles edits that raced with another device's.
public enum ConflictStrategy: String, Sendable, CaseIterable {
    /// The server's copy wins; the local edit is dropped and logged as `conflict`.
    case reject
    /// The local edit is written over the server's.
    case clientWins = "client-wins"
    /// Field by field: edits to fields the other device left alone go through.
    case merge
    /// Nothing is decided: the conflict goes to the inbox with base, local and server copies,
    /// and the app resolves it (`resolveConflict`).
    case askApp = "ask"

    /// The policy sent to the server.
    var wireName: String {
        switch self {
        case .reject, .askApp: return "reject"
        case .clientWins: return "client-wins"
        case .merge: return "merge"
        }
    }
}

/// An operation as the app can observe it.
public struct OperationInfo: Sendable, Equatable {
    public var opID: String
    public var entity: EntityKind
    public var action: OperationAction
    public var recordLocalID: Int64
    public var status: OperationStatus
    /// The changed fields, in the contract's names (`tagId` is a local tag handle here).
    public var fields: [String]
    /// For `rejected`: the server's error code and message.
    public var errorCode: String?
    public var errorMessage: String?
    /// For `merged`: the fields that kept the server's values.
    public var conflictingFields: [String]
}

/// A conflict waiting for the app (policy `askApp`): what the device last saw (`base`), what the
/// user wanted (`local`, the changed fields) and the server's current record (`server`).
public struct SyncConflict: Sendable, Equatable {
    public var conflictID: Int64
    public var opID: String
    public var entity: EntityKind
    public var action: OperationAction
    public var recordLocalID: Int64
    public var base: [String: JSONValue]
    public var local: [String: JSONValue]
    public var server: [String: JSONValue]
    /// The server version the resolution will be based on.
    public var serverVersion: Int64
}

/// How the app settles a conflict; the choice is pushed as a new operation based on the server
/// copy the user was shown, so it cannot conflict with it.
public enum ConflictResolution: Sendable, Equatable {
    /// Write the local values over the server's (restores a record deleted on the server).
    case keepMine
    /// Keep the server's copy; nothing is pushed.
    case takeTheirs
    /// Write these values (contract field names; `tagId` a server tag id or null).
    case edited([String: JSONValue])
}
