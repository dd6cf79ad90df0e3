/// How a push resolves an update or delete whose `baseVersion` is older than the server's.
public enum ConflictPolicy: String, Sendable {
    case reject
    case clientWins = "client-wins"
    case merge
}

/// A validated `POST /sync/push` body. Only the envelope is checked here; each operation is
/// checked when it runs, so one bad operation gets its own `rejected` result.
public struct PushRequest: Sendable {
    public let deviceID: String
    public let policy: ConflictPolicy
    public let operations: [PushOperation]
    /// The schema version the client speaks (checked by the route: `RequestContext.syncSchemaVersion`);
    /// its operations never change a field that version lacks, and its results have its fields.
    public var schemaVersion = SchemaVersion.current

    /// At most this many operations per request.
    public static let maximumOperations = 500
    /// The length of a `deviceId` (Unicode scalars), in push and in pull.
    public static let deviceIDLength = 1...100

    /// Validates the envelope: deviceId, conflictPolicy, and operations (≤ 500 objects with an opId).
    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> PushRequest {
        let deviceID = reader.string("deviceId", required: true, length: deviceIDLength)
        var policy = ConflictPolicy.reject
        if let value = reader.value("conflictPolicy"), value != .null {
            if case .string(let text) = value, let parsed = ConflictPolicy(rawValue: text) {
                policy = parsed
            } else {
                reader.report("conflictPolicy", "must be one of reject, client-wins, merge")
            }
        }
        var operations: [PushOperation] = []
        switch reader.value("operations") {
        case .array(let items)?:
            if items.count > maximumOperations {
                reader.report("operations", "must hold at most \(maximumOperations) operations (got \(items.count))")
            } else {
                for (index, item) in items.enumerated() {
                    guard case .object(let object) = item else {
                        reader.report("operations[\(index)]", "must be an object")
                        continue
                    }
                    // An opId of the wrong length rejects only its operation (`PushOperation.opIDProblem`);
                    // one that is missing or not a string leaves nothing to answer it by.
                    guard case .string(let opID)? = object["opId"] else {
                        reader.report("operations[\(index)].opId", "must be a string of 1–\(PushOperation.maximumOpIDLength) characters (a UUID)")
                        continue
                    }
                    operations.append(PushOperation(opID: opID, fields: object))
                }
            }
        case nil:
            reader.report("operations", "is required")
        default:
            reader.report("operations", "must be an array")
        }
        try reader.finish()
        return PushRequest(deviceID: deviceID!, policy: policy, operations: operations)
    }
}

/// One push operation, as sent. Accessors read its parts; `validate()` checks its shape.
public struct PushOperation: Sendable {
    public let opID: String
    public let fields: [String: JSONValue]

    /// The opId's identity: its exact UTF-8 bytes. opIds compare code point for code point (case,
    /// spaces and Unicode form all count), which Swift's `String` equality does not do: it treats
    /// canonically equivalent strings (`é` and `e` + U+0301) as equal.
    public var key: OpKey { OpKey(opID) }

    /// Why this opId cannot name an operation (`validation_failed`, field `opId`), or nil.
    public var opIDProblem: String? {
        (1...Self.maximumOpIDLength).contains(opID.unicodeScalars.count)
            ? nil : "must be a string of 1–\(Self.maximumOpIDLength) characters (a UUID)"
    }

    /// The longest opId, in Unicode code points.
    public static let maximumOpIDLength = 100

    public enum Entity: String, Sendable { case tag, todo }
    public enum Action: String, Sendable { case create, update, delete }

    /// The checked parts of an operation.
    public struct Parsed: Sendable {
        public let entity: Entity
        public let action: Action
        public let id: Int64?
        public let clientID: String?
        public let baseVersion: Int64?
        public let data: [String: JSONValue]
        public let base: [String: JSONValue]

        /// The operation as a client of schema `version` means it: a field that version does not
        /// have is left out of `data` and `base` (absent means unchanged, whatever the policy).
        public func limited(toSchema version: Int) -> Parsed {
            let hidden = SchemaVersion.fieldsNewerThan(version, todo: entity == .todo)
            guard !hidden.isEmpty else { return self }
            return Parsed(entity: entity, action: action, id: id, clientID: clientID, baseVersion: baseVersion,
                          data: data.filter { !hidden.contains($0.key) }, base: base.filter { !hidden.contains($0.key) })
        }
    }

    /// Checks entity, action, addressing and the types of baseVersion, data and base.
    public func parse() throws(DomainError) -> Parsed {
        var reader = FieldReader(object: fields)
        var entity: Entity?
        switch fields["entity"] {
        case .string(let text)?:
            entity = Entity(rawValue: text)
            if entity == nil {
                reader.report("entity", text == "dailyStat" || text == "daily_stat" || text == "dailyStats"
                    ? "daily stats are derived from todos and cannot be written"
                    : "must be tag or todo")
            }
        default: reader.report("entity", "must be tag or todo")
        }
        var action: Action?
        if case .string(let text)? = fields["action"] { action = Action(rawValue: text) }
        if action == nil { reader.report("action", "must be create, update or delete") }
        let id = reader.nullableID("id") ?? nil
        let clientID = reader.clientID()
        let baseVersion: Int64?
        if let value = fields["baseVersion"], value != .null {
            baseVersion = reader.int("baseVersion", range: 0...Int64.max)
        } else {
            baseVersion = nil
        }
        let data = object(named: "data", in: &reader)
        let base = object(named: "base", in: &reader)
        if let action, action != .create, id == nil, clientID == nil, !reader.has("id"), !reader.has("clientId") {
            reader.report("id", "update and delete need an id or a clientId")
        }
        if action == .create, fields["data"] == nil { reader.report("data", "is required for create") }
        try reader.finish()
        return Parsed(entity: entity!, action: action!, id: id, clientID: clientID, baseVersion: baseVersion,
                      data: data, base: base)
    }

    private func object(named key: String, in reader: inout FieldReader) -> [String: JSONValue] {
        switch fields[key] {
        case .object(let object)?: return object
        case nil, .null?: return [:]
        default:
            reader.report(key, "must be an object")
            return [:]
        }
    }
}

/// An opId as the server compares it: its exact UTF-8 bytes (see `PushOperation.key`).
public struct OpKey: Hashable, Sendable {
    public let bytes: [UInt8]
    /// The text, exactly as sent: what the database stores and compares (`utf8mb4_nopad_bin`).
    public let text: String

    public init(_ text: String) {
        self.text = text
        self.bytes = Array(text.utf8)
    }

    /// The key a result stored before opIds were compared exactly was filed under (the opId
    /// lower-cased; Sql/018), or nil when that is the exact text anyway.
    public var legacyText: String? {
        let lowered = text.lowercased()
        return Array(lowered.utf8) == bytes ? nil : lowered
    }

    public static func == (lhs: OpKey, rhs: OpKey) -> Bool { lhs.bytes == rhs.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(bytes) }
}
