import Foundation
import GRDB
import TodoSyncCore

/// Writes what the server sent (push results and pull pages) into the device's tables: tags and
/// todos (keeping what operations still on their way change), tombstones, daily stats. The
/// outbox's state is not touched here (that is `Outbox`).
enum ServerRecords {
    /// Writes a record the server sent (push result or pull page) into the device's row,
    /// keeping the fields that operations still on their way change (the user's edit is still
    /// going to the server) and their base untouched. Returns the row's local id.
    @discardableResult
    static func apply(_ db: Database, _ entity: EntityKind, localID knownLocalID: Int64?, _ record: ServerRecord,
                      unsettled knownUnsettled: [OutboxOperation]? = nil, generation: Int64 = 0) throws -> Int64 {
        let table = entity.rawValue
        var tagLocalID: Int64?
        if entity == .todo, let tagID = record.tagID {
            tagLocalID = try Int64.fetchOne(db.cachedStatement(sql: "SELECT localId FROM tag WHERE id = ?"), arguments: [tagID])
        }
        guard let localID = try knownLocalID ?? findLocal(db, entity, id: record.id, clientID: record.clientID) else {
            return try insert(db, entity, record, tagLocalID: tagLocalID, generation: generation)
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
            let fields = localFields(entity, record, tagLocalID: tagLocalID)
            try RecordFields.write(db, entity, localID: localID, fields.filter { !protected.contains($0.key) })
            if entity == .todo, record.hasTagID, !protected.contains("tag") {
                try db.execute(sql: "UPDATE todo SET pendingTagId = ? WHERE localId = ?",
                               arguments: [tagLocalID == nil ? record.tagID : nil, localID])
            }
            // The server's values of the protected fields, should their operation be rejected.
            var shadow = try RecordFields.shadow(db, entity, localID: localID)
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
    private static func resolvePendingTag(_ db: Database, serverID: Int64?, localID: Int64) throws {
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
    static func findLocal(_ db: Database, _ entity: EntityKind, id: Int64?, clientID: String?) throws -> Int64? {
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

    private static func insert(_ db: Database, _ entity: EntityKind, _ record: ServerRecord, tagLocalID: Int64?,
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

    static func applyTombstone(_ db: Database, _ entity: EntityKind, _ tombstone: ServerRecord,
                                unsettled: [Int64: [OutboxOperation]]) throws {
        // A tombstone of a record this device never had changes nothing.
        guard let localID = try findLocal(db, entity, id: tombstone.id, clientID: tombstone.clientID) else { return }
        let pending = unsettled[localID] ?? []
        let isDeleted = pending.isEmpty || pending.contains { $0.action == .delete }
        try db.cachedStatement(sql: """
            UPDATE \(entity.rawValue) SET id = COALESCE(?, id), version = ?, deletedAt = ?, isDeleted = ? WHERE localId = ?
            """).execute(arguments: [tombstone.id, tombstone.version, tombstone.deletedAt, isDeleted, localID])
    }

    /// A daily stat as the server sent it (one per date: a newer id for the date replaces the old).
    static func applyStat(_ db: Database, _ stat: ServerRecord, generation: Int64) throws {
        guard let id = stat.id, let date = stat.date else { return }
        try db.cachedStatement(sql: "DELETE FROM dailyStat WHERE date = ? AND id <> ?").execute(arguments: [date, id])
        try db.cachedStatement(sql: """
            INSERT INTO dailyStat (id, date, version, deletedAt, json, seenGeneration) VALUES (?, ?, ?, NULL, ?, ?)
            ON CONFLICT(id) DO UPDATE SET date = excluded.date, version = excluded.version, deletedAt = NULL,
                                          json = excluded.json, seenGeneration = excluded.seenGeneration
            """).execute(arguments: [id, date, stat.version, String(decoding: stat.json, as: UTF8.self), generation])
    }

    /// A daily stat the server deleted.
    static func applyStatTombstone(_ db: Database, _ tombstone: ServerRecord) throws {
        guard let id = tombstone.id else { return }
        try db.cachedStatement(sql: "UPDATE dailyStat SET deletedAt = ?, version = ? WHERE id = ?")
            .execute(arguments: [tombstone.deletedAt, tombstone.version, id])
    }
}
