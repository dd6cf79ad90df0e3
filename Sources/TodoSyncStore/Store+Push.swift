import Credentials
import MariaDB
import TodoSyncCore

extension Store {
    /// Applies a push exactly once per opId: all operations run in one transaction, each
    /// atomically, and each result is stored with `(user, opId)` in that same transaction.
    /// A replayed opId returns its stored result and changes nothing. Returns the results, in the
    /// operations' order, as a JSON array.
    ///
    /// Todo operations are staged (`StagedTodos`): the todos they name are read up front, each
    /// operation changes them in memory once its checks pass, and the changes are written
    /// together before a tag operation and at the end. A tag operation writes at once, inside
    /// its own savepoint, so that a rejected one leaves nothing behind.
    public func push(userID: Int64, _ request: PushRequest) throws -> [UInt8] {
        var tally = PushTally()
        // Charged inside, once the stored results are known: replaying them costs no quota.
        let body = try write(userID: userID, operations: 0) { transaction in
            tally = PushTally()
            transaction.device = try deviceNumber(userID: userID, deviceID: request.deviceID, at: transaction.now)
            // Results already stored for these opIds (replays), found in batches up front.
            let stored = try storedResults(userID: userID, keys: request.operations.map(\.key))
            // A test build's injected bug (`StoreFaults.skipOpIDLookup`): applied again, as if new.
            let known = configuration.faults.skipOpIDLookup ? [:] : stored
            let fresh = Set(request.operations.lazy.filter { $0.opIDProblem == nil }.map(\.key)).subtracting(known.keys).count
            // Rebuilding a keyed push's answer (Sql/028) must change nothing: every result it
            // answered is stored, unless something removed one, and then applying it is wrong.
            if replayOnly && fresh > 0 { throw PushReplayError(missing: fresh) }
            // A keyed push's answer is rebuilt from its results: the ones it replays are kept
            // from now on as long as the ones it stores (purge goes by their age).
            if isIdempotentRequest && !known.isEmpty { try keepResults(userID: userID, keys: Array(known.keys), at: transaction.now) }
            transaction.refuseChanges(try chargeOperations(
                userID: userID, fresh, quota: transaction.operationsQuota, at: transaction.now))
            let schema = request.schemaVersion
            // Each operation checked once (nil: it does not parse, and `apply` reports why; or it
            // is answered without being applied: a replay or an unusable opId).
            let parsed = request.operations.map { operation in
                operation.opIDProblem == nil && known[operation.key] == nil
                    ? try? operation.parse().limited(toSchema: schema) : nil
            }
            let staged = StagedTodos(transaction: transaction)
            // The todos the operations from `index` up to the next tag operation name, read in a
            // few statements: up front, and again after a tag operation's flush made the staged
            // copies stale (so each run of todo operations between tag operations is read once).
            func prefetch(from index: Int) throws {
                let end = parsed[index...].firstIndex { $0.map { $0.entity != .todo } ?? false } ?? parsed.endIndex
                let todoOperations = parsed[index..<end].compactMap { $0 }.filter { $0.entity == .todo }
                try staged.prefetch(ids: todoOperations.compactMap(\.id),
                                    clientKeys: todoOperations.compactMap(\.clientID).map(ClientID.key))
            }
            try prefetch(from: 0)
            var seen = Set<OpKey>()
            var answers: [Answer] = []
            var newResults: [(key: OpKey, result: PushResult)] = []
            for (index, operation) in request.operations.enumerated() {
                // Neither of these rejections is stored: the first has no usable key, the second's
                // key belongs to the earlier operation of the request.
                if let problem = operation.opIDProblem {
                    answers.append(.stored(PushResult.rejected(operation.opID, .validation(field: "opId", problem)).json))
                    tally.add(.rejected)
                    continue
                }
                guard seen.insert(operation.key).inserted else {
                    let duplicate = DomainError.validation(field: "opId", "repeats the opId of an earlier operation in this request")
                    answers.append(.stored(PushResult.rejected(operation.opID, duplicate).json))
                    tally.add(.rejected)
                    continue
                }
                if let stored = known[operation.key] {
                    answers.append(.stored(stored))
                    tally.replayed += 1
                    continue
                }
                let result: PushResult
                let statCheckpoint = transaction.statCheckpoint
                do {
                    let checked = try parsed[index] ?? operation.parse().limited(toSchema: schema)
                    if checked.entity == .todo {
                        if staged.hasForgotten { try prefetch(from: index) }
                        // Staged: nothing is written before its last check passed.
                        result = try apply(operation, checked, policy: request.policy, schema: schema, staged: staged,
                                           in: transaction)
                        staged.rendered(result, schema: schema)
                    } else {
                        try staged.flush()
                        result = try db.inSavepoint {
                            try apply(operation, checked, policy: request.policy, schema: schema, staged: staged,
                                      in: transaction)
                        }
                    }
                } catch let error as DomainError where error.rejectsPushOperation {
                    // The operation's own fault (its input, or the record it names): only it is
                    // rejected. Any other kind of error fails the whole push.
                    transaction.rollBackStats(to: statCheckpoint)
                    result = .rejected(operation.opID, error, clientID: operation.clientIDText)
                }
                tally.add(result.status)
                answers.append(.new(newResults.count))
                newResults.append((operation.key, result))
            }
            try staged.flush()
            // Rendered once, with the ids the flush gave new todos: answered and stored.
            let finished = newResults.map { (key: $0.key, stored: staged.finished($0.result, schema: schema).stored) }
            var body: [UInt8] = [UInt8(ascii: "[")]
            for (index, answer) in answers.enumerated() {
                if index > 0 { body.append(UInt8(ascii: ",")) }
                switch answer {
                case .stored(let bytes): body.append(contentsOf: bytes)
                case .new(let position): body.append(contentsOf: finished[position].stored.answer)
                }
            }
            body.append(UInt8(ascii: "]"))
            // Stored in the same transaction as the operations' effects: exactly once.
            // (A result already stored stays: only `skipOpIDLookup` applies one of those again.)
            try storeResults(finished.filter { stored[$0.key] == nil }, deviceID: request.deviceID, in: transaction)
            return body
        }
        SyncMetrics.pushed(tally)
        return body
    }

