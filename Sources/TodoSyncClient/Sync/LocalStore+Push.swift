import Foundation
import GRDB
import TodoSyncCore

/// One push request's worth of operations, already marked `sending` in the store.
struct PushBatch: Sendable {
    var policy: ConflictStrategy
    /// The operations' JSON, in the order they are sent.
    var operations: [(opID: String, payload: String)]
}

extension LocalStore {
    /// The next batch to push, marked `sending` (and its payloads frozen) in one transaction
    /// before anything goes on the network. Operations already `sending` (a crash or a lost
    /// response) go first, byte for byte as before. Then pending ones: tag creates first (a todo
    /// may name a new tag by its clientId only once the create is ahead of it), the rest in the
    /// order the user made them. An operation waiting for its predecessor's result waits for the
    /// next batch. nil when nothing is left to send.
    func nextPushBatch(policy: ConflictStrategy, maxOperations: Int = 500, maxBytes: Int = 768 * 1024) throws -> PushBatch? {
        try pool.write { db in
            let queued = try OutboxOperation.fetchAll(db)
            let sending = queued.filter { $0.state == .sending }
            let pending = queued.filter { $0.state == .pending && !$0.waitsForPredecessor }
            let tagCreates = pending.filter { $0.entity == .tag && $0.action == .create }
            let ordered = sending + tagCreates + pending.filter { !($0.entity == .tag && $0.action == .create) }
            guard let first = ordered.first else { return nil }
            let batchPolicy = first.policyOverride ?? policy
            var batch = PushBatch(policy: batchPolicy, operations: [])
            var bytes = 0
            for var op in ordered where (op.policyOverride ?? policy) == batchPolicy {
                let payload = try op.payload ?? Self.wireJSON(db, op)
                if !batch.operations.isEmpty
                    && (batch.operations.count >= maxOperations || bytes + payload.utf8.count > maxBytes) { break }
                if op.state == .pending {
                    op.payload = payload
                    op.state = .sending
                    try op.update(db)
                }
                bytes += payload.utf8.count
                batch.operations.append((op.opID, payload))
            }
            return batch
        }
    }

    /// The contract's push operation for `op`.
    static func wireJSON(_ db: Database, _ op: OutboxOperation) throws -> String {
        guard let record = try Row.fetchOne(db, sql: "SELECT id, clientId FROM \(op.entity.rawValue) WHERE localId = ?",
                                            arguments: [op.recordLocalID]) else {
            preconditionFailure("outbox operation without its record")
        }
        let serverID: Int64? = record["id"]
        let clientID: String? = record["clientId"]
        var object: JSONObject = ["opId": .string(op.opID), "entity": .string(op.entity.rawValue), "action": .string(op.action.rawValue)]
        if op.action == .create || serverID == nil {
            object["clientId"] = .optionalString(clientID)
        } else {
            object["id"] = .int(serverID!)
        }
        if op.action != .create, let baseVersion = op.baseVersion { object["baseVersion"] = .int(baseVersion) }
        if op.action != .delete {
            var data: JSONObject = [:]
            for (name, value) in op.data {
                if name == "tag", let tagLocalID = value.int64Value {
                    let tag = try Row.fetchOne(db, sql: "SELECT id, clientId FROM tag WHERE localId = ?", arguments: [tagLocalID])
                    if let id: Int64 = tag?["id"] {
                        data["tagId"] = .int(id)
                    } else {
                        data["tagClientId"] = .optionalString(tag?["clientId"])
                    }
                } else {
                    let (key, converted) = try RecordFields.contractTerms(db, name, value)
                    data[key] = converted
                }
            }
            object["data"] = .object(data)
            if op.action == .update { object["base"] = .object(op.base) }
        }
        return JSONText.encode(object)
    }

