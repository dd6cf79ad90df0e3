import Foundation
import GRDB
import TodoSyncCore

/// The editable fields of tags and todos, read from and written to their local rows: the one
/// place that maps the contract's field names to columns. Values are in *local terms*: a todo's
/// tag is `tag`, a local tag handle; everything else has the contract's name and JSON type.
enum RecordFields {
    static let tag = ["name", "color"]
    static let todo = ["title", "raw", "isImportant", "isLife", "tag", "difficulty", "estimatedTime", "deadline", "isCompleted"]

    static func names(_ entity: EntityKind) -> [String] { entity == .tag ? tag : todo }

    static func table(_ entity: EntityKind) -> String { entity.rawValue }

    /// The record's current fields, or nil when there is no such row.
    static func read(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> JSONObject? {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM \(table(entity)) WHERE localId = ?", arguments: [localID]) else {
            return nil
        }
        switch entity {
        case .tag:
            return ["name": .string(row["name"]), "color": .string(row["color"])]
        case .todo:
            return [
                "title": .string(row["title"]), "raw": .string(row["raw"]), "isImportant": .bool(row["isImportant"]),
                "isLife": .bool(row["isLife"]), "tag": .optionalInt(row["tagLocalId"]), "difficulty": .int(row["difficulty"] as Int64),
                "estimatedTime": .int(row["estimatedTime"] as Int64), "deadline": .string(row["deadline"]),
                "isCompleted": .bool(row["isCompleted"]),
            ]
        }
    }

    /// Writes `fields` (local terms) to the record's row.
    static func write(_ db: Database, _ entity: EntityKind, localID: Int64, _ fields: JSONObject) throws {
        var assignments: [String] = []
        var arguments: [(any DatabaseValueConvertible)?] = []
        for (name, value) in fields.sorted(by: { $0.key < $1.key }) {
            switch (entity, name) {
            case (.tag, "name"), (.tag, "color"), (.todo, "raw"), (.todo, "deadline"):
                assignments.append("\(name) = ?")
                arguments.append(value.stringValue ?? "")
            case (.todo, "title"):
                let title = value.stringValue ?? ""
                assignments.append("title = ?, titleKey = ?")
                arguments.append(title)
                arguments.append(Data(TitleOrder.key(title)))
            case (.todo, "isImportant"), (.todo, "isLife"), (.todo, "isCompleted"):
                assignments.append("\(name) = ?")
                arguments.append(value.boolValue ?? false)
            case (.todo, "difficulty"), (.todo, "estimatedTime"):
                assignments.append("\(name) = ?")
                arguments.append(value.int64Value ?? 0)
            case (.todo, "tag"):
                assignments.append("tagLocalId = ?")
                arguments.append(value.int64Value)
            default:
                continue
            }
        }
        guard !assignments.isEmpty else { return }
        arguments.append(localID)
        try db.execute(sql: "UPDATE \(table(entity)) SET \(assignments.joined(separator: ", ")) WHERE localId = ?",
                       arguments: StatementArguments(arguments))
    }

    /// A field in the contract's terms (for `base`, conflicts and the wire): `tag` (a local
    /// handle) becomes `tagId` (the tag's server id, or null when it has none yet).
    static func contractTerms(_ db: Database, _ name: String, _ value: JSONValue) throws -> (String, JSONValue) {
        guard name == "tag" else { return (name, value) }
        guard let localTag = value.int64Value else { return ("tagId", .null) }
        let serverID = try Int64.fetchOne(db, sql: "SELECT id FROM tag WHERE localId = ?", arguments: [localTag])
        return ("tagId", .optionalInt(serverID))
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
        let localID = try Int64.fetchOne(db, sql: "SELECT localId FROM tag WHERE id = ?", arguments: [serverID])
        return ("tag", .optionalInt(localID))
    }
}

/// The state of a record's row that the outbox's transitions read and change.
extension RecordFields {
    /// Whether the record is shown to the app.
    static func isLive(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT isDeleted = 0 FROM \(table(entity)) WHERE localId = ?", arguments: [localID]) ?? false
    }

    /// Whether the server sent a tombstone for the record.
    static func isServerDeleted(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT deletedAt IS NOT NULL FROM \(table(entity)) WHERE localId = ?", arguments: [localID]) ?? false
    }

    /// The server version last seen.
    static func version(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT version FROM \(table(entity)) WHERE localId = ?", arguments: [localID])
    }

    static func setDeleted(_ db: Database, _ entity: EntityKind, localID: Int64, _ deleted: Bool) throws {
        try db.execute(sql: "UPDATE \(table(entity)) SET isDeleted = ? WHERE localId = ?", arguments: [deleted, localID])
    }

    /// Shows the record again unless the server deleted it (a rejected local delete).
    static func showUnlessServerDeleted(_ db: Database, _ entity: EntityKind, localID: Int64) throws {
        try setDeleted(db, entity, localID: localID, try isServerDeleted(db, entity, localID: localID))
    }

    /// The server's values of fields a pending operation protects (local terms).
    static func shadow(_ db: Database, _ entity: EntityKind, localID: Int64) throws -> JSONObject {
        try String.fetchOne(db, sql: "SELECT shadow FROM \(table(entity)) WHERE localId = ?", arguments: [localID])
            .map(JSONText.object) ?? [:]
    }

    /// Removes the record's row; a removed tag is taken off its todos.
    static func deleteRow(_ db: Database, _ entity: EntityKind, localID: Int64) throws {
        try db.execute(sql: "DELETE FROM \(table(entity)) WHERE localId = ?", arguments: [localID])
        if entity == .tag {
            try db.execute(sql: "UPDATE todo SET tagLocalId = NULL WHERE tagLocalId = ?", arguments: [localID])
        }
    }
}