    /// An operation's answer: bytes already final, or the new result at this position.
    private enum Answer {
        case stored([UInt8])
        case new(Int)
    }

    /// The stored results of these opIds, by exact key, each with its record put back in place
    /// (Sql/019). A result stored before opIds were compared exactly (Sql/018: `lowercased_key`)
    /// is filed under the lower-cased opId and still answers for any opId that lower-cases to it,
    /// as it did then, until retention removes it.
    private func storedResults(userID: Int64, keys: [OpKey]) throws -> [OpKey: [UInt8]] {
        var wanted = Set<OpKey>()
        var lookups: [String] = []
        for key in keys where wanted.insert(key).inserted {
            lookups.append(key.text)
            if let legacy = key.legacyText { lookups.append(legacy) }
        }
        var exact: [OpKey: [UInt8]] = [:]
        var legacy: [OpKey: [UInt8]] = [:]
        for list in SQL.Push.storedResults.lists(lookups.map { DatabaseValue.text($0) }) {
            for row in try db.query(SQL.Push.storedResults.sql, [.int(userID), .int(userID)] + list) {
                typealias C = SQL.Push.StoredResultColumn
                let key = OpKey(row.string(C.opKey)!)
                let json = PushResult.Stored(json: Array(row.string(C.result)!.utf8), record: row.bytes(C.record),
                                             recordOffset: row.int64(C.recordOffset).map(Int.init)).answer
                if row.bool(C.lowercasedKey) == true { legacy[key] = json } else { exact[key] = json }
            }
        }
        var found: [OpKey: [UInt8]] = [:]
        for key in wanted {
            if let result = exact[key] ?? legacy[OpKey(key.legacyText ?? key.text)] { found[key] = result }
        }
        return found
    }

    /// Refreshes the age of these opIds' stored results and their records to `now` (their
    /// retention starts again), as `storedResults` finds them.
    private func keepResults(userID: Int64, keys: [OpKey], at now: Timestamp) throws {
        var lookups: [String] = []
        for key in keys {
            lookups.append(key.text)
            if let legacy = key.legacyText { lookups.append(legacy) }
        }
        for list in SQL.Push.keepResults.lists(lookups.map { DatabaseValue.text($0) }) {
            try db.execute(SQL.Push.keepResults.sql, [.timestamp(now), .timestamp(now), .int(userID)] + list)
        }
    }