    /// Applies a push response in one transaction: each result settles its operation.
    func applyPushResults(_ results: [JSONValue], policy: ConflictStrategy) throws -> [OperationStatus] {
        try pool.write { db in
            var statuses: [OperationStatus] = []
            for item in results {
                guard let result = item.objectValue, let opID = result["opId"]?.stringValue,
                      let status = result["status"]?.stringValue.flatMap(OperationStatus.init(rawValue:)),
                      let row = try Row.fetchOne(db, sql: "SELECT * FROM outbox WHERE opId = ? AND state = 'sending'", arguments: [opID])
                else { continue }
                let op = OutboxOperation(row: row)
                try settle(db, op, status: status, result: result, policy: op.policyOverride ?? policy)
                try Outbox.refreshVisibility(db, op.entity, op.recordLocalID)
                statuses.append(status)
            }
            return statuses
        }
    }

    private func settle(_ db: Database, _ op: OutboxOperation, status: OperationStatus, result: JSONObject,
                        policy: ConflictStrategy) throws {
        let record = result["record"]?.objectValue
        let later = try OutboxOperation.unsettled(db, entity: op.entity, localID: op.recordLocalID, after: op.seq)
        switch status {
        case .applied, .merged:
            if let record { try applyServerRecord(db, op.entity, localID: op.recordLocalID, record, unsettled: later) }
            // The next operation of this record was made on top of this one.
            if var next = later.first, next.waitsForPredecessor, let record {
                next.baseVersion = record["version"]?.int64Value
                next.base = [:]
                for name in next.data.keys {
                    let key = name == "tag" ? "tagId" : name
                    next.base[key] = record[key] ?? .null
                }
                next.waitsForPredecessor = false
                try next.update(db)
            }
            let conflicting = (result["conflictingFields"]?.arrayValue ?? []).compactMap(\.stringValue)
            try op.settle(db, status: status, conflictingFields: conflicting)
        case .conflict:
            if let record {
                if policy == .askApp {
                    try db.execute(
                        sql: """
                            INSERT INTO conflict (opId, entity, action, recordLocalId, base, local, server, serverVersion, createdAt)
                            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                            """,
                        arguments: [op.opID, op.entity.rawValue, op.action.rawValue, op.recordLocalID, JSONText.encode(op.base),
                                    JSONText.encode(try RecordFields.contractTerms(db, op.data)), JSONText.encode(record),
                                    record["version"]?.int64Value ?? 0, Timestamp.now().rfc3339])
                }
                try applyServerRecord(db, op.entity, localID: op.recordLocalID, record, unsettled: later)
            }
            try inheritBase(db, from: op, next: later.first)
            try op.settle(db, status: .conflict)
        case .rejected:
            var rejected = op
            let error = result["error"]?.objectValue
            rejected.state = .rejected
            rejected.errorCode = error?["code"]?.stringValue ?? "rejected"
            rejected.errorMessage = error?["message"]?.stringValue
            try rejected.update(db)
            try inheritBase(db, from: op, next: later.first)
        case .pending, .sending:
            break
        }
    }

    /// The next operation made on top of one that did not apply keeps the base the user saw,
    /// so the server still detects what changed meanwhile.
    private func inheritBase(_ db: Database, from op: OutboxOperation, next: OutboxOperation?) throws {
        guard var next, next.waitsForPredecessor else { return }
        next.baseVersion = op.baseVersion
        for name in next.data.keys {
            let key = name == "tag" ? "tagId" : name
            if let value = op.base[key] { next.base[key] = value }
        }
        next.waitsForPredecessor = false
        try next.update(db)
    }

