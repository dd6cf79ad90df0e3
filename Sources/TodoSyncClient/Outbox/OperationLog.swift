import Foundation
import GRDB
import TodoSyncCore

/// One final result in the log (`operationLog`): what the app can look back on once an
/// operation has left the outbox.
struct OperationLog: Sendable, Equatable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "operationLog"

    enum Columns {
        static let opID = Column("opId")
        static let entity = Column("entity")
        static let action = Column("action")
        static let recordLocalID = Column("recordLocalId")
        static let fields = Column("fields")
        static let status = Column("status")
        static let errorCode = Column("errorCode")
        static let errorMessage = Column("errorMessage")
        static let conflictingFields = Column("conflictingFields")
        static let finishedAt = Column("finishedAt")
    }

    /// The log keeps the newest results only.
    static let capacity = 10_000

    var info: OperationInfo
    var finishedAt: String

    init(_ op: OutboxOperation, status: OperationStatus, conflictingFields: [String], errorCode: String?, errorMessage: String?) {
        info = OperationInfo(opID: op.opID, entity: op.entity, action: op.action, recordLocalID: op.recordLocalID, status: status,
                             fields: op.fieldNames, errorCode: errorCode, errorMessage: errorMessage,
                             conflictingFields: conflictingFields)
        finishedAt = Timestamp.now().rfc3339
    }

    init(row: Row) throws {
        info = OperationInfo(
            opID: row[Columns.opID], entity: try Enum.decode(row[Columns.entity]), action: try Enum.decode(row[Columns.action]),
            recordLocalID: row[Columns.recordLocalID], status: try Enum.decode(row[Columns.status]),
            fields: JSONText.stringArray(row[Columns.fields]), errorCode: row[Columns.errorCode],
            errorMessage: row[Columns.errorMessage], conflictingFields: JSONText.stringArray(row[Columns.conflictingFields]))
        finishedAt = row[Columns.finishedAt]
    }

    func encode(to container: inout PersistenceContainer) {
        container[Columns.opID] = info.opID
        container[Columns.entity] = info.entity.rawValue
        container[Columns.action] = info.action.rawValue
        container[Columns.recordLocalID] = info.recordLocalID
        container[Columns.fields] = JSONText.encode(.array(info.fields.map { .string($0) }))
        container[Columns.status] = info.status.rawValue
        container[Columns.errorCode] = info.errorCode
        container[Columns.errorMessage] = info.errorMessage
        container[Columns.conflictingFields] = JSONText.encode(.array(info.conflictingFields.map { .string($0) }))
        container[Columns.finishedAt] = finishedAt
    }

    /// The newest results first, at most `limit`.
    static func newest(_ db: Database, limit: Int) throws -> [OperationInfo] {
        try OperationLog.order(Column.rowID.desc).limit(limit).fetchAll(db).map(\.info)
    }

    /// Keeps the newest `capacity` results.
    static func trim(_ db: Database) throws {
        guard let newest = try OperationLog.select(max(Column.rowID), as: Int64?.self).fetchOne(db) ?? nil else { return }
        try OperationLog.filter(Column.rowID <= newest - Int64(capacity)).deleteAll(db)
    }
}

/// A conflict in the inbox (`conflict`), waiting for the app (policy `ask`).
struct ConflictRecord: Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "conflict"

    enum Columns {
        static let conflictID = Column("conflictId")
        static let opID = Column("opId")
        static let entity = Column("entity")
        static let action = Column("action")
        static let recordLocalID = Column("recordLocalId")
        static let base = Column("base")
        static let local = Column("local")
        static let server = Column("server")
        static let serverVersion = Column("serverVersion")
        static let createdAt = Column("createdAt")
    }

    var conflictID: Int64?
    var opID: String
    var entity: EntityKind
    var action: OperationAction
    var recordLocalID: Int64
    var base: JSONObject
    var local: JSONObject
    var server: JSONObject
    var serverVersion: Int64
    var createdAt = Timestamp.now().rfc3339

    init(opID: String, entity: EntityKind, action: OperationAction, recordLocalID: Int64, base: JSONObject, local: JSONObject,
         server: JSONObject, serverVersion: Int64) {
        self.opID = opID
        self.entity = entity
        self.action = action
        self.recordLocalID = recordLocalID
        self.base = base
        self.local = local
        self.server = server
        self.serverVersion = serverVersion
    }

    init(row: Row) throws {
        conflictID = row[Columns.conflictID]
        opID = row[Columns.opID]
        entity = try Enum.decode(row[Columns.entity])
        action = try Enum.decode(row[Columns.action])
        recordLocalID = row[Columns.recordLocalID]
        base = JSONText.object(row[Columns.base])
        local = JSONText.object(row[Columns.local])
        server = JSONText.object(row[Columns.server])
        serverVersion = row[Columns.serverVersion]
        createdAt = row[Columns.createdAt]
    }

    func encode(to container: inout PersistenceContainer) {
        container[Columns.conflictID] = conflictID
        container[Columns.opID] = opID
        container[Columns.entity] = entity.rawValue
        container[Columns.action] = action.rawValue
        container[Columns.recordLocalID] = recordLocalID
        container[Columns.base] = JSONText.encode(base)
        container[Columns.local] = JSONText.encode(local)
        container[Columns.server] = JSONText.encode(server)
        container[Columns.serverVersion] = serverVersion
        container[Columns.createdAt] = createdAt
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { conflictID = inserted.rowID }

    static func fetch(_ db: Database, _ conflictID: Int64) throws -> ConflictRecord? {
        try ConflictRecord.filter(Columns.conflictID == conflictID).fetchOne(db)
    }

    /// The inbox, oldest first.
    static func inbox(_ db: Database) throws -> [SyncConflict] {
        try ConflictRecord.order(Columns.conflictID).fetchAll(db).map(\.info)
    }

    var info: SyncConflict {
        SyncConflict(conflictID: conflictID ?? 0, opID: opID, entity: entity, action: action, recordLocalID: recordLocalID,
                     base: base, local: local, server: server, serverVersion: serverVersion)
    }
}

/// A stored enum value (`entity`, `action`, `state`, `status`).
enum Enum {
    struct Unknown: Error, CustomStringConvertible {
        var value: String
        var description: String { "unknown stored value \(value)" }
    }

    static func decode<T: RawRepresentable>(_ value: String) throws -> T where T.RawValue == String {
        guard let decoded = T(rawValue: value) else { throw Unknown(value: value) }
        return decoded
    }
}