    /// Stores each result with `(user, opId)`, and each distinct record once (by its SHA-256),
    /// so that many results naming one record version cost one copy of it (Sql/019).
    /// Charged to the account's stored bytes per hour first (Sql/020).
    private func storeResults(_ results: [(key: OpKey, stored: PushResult.Stored)], deviceID: String,
                              in transaction: WriteTransaction) throws {
        let (userID, now) = (transaction.userID, transaction.now)
        var rows: [[DatabaseValue]] = []
        rows.reserveCapacity(results.count)
        var records: [[UInt8]: [UInt8]] = [:]
        var bytes = 0
        for (key, stored) in results {
            bytes += stored.json.count
            var digest = DatabaseValue.null
            var offset = DatabaseValue.null
            if let record = stored.record, let recordOffset = stored.recordOffset {
                let hash = BearerToken.sha256(record)
                if records.updateValue(record, forKey: hash) == nil { bytes += record.count }
                digest = .blob(hash)
                offset = .int(Int64(recordOffset))
            }
            rows.append([.int(userID), .text(key.text), .text(deviceID), .text(String(decoding: stored.json, as: UTF8.self)),
                         .timestamp(now), digest, offset])
        }
        try chargeStoredBytes(userID: userID, Int64(bytes), quota: transaction.storedBytesQuota, at: now)
        let recordRows = records.map { digest, record in [DatabaseValue.int(userID), .blob(digest), .blob(record), .timestamp(now)] }
        for chunk in SQL.Push.storeRecords.chunks(recordRows.count) {
            try db.execute(chunk.sql, recordRows[chunk.rows].flatMap { $0 })
        }
        for chunk in SQL.Push.storeResults.chunks(rows.count) {
            try db.execute(chunk.sql, rows[chunk.rows].flatMap { $0 })
        }
    }

    /// Runs one checked operation as a client of schema version `schema` meant it; its result's
    /// record has that version's fields. Todo operations go to `staged`.
    private func apply(_ operation: PushOperation, _ parsed: PushOperation.Parsed, policy: ConflictPolicy, schema: Int,
                       staged: StagedTodos, in transaction: WriteTransaction) throws -> PushResult {
        switch (parsed.entity, parsed.action) {
        case (.tag, .create):
            var data = parsed.data
            if let clientID = parsed.clientID { data["clientId"] = .string(clientID) }
            var reader = FieldReader(object: data)
            let created = try createTag(try TagDraft.parse(&reader), in: transaction)
            return .applied(operation, schema, created.record)
        case (.todo, .create):
            var data = try resolveTagReference(parsed.data, in: transaction)
            if let clientID = parsed.clientID { data["clientId"] = .string(clientID) }
            var reader = FieldReader(object: data)
            let draft = try TodoDraft.parse(&reader)
            // A known clientId answers the todo it names (maybe a tombstone), as `createTodo` does.
            if let clientID = draft.clientID, let existing = try staged.todo(clientID: clientID) {
                return .applied(operation, schema, existing)
            }
            return .applied(operation, schema, staged.create(try newTodo(draft, in: transaction)))
        case (.tag, .update):
            let current = try locateTag(parsed, in: transaction)
            var reader = FieldReader(object: parsed.data)
            let patch = try TagPatch.parse(&reader)
            return try resolveUpdate(operation, parsed, policy: policy, schema: schema, current: current, patch: patch,
                                     apply: { try updateTag(current, $0.applied(to: current), in: transaction) },
                                     restrict: { $0.restricted(to: $1) })
        case (.todo, .update):
            let current = try locateTodo(parsed, in: staged)
            let data = try resolveTagReference(parsed.data, in: transaction)
            var reader = FieldReader(object: data)
            let patch = try TodoPatch.parse(&reader)
            return try resolveUpdate(operation, parsed, policy: policy, schema: schema, current: current, patch: patch,
                                     apply: { patch in
                                         guard let updated = try updatedTodo(current, patch.applied(to: current),
                                                                             in: transaction) else { return current }
                                         staged.write(updated, over: current)
                                         return updated
                                     },
                                     restrict: { $0.restricted(to: $1) },
                                     base: try resolveBaseTagClientID(parsed.base, in: transaction))
        case (.tag, .delete):
            let current = try locateTag(parsed, in: transaction)
            if current.deletedAt != nil { return .applied(operation, schema, current) }
            if isStale(parsed, current.version) && policy != .clientWins { return .conflict(operation, schema, current) }
            return .applied(operation, schema, try deleteTag(current, in: transaction))
        case (.todo, .delete):
            let current = try locateTodo(parsed, in: staged)
            if current.deletedAt != nil { return .applied(operation, schema, current) }
            if isStale(parsed, current.version) && policy != .clientWins { return .conflict(operation, schema, current) }
            let deleted = try deletedTodo(current, in: transaction)
            staged.write(deleted, over: current)
            return .applied(operation, schema, deleted)
        }
    }

