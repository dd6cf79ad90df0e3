import Foundation
import GRDB
import TodoSyncCore

/// The outbox: every operation this device owes the server, and every rule of an operation's
/// life (CLIENT-NOTES "The outbox", "Applying results", "Conflicts"). Nothing else changes an
/// operation's state; every function here runs inside the caller's one local transaction.
///
/// An operation is `pending` (foldable), `pending waiting` (made on top of one in flight: no base
/// until that one's result), `sending` (frozen: its opId and payload are stored), or `rejected`
/// (kept until the app acknowledges it); a final result moves it to the log (`operationLog`).
/// "Newest op" is the record's newest pending or sending operation. Every row has a test named
/// after it in OutboxTransitionTests (which checks that this table and the tests agree).
///
/// | Row | Newest op of the record       | Event                            | Then                           | Effect |
/// |-----|-------------------------------|----------------------------------|--------------------------------|--------|
/// | E1  | (new record)                  | create                           | pending create                 | the record is written with a new clientId |
/// | E2  | none                          | edit / delete                    | pending update / delete        | base = the edited fields' current values, baseVersion = the record's version |
/// | E3  | pending create                | edit                             | pending create                 | data takes the latest fields |
/// | E4  | pending update                | edit                             | pending update                 | data gains the fields; base keeps the first edit's values |
/// | E5  | pending update, not waiting   | edit back to the base values     | none                           | the operation is removed: nothing to send |
/// | E6  | pending create                | delete                           | none                           | operation and record removed: nothing is sent |
/// | E7  | pending update                | delete                           | pending delete                 | data and base cleared; the record is hidden |
/// | E8  | pending delete                | delete / edit                    | pending delete                 | delete: nothing; edit: `notFound` (the record is hidden) |
/// | E9  | sending                       | edit / delete                    | sending + pending waiting      | a new operation after it, without base until R1 / R2 |
/// | F1  | sending                       | freeze                           | sending                        | sent first, its stored payload byte for byte (after a crash or lost response) |
/// | F2  | pending                       | freeze                           | sending                        | payload and state stored in one transaction; tag creates first; one policy per batch; ≤ 500 ops, ≤ 768 KiB |
/// | F3  | pending waiting               | freeze                           | pending waiting                | not sent until R1 / R2 |
/// | F4  | sending (frozen by this batch) | the batch answered 426           | pending                        | nothing was applied: payload unset, as before the sync |
/// | S1  | sending                       | result applied / merged          | log applied / merged           | the server record is stored (fields later ops change are kept); then R1 |
/// | S2  | sending                       | result conflict                  | log conflict                   | the server record is stored; policy `ask`: an inbox row (base, local, server); then R2 |
/// | S3  | sending                       | result rejected                  | rejected                       | the fields it changed show the newest server values again; then R2 |
/// | S4  | not sending                   | result                           | unchanged                      | ignored (a result for no operation in flight) |
/// | R1  | pending waiting               | predecessor applied / merged     | pending                        | baseVersion and base (of the fields it changes) from the returned record |
/// | R2  | pending waiting               | predecessor conflict / rejected  | pending                        | baseVersion and base inherited from the predecessor |
/// | A1  | rejected                      | acknowledge                      | log rejected                   | a rejected create, or a change the server answered `not_found`, forgets the record |
/// | C1  | (inbox conflict)              | keep mine / edited               | new pending update             | based on the server copy's version; `client-wins` if the server deleted the record |
/// | C2  | (inbox conflict of a delete)  | keep mine                        | new pending delete             | based on the server copy's version |
/// | C3  | (inbox conflict)              | take theirs                      | none                           | the inbox row goes; the device already shows the server copy |
///
/// Coalescing keeps one operation per record while nothing is in flight; a record never has more
/// than one `sending` and one `pending` operation after it.
enum Outbox {
    // MARK: Enqueue and coalesce (E1-E9)

