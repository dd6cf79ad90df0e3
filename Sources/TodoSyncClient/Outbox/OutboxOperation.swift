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
struct OutboxOperation: Sendable, Equatable, FetchableRecord, MutablePersistableRecord {
    static let databaseTableName = "outbox"

    enum Columns {
        static let seq = Column("seq")
        static let opID = Column("opId")
        static let entity = Column("entity")
        static let action = Column("action")
        static let recordLocalID = Column("recordLocalId")
        static let data = Column("data")
        static let base = Column("base")
        static let baseVersion = Column("baseVersion")
        static let waitsForPredecessor = Column("waitsForPredecessor")
        static let policyOverride = Column("policyOverride")
        static let state = Column("state")
        static let payload = Column("payload")
        static let errorCode = Column("errorCode")
        static let errorMessage = Column("errorMessage")
        static let createdAt = Column("createdAt")
    }

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
    var createdAt = Timestamp.now().rfc3339

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

    init(row: Row) throws {
        seq = row[Columns.seq]
        opID = row[Columns.opID]
        entity = try Enum.decode(row[Columns.entity])
        action = try Enum.decode(row[Columns.action])
        recordLocalID = row[Columns.recordLocalID]
        data = JSONText.object(row[Columns.data])
        base = JSONText.object(row[Columns.base])
        baseVersion = row[Columns.baseVersion]
        waitsForPredecessor = row[Columns.waitsForPredecessor]
        policyOverride = (row[Columns.policyOverride] as String?).flatMap(ConflictStrategy.init(rawValue:))
        state = try Enum.decode(row[Columns.state])
        payload = row[Columns.payload]
        errorCode = row[Columns.errorCode]
        errorMessage = row[Columns.errorMessage]
        createdAt = row[Columns.createdAt]
    }

    func encode(to container: inout PersistenceContainer) {
        container[Columns.seq] = seq
        container[Columns.opID] = opID
        container[Columns.entity] = entity.rawValue
        container[Columns.action] = action.rawValue
        container[Columns.recordLocalID] = recordLocalID
        container[Columns.data] = JSONText.encode(data)
        container[Columns.base] = JSONText.encode(base)
        container[Columns.baseVersion] = baseVersion
        container[Columns.waitsForPredecessor] = waitsForPredecessor
        container[Columns.policyOverride] = policyOverride?.rawValue
        container[Columns.state] = state.rawValue
        container[Columns.payload] = payload
        container[Columns.errorCode] = errorCode
        container[Columns.errorMessage] = errorMessage
        container[Columns.createdAt] = createdAt
    }

    mutating func didInsert(_ inserted: InsertionSuccess) { seq = inserted.rowID }

    /// The changed fields in the contract's names.
    var fieldNames: [String] { data.keys.map(RecordFields.contractName).sorted() }

    var info: OperationInfo {
        OperationInfo(opID: opID, entity: entity, action: action, recordLocalID: recordLocalID, status: state,
                      fields: fieldNames, errorCode: errorCode, errorMessage: errorMessage, conflictingFields: [])
    }

    // MARK: Requests

    /// Operations on their way (pending or sending).
    static func onTheirWay() -> QueryInterfaceRequest<OutboxOperation> {
        OutboxOperation.filter([OperationStatus.pending.rawValue, OperationStatus.sending.rawValue].contains(Columns.state))
    }

    /// Every outbox row in queue order.
    static func fetchAll(_ db: Database) throws -> [OutboxOperation] {
        try OutboxOperation.order(Columns.seq).fetchAll(db)
    }

    /// The record's newest operation still on its way (pending or sending).
    static func latestUnsettled(_ db: Database, entity: EntityKind, localID: Int64) throws -> OutboxOperation? {
        try onTheirWay().filter(Columns.entity == entity.rawValue && Columns.recordLocalID == localID)
            .order(Columns.seq.desc).fetchOne(db)
    }

    /// The operation `opID` if it is in `state`.
    static func fetch(_ db: Database, opID: String, state: OperationStatus) throws -> OutboxOperation? {
        try OutboxOperation.filter(Columns.opID == opID && Columns.state == state.rawValue).fetchOne(db)
    }

    /// The record's operations on their way after `seq` (all of them when nil).
    static func unsettled(_ db: Database, entity: EntityKind, localID: Int64, after seq: Int64? = nil) throws -> [OutboxOperation] {
        try onTheirWay()
            .filter(Columns.entity == entity.rawValue && Columns.recordLocalID == localID && Columns.seq > (seq ?? 0))
            .order(Columns.seq).fetchAll(db)
    }

    /// The local ids of `entity`'s records that have any operation in the outbox.
    static func recordLocalIDs(_ db: Database, _ entity: EntityKind) throws -> Set<Int64> {
        try Set(OutboxOperation.filter(Columns.entity == entity.rawValue).select(Columns.recordLocalID, as: Int64.self).fetchAll(db))
    }
}

/// A change still on its way to the server, as `LocalStore.pendingChanges(atPath:)` hands it
/// out: enough to redo it by hand after a store had to be replaced.
public struct PendingChange: Sendable, Equatable {
    public var opID: String
    public var entity: EntityKind
    public var action: OperationAction
    public var recordLocalID: Int64
    public var status: OperationStatus
    /// The fields the operation sets, under the contract's names.
    public var fields: [String: JSONValue]
    public var baseVersion: Int64?
}

extension LocalStore {
    /// The outbox of the store file at `path`, read without opening it as a store (read-only,
    /// no migration, no lock): what a damaged store still holds, to keep before starting anew.
    public static func pendingChanges(atPath path: String) throws -> [PendingChange] {
        var configuration = Configuration()
        configuration.readonly = true
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        return try queue.read { db in
            try OutboxOperation.fetchAll(db).map { op in
                PendingChange(
                    opID: op.opID, entity: op.entity, action: op.action, recordLocalID: op.recordLocalID, status: op.state,
                    fields: Dictionary(uniqueKeysWithValues: op.data.map { (RecordFields.contractName($0.key), $0.value) }),
                    baseVersion: op.baseVersion)
            }
        }
    }
}