    /// The update rules: a tombstone conflicts unless client-wins (which restores it); a stale
    /// `baseVersion` is resolved by the policy; otherwise the update is unconditional.
    private func resolveUpdate<Record: MergeableRecord & PushRecord>(
        _ operation: PushOperation, _ parsed: PushOperation.Parsed, policy: ConflictPolicy, schema: Int, current: Record,
        patch: Record.Patch, apply: (Record.Patch) throws -> Record,
        restrict: (Record.Patch, Set<String>) -> Record.Patch,
        base: [String: JSONValue]? = nil
    ) throws -> PushResult {
        if current.isDeleted {
            guard policy == .clientWins else { return .conflict(operation, schema, current) }
            return .applied(operation, schema, try apply(patch))
        }
        guard isStale(parsed, current.version) else { return .applied(operation, schema, try apply(patch)) }
        switch policy {
        case .reject:
            return .conflict(operation, schema, current)
        case .clientWins:
            return .applied(operation, schema, try apply(patch))
        case .merge:
            let client = try Record.preview(patch, on: current)
            let changed = parsed.data.keys.map { $0 == "tagClientId" ? "tagId" : $0 }
                .filter { Record.updatableFields.contains($0) }
            let baseValues = Dictionary(uniqueKeysWithValues: (base ?? parsed.base).map { field, value in
                (field, FieldValue(json: value, field: field))
            })
            let decision = FieldMerge.decide(server: current, client: client, changedFields: Array(Set(changed)).sorted(),
                                             base: baseValues)
            let merged = try apply(restrict(patch, decision.take))
            if decision.conflicting.isEmpty { return .applied(operation, schema, merged) }
            var result = PushResult.applied(operation, schema, merged)
            result.status = PushResult.Status.merged
            result.conflictingFields = decision.conflicting.sorted()
            return result
        }
    }

    private func isStale(_ parsed: PushOperation.Parsed, _ version: Int64) -> Bool {
        guard let baseVersion = parsed.baseVersion, !configuration.faults.ignoreVersionCheck else { return false }
        return version > baseVersion
    }

    private func locateTag(_ parsed: PushOperation.Parsed, in transaction: WriteTransaction) throws -> Tag {
        let row: Row?
        if let id = parsed.id {
            row = try db.queryOne(SQL.Push.tagByID, [.int(id), .int(transaction.userID)])
        } else if let clientID = parsed.clientID {
            row = try db.queryOne(SQL.Tags.byClientKey, [.int(transaction.userID), .text(ClientID.key(clientID))])
        } else {
            row = nil
        }
        guard let row else { throw DomainError.notFound }
        return Tag(row: row)
    }

    private func locateTodo(_ parsed: PushOperation.Parsed, in staged: StagedTodos) throws -> Todo {
        let todo: Todo?
        if let id = parsed.id {
            todo = try staged.todo(id: id)
        } else if let clientID = parsed.clientID {
            todo = try staged.todo(clientID: clientID)
        } else {
            todo = nil
        }
        guard let todo else { throw DomainError.notFound }
        return todo
    }