    /// E1: queues the create of a record just written.
    static func create(_ db: Database, _ entity: EntityKind, localID: Int64, data: JSONObject) throws -> LocalChange {
        var op = OutboxOperation(entity: entity, action: .create, recordLocalID: localID, data: data)
        try op.insert(db)
        return LocalChange(localID: localID, opID: op.opID)
    }

    /// E2-E5, E8 (edit), E9: writes `changes` (local terms) to the record and queues them.
    static func edit(_ db: Database, _ entity: EntityKind, localID: Int64, changes: JSONObject) throws -> LocalChange {
        guard let record = try SyncedRecords.fetch(db, entity, localID: localID), !record.state.isDeleted else {
            throw LocalStoreError.notFound  // E8: a record with a delete on its way is hidden
        }
        let current = record.syncedFields
        let changed = changes.filter { current[$0.key] != $0.value }
        guard !changed.isEmpty else {
            return LocalChange(localID: localID, opID: try OutboxOperation.latestUnsettled(db, entity: entity, localID: localID)?.opID)
        }
        try RecordFields.write(db, entity, localID: localID, changed)

        let latest = try OutboxOperation.latestUnsettled(db, entity: entity, localID: localID)
        if var op = latest, op.state == .pending {
            switch op.action {
            case .create:  // E3
                op.data.merge(changed) { $1 }
            case .update:  // E4
                for (name, value) in changed {
                    if op.data[name] == nil {
                        let (key, baseValue) = try RecordFields.contractTerms(db, name, current[name]!)
                        op.base[key] = baseValue
                    }
                    op.data[name] = value
                }
                // E5: an edit undone before it was sent is no edit.
                if !op.waitsForPredecessor {
                    for (name, value) in op.data {
                        let (key, contractValue) = try RecordFields.contractTerms(db, name, value)
                        if op.base[key] == contractValue {
                            op.data[name] = nil
                            op.base[key] = nil
                        }
                    }
                    if op.data.isEmpty {
                        try op.delete(db)
                        return LocalChange(localID: localID, opID: nil)
                    }
                }
            case .delete:
                throw LocalStoreError.notFound
            }
            try op.update(db)
            return LocalChange(localID: localID, opID: op.opID)
        }
        // E2 (nothing on its way) or E9 (the newest is sending: its result settles the base).
        var base: JSONObject = [:]
        for name in changed.keys {
            let (key, value) = try RecordFields.contractTerms(db, name, current[name]!)
            base[key] = value
        }
        var op = OutboxOperation(
            entity: entity, action: .update, recordLocalID: localID, data: changed, base: base,
            baseVersion: latest == nil ? record.state.version : nil, waitsForPredecessor: latest != nil)
        try op.insert(db)
        return LocalChange(localID: localID, opID: op.opID)
    }

    /// E2, E6-E9: deletes the record locally and queues the delete.
    static func delete(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> LocalChange {
        guard let record = try SyncedRecords.fetch(db, entity, localID: localID), !record.state.isDeleted else {
            throw LocalStoreError.notFound
        }
        let latest = try OutboxOperation.latestUnsettled(db, entity: entity, localID: localID)
        if var op = latest, op.state == .pending {
            switch op.action {
            case .create:  // E6: never sent, nothing to tell the server.
                try op.delete(db)
                try forget(db, entity, localID: localID)
                return LocalChange(localID: localID, opID: nil)
            case .update:  // E7
                op.action = .delete
                op.data = [:]
                op.base = [:]
                try op.update(db)
                try markDeleted(db, entity, localID)
                return LocalChange(localID: localID, opID: op.opID)
            case .delete:  // E8
                return LocalChange(localID: localID, opID: op.opID)
            }
        }
        var op = OutboxOperation(
            entity: entity, action: .delete, recordLocalID: localID,
            baseVersion: latest == nil ? record.state.version : nil, waitsForPredecessor: latest != nil)
        try op.insert(db)
        try markDeleted(db, entity, localID)
        return LocalChange(localID: localID, opID: op.opID)
    }

    // MARK: Freeze for sending (F1-F3)

    /// The next batch to push, marked `sending` (and its payloads frozen) in the caller's
    /// transaction, before anything goes on the network. Operations already `sending` (F1) go
    /// first, byte for byte as before. Then pending ones (F2): tag creates first (a todo may name
    /// a new tag by its clientId only once the create is ahead of it), the rest in the order the
    /// user made them. Waiting operations (F3) wait for a later batch. nil when nothing is left.
    static func freeze(_ db: Database, policy: ConflictStrategy, schemaVersion: Int = SchemaVersion.current, maxOperations: Int = 500,
                       maxBytes: Int = 768 * 1024) throws -> PushBatch? {
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
            let payload = try op.payload ?? PushWire.json(db, op, schemaVersion: schemaVersion)
            if !batch.operations.isEmpty
                && (batch.operations.count >= maxOperations || bytes + payload.utf8.count > maxBytes) { break }
            if op.state == .pending {
                op.payload = payload
                op.state = .sending
                try op.update(db)
                batch.frozenNow.append(op.opID)
            }
            bytes += payload.utf8.count
            batch.operations.append((op.opID, payload))
        }
        return batch
    }