    /// Writes a record the server sent (push result or pull page) into the device's row,
    /// keeping the fields that operations still on their way change (the user's edit is still
    /// going to the server) and their base untouched. Returns the row's local id.
    @discardableResult
    func applyServerRecord(_ db: Database, _ entity: EntityKind, localID knownLocalID: Int64?, _ record: JSONObject,
                           unsettled knownUnsettled: [OutboxOperation]? = nil, generation: Int64 = 0) throws -> Int64 {
        let serverID = record["id"]?.int64Value
        let clientID = record["clientId"]?.stringValue
        let table = entity.rawValue
        var localID = knownLocalID
        if localID == nil, let serverID {
            localID = try Int64.fetchOne(db.cachedStatement(sql: "SELECT localId FROM \(table) WHERE id = ?"), arguments: [serverID])
        }
        if localID == nil, let clientID {
            localID = try Int64.fetchOne(db.cachedStatement(sql: "SELECT localId FROM \(table) WHERE clientKey = ?"),
                                         arguments: [ClientID.key(clientID)])
        }
        var fields: JSONObject = [:]
        for name in RecordFields.names(entity) {
            let key = name == "tag" ? "tagId" : name
            guard let value = record[key] else { continue }
            let (localName, local) = try RecordFields.localTerms(db, key, value)
            fields[localName] = local
        }
        let deletedAt = record["deletedAt"]?.stringValue
        guard let localID else {
            return try insertServerRecord(db, entity, record, fields: fields, deletedAt: deletedAt, generation: generation)
        }
        let unsettled = try knownUnsettled ?? OutboxOperation.unsettled(db, entity: entity, localID: localID)
        var protected = Set<String>()
        for op in unsettled { protected.formUnion(op.data.keys) }
        let pendingDelete = unsettled.contains { $0.action == .delete }
        try RecordFields.write(db, entity, localID: localID, fields.filter { !protected.contains($0.key) })
        // A tombstone for a record with a change on its way is a conflict the next push surfaces,
        // not a silent delete: the record stays visible until then.
        let isDeleted = pendingDelete || (deletedAt != nil && unsettled.isEmpty)
        try db.execute(
            sql: """
                UPDATE \(table) SET id = COALESCE(?, id), clientId = COALESCE(clientId, ?), clientKey = COALESCE(clientKey, ?),
                       version = ?, createdAt = COALESCE(?, createdAt), updatedAt = ?, deletedAt = ?, isDeleted = ?,
                       seenGeneration = MAX(seenGeneration, ?)
                WHERE localId = ?
                """,
            arguments: [serverID, clientID, clientID.map(ClientID.key), record["version"]?.int64Value, record["createdAt"]?.stringValue,
                        record["updatedAt"]?.stringValue, deletedAt, isDeleted, generation, localID])
        return localID
    }

    private func insertServerRecord(_ db: Database, _ entity: EntityKind, _ record: JSONObject, fields: JSONObject,
                                    deletedAt: String?, generation: Int64) throws -> Int64 {
        let clientID = record["clientId"]?.stringValue
        let common: [(any DatabaseValueConvertible)?] = [
            record["id"]?.int64Value, clientID, clientID.map(ClientID.key), record["version"]?.int64Value,
            record["createdAt"]?.stringValue ?? Timestamp.now().rfc3339, record["updatedAt"]?.stringValue, deletedAt,
            deletedAt != nil, generation,
        ]
        switch entity {
        case .tag:
            try db.cachedStatement(sql: """
                INSERT INTO tag (id, clientId, clientKey, version, createdAt, updatedAt, deletedAt, isDeleted, seenGeneration, name, color)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: StatementArguments(common + [fields["name"]?.stringValue ?? "", fields["color"]?.stringValue ?? ""]))
        case .todo:
            let title = fields["title"]?.stringValue ?? ""
            let values: [(any DatabaseValueConvertible)?] = [
                title, Data(TitleOrder.key(title)), fields["raw"]?.stringValue ?? title, fields["isImportant"]?.boolValue ?? false,
                fields["isLife"]?.boolValue ?? false, fields["tag"]?.int64Value, fields["difficulty"]?.int64Value ?? 0,
                fields["estimatedTime"]?.int64Value ?? 0, fields["deadline"]?.stringValue ?? "2000-01-01",
                fields["isCompleted"]?.boolValue ?? false,
            ]
            try db.cachedStatement(sql: """
                INSERT INTO todo (id, clientId, clientKey, version, createdAt, updatedAt, deletedAt, isDeleted, seenGeneration,
                                  title, titleKey, raw, isImportant, isLife, tagLocalId, difficulty, estimatedTime, deadline, isCompleted)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: StatementArguments(common + values))
        }
        return db.lastInsertedRowID
    }
}