    /// A todo's tag as a push names it (API.md "Sync: push", `create`): `tagClientId` becomes the
    /// `tagId` of the user's tag of that clientId, and a `tagId` or `tagClientId` naming one of the
    /// user's tags deleted since counts as `null`, so an edit made offline is never lost to a tag
    /// deleted on another device (the todo ends untagged, as the delete left the todos it had). A
    /// tag that was never the user's stays a validation error (a `tagId`: when the draft or patch is
    /// written); so do both names in one `data`. REST writes do not come here: they still answer 422.
    private func resolveTagReference(_ data: [String: JSONValue], in transaction: WriteTransaction) throws -> [String: JSONValue] {
        var result = data
        if let value = data["tagClientId"] {
            guard data["tagId"] == nil else {
                throw DomainError.validation(field: "tagClientId", "give tagId or tagClientId, not both")
            }
            result.removeValue(forKey: "tagClientId")
            switch value {
            case .null:
                result["tagId"] = .null
            case .string(let clientID) where ClientID.isValid(clientID):
                guard let tag = try tagOfUser(clientID: clientID, in: transaction) else {
                    throw DomainError.validation(field: "tagClientId", "must be the clientId of one of your tags")
                }
                result["tagId"] = tag.deletedAt == nil ? .number(JSONNumber(literal: String(tag.id))) : .null
            default:
                throw DomainError.validation(field: "tagClientId", "must be a UUID string or null")
            }
        } else if case .number(let number)? = data["tagId"], let id = number.int64, id > 0,
                  let row = try db.queryOne(SQL.Push.tagByID, [.int(id), .int(transaction.userID)]),
                  Tag(row: row).deletedAt != nil {
            result["tagId"] = .null
        }
        return result
    }

    /// `base` names the values the client saw: a `tagClientId` becomes the `tagId` of the user's
    /// live tag of that clientId; one the server cannot place is dropped (the field then counts as
    /// lacking a base).
    private func resolveBaseTagClientID(_ base: [String: JSONValue], in transaction: WriteTransaction) throws -> [String: JSONValue] {
        guard let value = base["tagClientId"] else { return base }
        var result = base
        result.removeValue(forKey: "tagClientId")
        switch value {
        case .null:
            result["tagId"] = .null
        case .string(let clientID) where ClientID.isValid(clientID):
            if let tag = try tagOfUser(clientID: clientID, in: transaction), tag.deletedAt == nil {
                result["tagId"] = .number(JSONNumber(literal: String(tag.id)))
            }
        default:
            break
        }
        return result
    }

    /// The user's tag of that clientId, live or deleted; nil when the user never had one.
    private func tagOfUser(clientID: String, in transaction: WriteTransaction) throws -> Tag? {
        try db.queryOne(SQL.Tags.byClientKey, [.int(transaction.userID), .text(ClientID.key(clientID))]).map(Tag.init(row:))
    }
}

/// A push rebuilding a keyed push's answer (`Store.replayOnly`) found operations without a stored
/// result: the answer cannot be rebuilt, and applying them would change what the key promised
/// unchanged. Never expected (keys are purged before the results they need); a 500, nothing applied.
struct PushReplayError: Error, CustomStringConvertible {
    let missing: Int
    var description: String { "an Idempotency-Key's push answer to rebuild has \(missing) operations without a stored result" }
}

/// What push needs of a record beyond its fields.
protocol PushRecord {
    var id: Int64 { get }
    var clientID: String? { get }
    var version: Int64 { get }
    var isDeleted: Bool { get }
    func write(to writer: inout JSONWriter)
    func write(to writer: inout JSONWriter, schemaVersion: Int)
    associatedtype Patch
    /// The record as the client would have it after `patch`, without writing anything.
    static func preview(_ patch: Patch, on record: Self) throws -> Self
}

extension Tag: PushRecord {
    var isDeleted: Bool { deletedAt != nil }
    static func preview(_ patch: TagPatch, on record: Tag) throws -> Tag { patch.applied(to: record) }
}

extension Todo: PushRecord {
    var isDeleted: Bool { deletedAt != nil }
    static func preview(_ patch: TodoPatch, on record: Todo) throws -> Todo { patch.applied(to: record) }
}

extension PushResult {
    static func applied<Record: PushRecord>(_ operation: PushOperation, _ schema: Int, _ record: Record) -> PushResult {
        result(.applied, operation, schema, record)
    }

    static func conflict<Record: PushRecord>(_ operation: PushOperation, _ schema: Int, _ record: Record) -> PushResult {
        result(.conflict, operation, schema, record)
    }

    /// The result, its record with the fields of schema version `schema`. A todo this push
    /// creates (a placeholder id) gets its record once its id is known (`StagedTodos.finished`).
    private static func result<Record: PushRecord>(_ status: Status, _ operation: PushOperation, _ schema: Int,
                                                   _ record: Record) -> PushResult {
        var result = PushResult(opID: operation.opID, status: status, id: record.id, clientID: record.clientID,
                                version: record.version)
        guard record.id > 0 else { return result }
        var writer = JSONWriter(reservingCapacity: 400)
        record.write(to: &writer, schemaVersion: schema)
        result.record = writer.bytes
        return result
    }
}