    /// F4: a batch the server refused whole, applying nothing (426 `upgrade_required`): the
    /// operations it froze go back to `pending`, payload unset. Only those: an operation that was
    /// `sending` before may have reached the server in an earlier attempt.
    static func thaw(_ db: Database, opIDs: [String]) throws {
        for var op in try OutboxOperation.filter(opIDs.contains(OutboxOperation.Columns.opID)).fetchAll(db) where op.state == .sending {
            op.state = .pending
            op.payload = nil
            try op.update(db)
        }
    }

    // MARK: Settle a result (S1-S4)

    /// Applies a push response: each result settles its operation. Returns the statuses of the
    /// results that matched an operation in flight.
    static func settle(_ db: Database, results: [JSONValue], policy: ConflictStrategy) throws -> [OperationStatus] {
        var statuses: [OperationStatus] = []
        var inFlight = Dictionary(uniqueKeysWithValues: try OutboxOperation.filter(OutboxOperation.Columns.state == OperationStatus.sending.rawValue)
            .fetchAll(db).map { ($0.opID, $0) })
        for item in results {
            guard let result = item.objectValue, let opID = result["opId"]?.stringValue,
                  let status = result["status"]?.stringValue.flatMap(OperationStatus.init(rawValue:)),
                  let op = inFlight.removeValue(forKey: opID)
            else { continue }  // S4
            try settle(db, op, status: status, result: result, policy: op.policyOverride ?? policy)
            try refreshVisibility(db, op.entity, op.recordLocalID)
            statuses.append(status)
        }
        try OperationLog.trim(db)
        return statuses
    }

    private static func settle(_ db: Database, _ op: OutboxOperation, status: OperationStatus, result: JSONObject,
                               policy: ConflictStrategy) throws {
        let record = result["record"]?.objectValue
        let later = try OutboxOperation.unsettled(db, entity: op.entity, localID: op.recordLocalID, after: op.seq)
        switch status {
        case .applied, .merged:  // S1
            if let record { try ServerRecords.apply(db, op.entity, localID: op.recordLocalID, ServerRecord(record), unsettled: later) }
            if let next = later.first, let record { try rebase(db, next, ontoApplied: record) }
            let conflicting = (result["conflictingFields"]?.arrayValue ?? []).compactMap(\.stringValue)
            try finish(db, op, status: status, conflictingFields: conflicting)
        case .conflict:  // S2
            if let record {
                if policy == .askApp {
                    var conflict = ConflictRecord(
                        opID: op.opID, entity: op.entity, action: op.action, recordLocalID: op.recordLocalID, base: op.base,
                        local: try RecordFields.contractTerms(db, op.data), server: record,
                        serverVersion: record["version"]?.int64Value ?? 0)
                    try conflict.insert(db)
                }
                try ServerRecords.apply(db, op.entity, localID: op.recordLocalID, ServerRecord(record), unsettled: later)
            }
            try rebase(db, later.first, inheritingFrom: op)
            try finish(db, op, status: .conflict)
        case .rejected:  // S3
            var rejected = op
            let error = result["error"]?.objectValue
            rejected.state = .rejected
            rejected.errorCode = error?["code"]?.stringValue ?? "rejected"
            rejected.errorMessage = error?["message"]?.stringValue
            try rejected.update(db)
            // The change did not happen: the record shows the server's values again at once
            // (fields a later operation changes stay as the user made them). The operation stays
            // in the outbox with the server's error until the app acknowledges it (A1).
            try undo(db, op, keeping: Set(later.flatMap(\.data.keys)))
            try rebase(db, later.first, inheritingFrom: op)
        case .pending, .sending:
            break
        }
    }

