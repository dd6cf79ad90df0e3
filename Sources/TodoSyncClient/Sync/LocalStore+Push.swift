import Foundation
import GRDB
import TodoSyncCore

/// One push request's worth of operations, already marked `sending` in the store.
struct PushBatch: Sendable {
    var policy: ConflictStrategy
    /// The operations' JSON, in the order they are sent.
    var operations: [(opID: String, payload: String)]
    /// The operations this batch moved from `pending` to `sending` (none of them has been on
    /// the network before): what a 426 answer, which applies nothing, gives back.
    var frozenNow: [String] = []
}

extension LocalStore {
    /// The next batch to push, frozen in one transaction (Outbox F1-F3).
    func nextPushBatch(policy: ConflictStrategy, schemaVersion: Int = SchemaVersion.current, maxOperations: Int = 500,
                       maxBytes: Int = 768 * 1024) throws -> PushBatch? {
        try pool.write { db in
            try Outbox.freeze(db, policy: policy, schemaVersion: schemaVersion, maxOperations: maxOperations, maxBytes: maxBytes)
        }
    }

    /// Gives operations frozen by a batch the server refused whole without applying anything
    /// (426) back to `pending`, as they were: the queue is what it was before the sync.
    func thaw(_ opIDs: [String]) throws {
        guard !opIDs.isEmpty else { return }
        try pool.write { db in try Outbox.thaw(db, opIDs: opIDs) }
    }

    /// Applies a push response in one transaction: each result settles its operation (Outbox S1-S4).
    func applyPushResults(_ results: [JSONValue], policy: ConflictStrategy) throws -> [OperationStatus] {
        try pool.write { db in try Outbox.settle(db, results: results, policy: policy) }
    }
}

/// The contract's push operations, as sent.
enum PushWire {
    /// The contract's push operation for `op`, with the fields a client of `schemaVersion` knows.
    static func json(_ db: Database, _ op: OutboxOperation, schemaVersion: Int = SchemaVersion.current) throws -> String {
        guard let record = try SyncedRecords.fetch(db, op.entity, localID: op.recordLocalID) else {
            preconditionFailure("outbox operation without its record")
        }
        let serverID = record.state.serverID
        let clientID = record.state.clientID
        var object: JSONObject = ["opId": .string(op.opID), "entity": .string(op.entity.rawValue), "action": .string(op.action.rawValue)]
        if op.action == .create || serverID == nil {
            object["clientId"] = .optionalString(clientID)
        } else {
            object["id"] = .int(serverID!)
        }
        if op.action != .create, let baseVersion = op.baseVersion { object["baseVersion"] = .int(baseVersion) }
        if op.action != .delete {
            var data: JSONObject = [:]
            for (name, value) in op.data where RecordFields.known(op.entity, name, schemaVersion: schemaVersion) {
                if name == "tag", let tagLocalID = value.int64Value {
                    let tag = try TagRecord.fetchOne(db, key: tagLocalID)?.state
                    if let id = tag?.serverID {
                        data["tagId"] = .int(id)
                    } else {
                        data["tagClientId"] = .optionalString(tag?.clientID)
                    }
                } else {
                    let (key, converted) = try RecordFields.contractTerms(db, name, value)
                    data[key] = converted
                }
            }
            object["data"] = .object(data)
            if op.action == .update {
                object["base"] = .object(op.base.filter { RecordFields.known(op.entity, $0.key, schemaVersion: schemaVersion) })
            }
        }
        return JSONText.encode(object)
    }
}
