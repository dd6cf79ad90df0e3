import Foundation
import GRDB
import TodoSyncCore

/// The synced fields of tags and todos as the outbox sees them: read from and written to their
/// rows (`TagRecord`, `TodoRecord`), and turned between local and contract terms. Values are in
/// *local terms*: a todo's tag is `tag`, a local tag handle; everything else has the contract's
/// name and JSON type.
enum RecordFields {
    static func names(_ entity: EntityKind) -> [String] { SyncedRecords.type(entity).syncedFieldNames }

    /// Whether a client of `schemaVersion` knows the synced field `name` (local terms), by the
    /// shared description (`TodoField.since`, `TagField.since`): a client never sends a field
    /// its version does not have.
    static func known(_ entity: EntityKind, _ name: String, schemaVersion: Int) -> Bool {
        let contract = contractName(name)
        let since = entity == .todo ? TodoField(rawValue: contract)?.since : TagField(rawValue: contract)?.since
        return (since ?? SchemaVersion.first) <= schemaVersion
    }

    /// The record's current fields, or nil when there is no such row.
    static func read(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> JSONObject? {
        try SyncedRecords.fetch(db, entity, localID: localID)?.syncedFields
    }

    /// Writes `fields` (local terms) to the record's row.
    static func write(_ db: Database, _ entity: EntityKind, localID: Int64, _ fields: JSONObject) throws {
        guard !fields.isEmpty else { return }
        try change(db, entity, localID: localID) { $0.setSyncedFields(fields) }
    }

    /// Changes the record's row in place (nothing when there is no such row).
    static func change(_ db: Database, _ entity: EntityKind, localID: Int64, _ body: (inout any SyncedRecord) -> Void) throws {
        guard var record = try SyncedRecords.fetch(db, entity, localID: localID) else { return }
        body(&record)
        try record.update(db)
    }

    /// A field in the contract's terms (for `base`, conflicts and the wire): `tag` (a local
    /// handle) becomes `tagId` (the tag's server id, or null when it has none yet).
    static func contractTerms(_ db: Database, _ name: String, _ value: JSONValue) throws -> (String, JSONValue) {
        guard name == "tag" else { return (name, value) }
        guard let localTag = value.int64Value else { return ("tagId", .null) }
        return ("tagId", .optionalInt(try TagRecord.fetchOne(db, key: localTag)?.state.serverID))
    }

    static func contractTerms(_ db: Database, _ fields: JSONObject) throws -> JSONObject {
        var result: JSONObject = [:]
        for (name, value) in fields {
            let (key, converted) = try contractTerms(db, name, value)
            result[key] = converted
        }
        return result
    }

    /// The contract name of a local field (`tag` → `tagId`).
    static func contractName(_ localName: String) -> String { localName == "tag" ? "tagId" : localName }

    /// The local name of a contract field (`tagId` → `tag`).
    static func localName(_ contractName: String) -> String { contractName == "tagId" ? "tag" : contractName }

    /// A contract-terms field as local terms (`tagId` → `tag`, the local handle of that server tag).
    static func localTerms(_ db: Database, _ name: String, _ value: JSONValue) throws -> (String, JSONValue) {
        guard name == "tagId" else { return (name, value) }
        guard let serverID = value.int64Value else { return ("tag", .null) }
        let localID = try TagRecord.filter(SyncState.Columns.serverID == serverID).fetchOne(db)?.state.localID
        return ("tag", .optionalInt(localID))
    }
}

/// The state of a record's row that the outbox's transitions read and change.
extension RecordFields {
    /// Whether the record is shown to the app.
    static func isLive(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> Bool {
        try SyncedRecords.fetch(db, entity, localID: localID).map { !$0.state.isDeleted } ?? false
    }

    static func setDeleted(_ db: Database, _ entity: EntityKind, localID: Int64, _ deleted: Bool) throws {
        try change(db, entity, localID: localID) { $0.state.isDeleted = deleted }
    }

    /// Shows the record again unless the server deleted it (a rejected local delete).
    static func showUnlessServerDeleted(_ db: Database, _ entity: EntityKind, localID: Int64) throws {
        try change(db, entity, localID: localID) { $0.state.isDeleted = $0.state.deletedAt != nil }
    }

    /// The server's values of fields a pending operation protects (local terms).
    static func shadow(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> JSONObject {
        try SyncedRecords.fetch(db, entity, localID: localID)?.state.shadow ?? [:]
    }

    /// Removes the record's row; a removed tag is taken off its todos.
    static func deleteRow(_ db: Database, _ entity: EntityKind, localID: Int64) throws {
        _ = try SyncedRecords.table(entity).deleteOne(db, key: localID)
        if entity == .tag {
            try TodoRecord.filter(TodoRecord.Columns.tagLocalID == localID).updateAll(db, TodoRecord.Columns.tagLocalID.set(to: nil))
        }
    }
}