    // MARK: Rebase an edit made on top of an operation in flight (R1, R2)

    /// R1: the next operation of the record was made on top of one the server applied: its base
    /// is the returned record.
    private static func rebase(_ db: Database, _ next: OutboxOperation, ontoApplied record: JSONObject) throws {
        guard next.waitsForPredecessor else { return }
        var next = next
        next.baseVersion = record["version"]?.int64Value
        next.base = [:]
        for name in next.data.keys {
            let key = RecordFields.contractName(name)
            next.base[key] = record[key] ?? .null
        }
        next.waitsForPredecessor = false
        try next.update(db)
    }

    /// R2: the next operation made on top of one that did not apply keeps the base the user saw,
    /// so the server still detects what changed meanwhile.
    private static func rebase(_ db: Database, _ next: OutboxOperation?, inheritingFrom op: OutboxOperation) throws {
        guard var next, next.waitsForPredecessor else { return }
        next.baseVersion = op.baseVersion
        for name in next.data.keys {
            let key = RecordFields.contractName(name)
            if let value = op.base[key] { next.base[key] = value }
        }
        next.waitsForPredecessor = false
        try next.update(db)
    }

    // MARK: Acknowledge a rejection (A1)

    /// A1: a `rejected` operation leaves the outbox (logged as rejected) and its record returns to
    /// what the server has (a rejected create, or a change of a record the server does not have,
    /// disappears).
    static func acknowledgeRejected(_ db: Database, opID: String) throws {
        guard let op = try OutboxOperation.fetch(db, opID: opID, state: .rejected) else { throw LocalStoreError.notFound }
        if op.action == .create || op.errorCode == "not_found" {
            try forget(db, op.entity, localID: op.recordLocalID)
        }
        try finish(db, op, status: .rejected, errorCode: op.errorCode, errorMessage: op.errorMessage)
        try refreshVisibility(db, op.entity, op.recordLocalID)
    }

    // MARK: Resolve a conflict (C1-C3)

    /// Settles a conflict from the inbox. `keepMine` and `edited` queue a new operation based on
    /// the server copy the user was shown (pushed with `client-wins` when it must restore a record
    /// deleted on the server); `takeTheirs` keeps the server copy the device already shows.
    static func resolveConflict(_ db: Database, _ conflictID: Int64, _ resolution: ConflictResolution) throws -> LocalChange {
        guard let conflict = try ConflictRecord.fetch(db, conflictID) else { throw LocalStoreError.notFound }
        try conflict.delete(db)
        let localID = conflict.recordLocalID
        guard try RecordFields.read(db, conflict.entity, localID: localID) != nil else { throw LocalStoreError.notFound }
        let serverDeleted = conflict.server["deletedAt"].map { !$0.isNull } ?? false
        var wanted: JSONObject
        switch resolution {
        case .takeTheirs:  // C3
            return LocalChange(localID: localID, opID: nil)
        case .keepMine:
            wanted = conflict.local
        case .edited(let fields):
            wanted = fields
        }
        if conflict.action == .delete && resolution == .keepMine {  // C2
            var op = OutboxOperation(entity: conflict.entity, action: .delete, recordLocalID: localID,
                                     baseVersion: conflict.serverVersion)
            try op.insert(db)
            try markDeleted(db, conflict.entity, localID)
            return LocalChange(localID: localID, opID: op.opID)
        }
        // C1
        var data: JSONObject = [:]
        var base: JSONObject = [:]
        for (key, value) in wanted where RecordFields.names(conflict.entity).contains(RecordFields.localName(key)) {
            let (name, local) = try RecordFields.localTerms(db, key, value)
            data[name] = local
            base[key] = conflict.server[key] ?? .null
        }
        try RecordFields.write(db, conflict.entity, localID: localID, data)
        try setDeleted(db, conflict.entity, localID, false)
        var op = OutboxOperation(entity: conflict.entity, action: .update, recordLocalID: localID, data: data, base: base,
                                 baseVersion: conflict.serverVersion, policyOverride: serverDeleted ? .clientWins : nil)
        try op.insert(db)
        return LocalChange(localID: localID, opID: op.opID)
    }

