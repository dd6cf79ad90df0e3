import Foundation
import GRDB
import TodoSyncCore

/// One row of the outbox.
///
/// `data` holds the changed fields in the contract's names, except that a todo's tag is kept as
/// `tag`: a *local* tag handle, turned into `tagId` or `tagClientId` only when the operation is
/// sent (its tag may get a server id meanwhile). `base` holds the server's values of those fields
/// at `baseVersion`, in the contract's names (`tagId` a server id). An operation made on top of
/// one that is already sending `waitsForPredecessor`: its base comes from that one's result.
struct OutboxOperation: Sendable, Equatable {
    var seq: Int64?
    var opID: String
    var entity: EntityKind
    var action: OperationAction
    var recordLocalID: Int64
    var data: JSONObject
    var base: JSONObject
    var baseVersion: Int64?
    var waitsForPredecessor: Bool
    /// A resolution that must restore a deleted record is pushed with `client-wins`.
    var policyOverride: ConflictStrategy?
    /// `pending`, `sending` or `rejected`.
    var state: OperationStatus
    /// The operation's JSON as first sent; resent byte for byte until a result arrives.
    var payload: String?
    var errorCode: String?
    var errorMessage: String?

    init(entity: EntityKind, action: OperationAction, recordLocalID: Int64, data: JSONObject = [:], base: JSONObject = [:],
         baseVersion: Int64? = nil, waitsForPredecessor: Bool = false, policyOverride: ConflictStrategy? = nil) {
        self.opID = UUID().uuidString.lowercased()
        self.entity = entity
        self.action = action
        self.recordLocalID = recordLocalID
        self.data = data
        self.base = base
        self.baseVersion = baseVersion
        self.waitsForPredecessor = waitsForPredecessor
        self.policyOverride = policyOverride
        self.state = .pending
    }

    init(row: Row) {
        seq = row["seq"]
        opID = row["opId"]
        entity = EntityKind(rawValue: row["entity"])!
        action = OperationAction(rawValue: row["action"])!
        recordLocalID = row["recordLocalId"]
        data = JSONText.object(row["data"])
        base = JSONText.object(row["base"])
        baseVersion = row["baseVersion"]
        waitsForPredecessor = row["waitsForPredecessor"]
        policyOverride = (row["policyOverride"] as String?).flatMap(ConflictStrategy.init(rawValue:))
        state = OperationStatus(rawValue: row["state"])!
        payload = row["payload"]
        errorCode = row["errorCode"]
        errorMessage = row["errorMessage"]
    }

    /// The changed fields in the contract's names.
    var fieldNames: [String] { data.keys.map(RecordFields.contractName).sorted() }

    var info: OperationInfo {
        OperationInfo(opID: opID, entity: entity, action: action, recordLocalID: recordLocalID, status: state,
                      fields: fieldNames, errorCode: errorCode, errorMessage: errorMessage, conflictingFields: [])
    }

    // MARK: Persistence

    /// Every outbox row in queue order.
    static func fetchAll(_ db: Database) throws -> [OutboxOperation] {
        try Row.fetchAll(db, sql: "SELECT * FROM outbox ORDER BY seq").map(OutboxOperation.init(row:))
    }

    /// The record's newest operation still on its way (pending or sending).
    static func latestUnsettled(_ db: Database, entity: EntityKind, localID: Int64) throws -> OutboxOperation? {
        try Row.fetchOne(
            db, sql: "SELECT * FROM outbox WHERE entity = ? AND recordLocalId = ? AND state IN ('pending', 'sending') ORDER BY seq DESC LIMIT 1",
            arguments: [entity.rawValue, localID]
        ).map(OutboxOperation.init(row:))
    }

    /// The operation `opID` if it is in `state`.
    static func fetch(_ db: Database, opID: String, state: OperationStatus) throws -> OutboxOperation? {
        try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE opId = ? AND state = ?", arguments: [opID, state.rawValue])
            .map(OutboxOperation.init(row:))
    }

    /// The record's operations on their way after `seq` (all of them when nil).
    static func unsettled(_ db: Database, entity: EntityKind, localID: Int64, after seq: Int64? = nil) throws -> [OutboxOperation] {
        try Row.fetchAll(
            db, sql: "SELECT * FROM outbox WHERE entity = ? AND recordLocalId = ? AND state IN ('pending', 'sending') AND seq > ? ORDER BY seq",
            arguments: [entity.rawValue, localID, seq ?? 0]
        ).map(OutboxOperation.init(row:))
    }

    mutating func insert(_ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO outbox (opId, entity, action, recordLocalId, data, base, baseVersion, waitsForPredecessor,
                                    policyOverride, state, payload, errorCode, errorMessage, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [opID, entity.rawValue, action.rawValue, recordLocalID, JSONText.encode(data), JSONText.encode(base),
                        baseVersion, waitsForPredecessor, policyOverride?.rawValue, state.rawValue, payload, errorCode,
                        errorMessage, Timestamp.now().rfc3339])
        seq = db.lastInsertedRowID
    }

    func update(_ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE outbox SET action = ?, data = ?, base = ?, baseVersion = ?, waitsForPredecessor = ?, policyOverride = ?,
                                  state = ?, payload = ?, errorCode = ?, errorMessage = ?
                WHERE seq = ?
                """,
            arguments: [action.rawValue, JSONText.encode(data), JSONText.encode(base), baseVersion, waitsForPredecessor,
                        policyOverride?.rawValue, state.rawValue, payload, errorCode, errorMessage, seq])
    }

    func delete(_ db: Database) throws {
        try db.execute(sql: "DELETE FROM outbox WHERE seq = ?", arguments: [seq])
    }
}