extension PushOperation {
    /// The op's clientId as sent, for rejected results.
    var clientIDText: String? {
        if case .string(let text)? = fields["clientId"] { return text }
        return nil
    }
}

extension SQL {
    enum Push {
        /// Stored results are looked up 128 opIds per statement: a 100-operation push, with the
        /// lower-cased forms of its opIds, in one.
        static let storedResults = InListStatement(size: 128) { keys in
            """
            SELECT o.op_key, o.result, o.lowercased_key, o.record_offset, r.record
              FROM sync_operations o
              LEFT JOIN sync_result_records r ON r.user_id = ? AND r.digest = o.record_digest
             WHERE o.user_id = ? AND o.op_key IN (\(keys))
            """
        }
        enum StoredResultColumn: Int, ResultColumns { case opKey, result, lowercasedKey, recordOffset, record }
        /// Restarts the retention of stored results (and their records) that a keyed push
        /// replays. Parameters: now, now, user, then the opIds as `storedResults` looks them up.
        static let keepResults = InListStatement(size: 128) { keys in
            """
            UPDATE sync_operations o
              LEFT JOIN sync_result_records r ON r.user_id = o.user_id AND r.digest = o.record_digest
               SET o.created_at = ?, r.last_used = ?
             WHERE o.user_id = ? AND o.op_key IN (\(keys))
            """
        }
        /// The records stored results name, each kept once per (user, SHA-256 of its bytes); a
        /// second use refreshes its `last_used`, which purge goes by. Parameters per row: user,
        /// digest, record, now.
        static let storeRecords = MultiRowStatement(columns: 4) { rows in
            "INSERT INTO sync_result_records (user_id, digest, record, last_used) VALUES \(rows)"
                + " ON DUPLICATE KEY UPDATE last_used = VALUES(last_used)"
        }
        /// Parameters per row: user, opId, device, result, now, record digest, record offset.
        static let storeResults = MultiRowStatement(columns: 7) { rows in
            "INSERT INTO sync_operations (user_id, op_key, device_id, result, created_at, record_digest, record_offset) VALUES "
                + rows
        }
        static let tagByID = "SELECT \(Tags.columns) FROM tags WHERE id = ? AND user_id = ?"
        /// The todos a push names, read up front 64 per statement, by id and by client key.
        /// Parameters: user, then the ids or keys.
        static let todosByIDs = InListStatement(size: 64) { ids in
            "SELECT \(Todos.columns) FROM todos WHERE user_id = ? AND id IN (\(ids))"
        }
        static let todosByClientKeys = InListStatement(size: 64) { keys in
            "SELECT \(Todos.columns) FROM todos WHERE user_id = ? AND client_key IN (\(keys))"
        }
        /// The todos a push creates, answering each row's new id in the rows' order. Parameters
        /// per row: user, clientId, client key, `TodoColumn.contentValues`, version, created,
        /// updated, deleted, device.
        static let insertTodos = MultiRowStatement(columns: TodoColumn.content.count + 8) { rows in
            "INSERT INTO todos (user_id, client_id, client_key, \(TodoColumn.contentNames), version, created_at, "
                + "updated_at, deleted_at, changed_by_device) VALUES \(rows) RETURNING id"
        }
        /// The push's changes to existing todos, by id (every row names one of the user's todos,
        /// read in this transaction under the user's lock: each one is a duplicate, updated).
        /// Parameters per row: id, user, `TodoColumn.contentValues`, version, created, updated,
        /// deleted, device.
        static let updateTodos = MultiRowStatement(columns: TodoColumn.content.count + 7) { rows in
            "INSERT INTO todos (id, user_id, \(TodoColumn.contentNames), version, created_at, updated_at, deleted_at, "
                + "changed_by_device) VALUES \(rows) ON DUPLICATE KEY UPDATE "
                + (TodoColumn.content.map(\.column.sqlName) + ["version", "updated_at", "deleted_at", "changed_by_device"])
                    .map { "\($0) = VALUES(\($0))" }.joined(separator: ", ")
        }
    }
}