    // MARK: What transitions do to records

    /// Records the final result in the log and removes the operation from the outbox.
    private static func finish(_ db: Database, _ op: OutboxOperation, status: OperationStatus, conflictingFields: [String] = [],
                               errorCode: String? = nil, errorMessage: String? = nil) throws {
        let entry = OperationLog(op, status: status, conflictingFields: conflictingFields, errorCode: errorCode,
                                 errorMessage: errorMessage)
        try entry.insert(db, onConflict: .replace)
        try op.delete(db)
    }

    /// S3: undoes a rejected operation's effect on the record's fields: each field it changed goes
    /// back to the newest server value the device has seen (the shadow kept while the operation
    /// protected it, else the operation's base), except fields in `keeping`.
    private static func undo(_ db: Database, _ op: OutboxOperation, keeping: Set<String>) throws {
        switch op.action {
        case .create:
            return  // the record never reached the server; it leaves when the app acknowledges
        case .update:
            let shadow = try RecordFields.shadow(db, op.entity, localID: op.recordLocalID)
            var fields: JSONObject = [:]
            for name in op.data.keys where !keeping.contains(name) {
                if let value = shadow[name] {
                    fields[name] = value
                } else if let base = op.base[RecordFields.contractName(name)] {
                    fields[name] = try RecordFields.localTerms(db, RecordFields.contractName(name), base).1
                }
            }
            try RecordFields.write(db, op.entity, localID: op.recordLocalID, fields)
        case .delete:
            try RecordFields.showUnlessServerDeleted(db, op.entity, localID: op.recordLocalID)
        }
    }

    /// Removes a record that the server does not have (or no longer has) from the device.
    static func forget(_ db: Database, _ entity: EntityKind, localID: Int64) throws {
        try RecordFields.deleteRow(db, entity, localID: localID)
        guard entity == .tag else { return }
        // Pending todo operations naming the vanished tag would name nothing.
        for var op in try OutboxOperation.fetchAll(db) where op.entity == .todo && op.state == .pending
            && op.data["tag"]?.int64Value == localID {
            op.data["tag"] = .null
            try op.update(db)
        }
    }

    /// A record is hidden while a delete of it is on its way, or once the server has deleted it
    /// and no change of this device is still on its way (that change surfaces the conflict).
    static func refreshVisibility(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws {
        let unsettled = try OutboxOperation.unsettled(db, entity: entity, localID: localID)
        guard var record = try SyncedRecords.fetch(db, entity, localID: localID), !record.state.isDeleted else { return }
        if unsettled.contains(where: { $0.action == .delete }) || (unsettled.isEmpty && record.state.deletedAt != nil) {
            record.state.isDeleted = true
            try record.update(db)
        }
    }

    static func isLive(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws -> Bool {
        try RecordFields.isLive(db, entity, localID: localID)
    }

    static func markDeleted(_ db: Database, _ entity: EntityKind, _ localID: Int64) throws {
        try setDeleted(db, entity, localID, true)
    }

    private static func setDeleted(_ db: Database, _ entity: EntityKind, _ localID: Int64, _ deleted: Bool) throws {
        try RecordFields.setDeleted(db, entity, localID: localID, deleted)
    }
}
