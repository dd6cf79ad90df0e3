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
            // The log of final results is for the app to look back on; keep the newest 10,000.
            try db.execute(sql: "DELETE FROM operationLog WHERE rowid <= (SELECT MAX(rowid) FROM operationLog) - 10000")
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
            // The change did not happen: the record shows the server's values again at once
            // (fields a later operation changes stay as the user made them). The operation stays
            // in the outbox with the server's error until the app acknowledges it.
            try Outbox.undo(db, op, keeping: Set(later.flatMap(\.data.keys)))
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
        try applyServerRecord(db, entity, localID: knownLocalID, ServerRecord(record), unsettled: knownUnsettled, generation: generation)
    }

    @discardableResult
    func applyServerRecord(_ db: Database, _ entity: EntityKind, localID knownLocalID: Int64?, _ record: ServerRecord,
                           unsettled knownUnsettled: [OutboxOperation]? = nil, generation: Int64 = 0) throws -> Int64 {
        let table = entity.rawValue
        var tagLocalID: Int64?
        if entity == .todo, let tagID = record.tagID {
            tagLocalID = try Int64.fetchOne(db.cachedStatement(sql: "SELECT localId FROM tag WHERE id = ?"), arguments: [tagID])
        }
        guard let localID = try knownLocalID ?? findLocal(db, entity, id: record.id, clientID: record.clientID) else {
            return try insertServerRecord(db, entity, record, tagLocalID: tagLocalID, generation: generation)
        }
        let unsettled = try knownUnsettled ?? OutboxOperation.unsettled(db, entity: entity, localID: localID)
        if unsettled.isEmpty {
            // The common case: nothing of this device is on its way; the server's copy is the copy.
            switch entity {
            case .tag:
                try db.cachedStatement(sql: "UPDATE tag SET name = COALESCE(?, name), color = COALESCE(?, color) WHERE localId = ?")
                    .execute(arguments: [record.name, record.color, localID])
            case .todo:
                try db.cachedStatement(sql: """
                    UPDATE todo SET title = COALESCE(?, title), titleKey = COALESCE(?, titleKey), raw = COALESCE(?, raw),
                           isImportant = COALESCE(?, isImportant), isLife = COALESCE(?, isLife),
                           tagLocalId = CASE WHEN ? THEN ? ELSE tagLocalId END,
                           pendingTagId = CASE WHEN ? THEN ? ELSE pendingTagId END, difficulty = COALESCE(?, difficulty),
                           estimatedTime = COALESCE(?, estimatedTime), deadline = COALESCE(?, deadline),
                           isCompleted = COALESCE(?, isCompleted)
                    WHERE localId = ?
                    """).execute(arguments: [
                        record.title, record.title.map { Data(TitleOrder.key($0)) }, record.raw, record.isImportant, record.isLife,
                        record.hasTagID, tagLocalID, record.hasTagID, tagLocalID == nil ? record.tagID : nil,
                        record.difficulty, record.estimatedTime, record.deadline, record.isCompleted,
                        localID,
                    ])
            }
            try db.cachedStatement(sql: "UPDATE \(table) SET shadow = NULL WHERE localId = ?").execute(arguments: [localID])
        } else {
            var protected = Set<String>()
            for op in unsettled { protected.formUnion(op.data.keys) }
            let fields = Self.localFields(entity, record, tagLocalID: tagLocalID)
            try RecordFields.write(db, entity, localID: localID, fields.filter { !protected.contains($0.key) })
            if entity == .todo, record.hasTagID, !protected.contains("tag") {
                try db.execute(sql: "UPDATE todo SET pendingTagId = ? WHERE localId = ?",
                               arguments: [tagLocalID == nil ? record.tagID : nil, localID])
            }
            // The server's values of the protected fields, should their operation be rejected.
            var shadow = try String.fetchOne(db, sql: "SELECT shadow FROM \(table) WHERE localId = ?", arguments: [localID])
                .map(JSONText.object) ?? [:]
            for (name, value) in fields where protected.contains(name) { shadow[name] = value }
            try db.execute(sql: "UPDATE \(table) SET shadow = ? WHERE localId = ?", arguments: [JSONText.encode(shadow), localID])
        }
        // A tombstone for a record with a change on its way is a conflict the next push surfaces,
        // not a silent delete: the record stays visible until then.
        let pendingDelete = unsettled.contains { $0.action == .delete }
        let isDeleted = pendingDelete || (record.deletedAt != nil && unsettled.isEmpty)
        try db.cachedStatement(sql: """
            UPDATE \(table) SET id = COALESCE(?, id), clientId = COALESCE(clientId, ?), clientKey = COALESCE(clientKey, ?),
                   version = ?, createdAt = COALESCE(?, createdAt), updatedAt = ?, deletedAt = ?, isDeleted = ?,
                   seenGeneration = MAX(seenGeneration, ?)
            WHERE localId = ?
            """).execute(arguments: [
                record.id, record.clientID, record.clientID.map(ClientID.key), record.version, record.createdAt, record.updatedAt,
                record.deletedAt, isDeleted, generation, localID,
            ])
        if entity == .tag { try resolvePendingTag(db, serverID: record.id, localID: localID) }
        return localID
    }

    /// Links the todos that named this tag before the device had it.
    private func resolvePendingTag(_ db: Database, serverID: Int64?, localID: Int64) throws {
        guard let serverID else { return }
        try db.cachedStatement(sql: "UPDATE todo SET tagLocalId = ?, pendingTagId = NULL WHERE pendingTagId = ?")
            .execute(arguments: [localID, serverID])
    }

    /// The record's editable fields in local terms.
    static func localFields(_ entity: EntityKind, _ record: ServerRecord, tagLocalID: Int64?) -> JSONObject {
        var fields: JSONObject = [:]
        switch entity {
        case .tag:
            if let name = record.name { fields["name"] = .string(name) }
            if let color = record.color { fields["color"] = .string(color) }
        case .todo:
            if let title = record.title { fields["title"] = .string(title) }
            if let raw = record.raw { fields["raw"] = .string(raw) }
            if let flag = record.isImportant { fields["isImportant"] = .bool(flag) }
            if let flag = record.isLife { fields["isLife"] = .bool(flag) }
            if record.hasTagID { fields["tag"] = .optionalInt(tagLocalID) }
            if let value = record.difficulty { fields["difficulty"] = .int(value) }
            if let value = record.estimatedTime { fields["estimatedTime"] = .int(value) }
            if let deadline = record.deadline { fields["deadline"] = .string(deadline) }
            if let flag = record.isCompleted { fields["isCompleted"] = .bool(flag) }
        }
        return fields
    }

    /// The local row of a server record: by server id, else by clientId.
    func findLocal(_ db: Database, _ entity: EntityKind, id: Int64?, clientID: String?) throws -> Int64? {
        if let id, let localID = try Int64.fetchOne(
            db.cachedStatement(sql: entity == .tag ? "SELECT localId FROM tag WHERE id = ?" : "SELECT localId FROM todo WHERE id = ?"),
            arguments: [id]) {
            return localID
        }
        guard let clientID else { return nil }
        return try Int64.fetchOne(
            db.cachedStatement(sql: entity == .tag ? "SELECT localId FROM tag WHERE clientKey = ?" : "SELECT localId FROM todo WHERE clientKey = ?"),
            arguments: [ClientID.key(clientID)])
    }

    private func insertServerRecord(_ db: Database, _ entity: EntityKind, _ record: ServerRecord, tagLocalID: Int64?,
                                    generation: Int64) throws -> Int64 {
        let deleted = record.deletedAt != nil
        switch entity {
        case .tag:
            try db.cachedStatement(sql: """
                INSERT INTO tag (id, clientId, clientKey, version, createdAt, updatedAt, deletedAt, isDeleted, seenGeneration, name, color)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [
                    record.id, record.clientID, record.clientID.map(ClientID.key), record.version,
                    record.createdAt ?? Timestamp.now().rfc3339, record.updatedAt, record.deletedAt, deleted, generation,
                    record.name ?? "", record.color ?? "",
                ])
            let inserted = db.lastInsertedRowID
            try resolvePendingTag(db, serverID: record.id, localID: inserted)
            return inserted
        case .todo:
            let title = record.title ?? ""
            try db.cachedStatement(sql: """
                INSERT INTO todo (id, clientId, clientKey, version, createdAt, updatedAt, deletedAt, isDeleted, seenGeneration,
                                  title, titleKey, raw, isImportant, isLife, tagLocalId, pendingTagId, difficulty, estimatedTime,
                                  deadline, isCompleted)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [
                    record.id, record.clientID, record.clientID.map(ClientID.key), record.version,
                    record.createdAt ?? Timestamp.now().rfc3339, record.updatedAt, record.deletedAt, deleted, generation,
                    title, Data(TitleOrder.key(title)), record.raw ?? title, record.isImportant ?? false, record.isLife ?? false,
                    tagLocalID, tagLocalID == nil ? record.tagID : nil, record.difficulty ?? 0, record.estimatedTime ?? 0,
                    record.deadline ?? "2000-01-01",
                    record.isCompleted ?? false,
                ])
        }
        return db.lastInsertedRowID
    }
}
