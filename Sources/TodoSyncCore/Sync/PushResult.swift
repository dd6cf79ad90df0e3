/// The outcome of one push operation, as sent to the client and stored for replays.
public struct PushResult: Sendable {
    public enum Status: String, Sendable { case applied, merged, conflict, rejected }

    public var opID: String
    public var status: Status
    public var id: Int64?
    public var clientID: String?
    public var version: Int64?
    /// The server's full record after the operation, already encoded; nil → `null`.
    public var record: [UInt8]?
    public var conflictingFields: [String]?
    public var error: DomainError?

    public init(opID: String, status: Status, id: Int64? = nil, clientID: String? = nil, version: Int64? = nil,
                record: [UInt8]? = nil, conflictingFields: [String]? = nil, error: DomainError? = nil) {
        self.opID = opID
        self.status = status
        self.id = id
        self.clientID = clientID
        self.version = version
        self.record = record
        self.conflictingFields = conflictingFields
        self.error = error
    }

    /// A `rejected` result for `error`.
    public static func rejected(_ opID: String, _ error: DomainError, clientID: String? = nil) -> PushResult {
        PushResult(opID: opID, status: .rejected, clientID: clientID, error: error)
    }

    /// `{"opId", "status", "id", "clientId", "version", "record", "conflictingFields"?, "error"?}`.
    public var json: [UInt8] { rendered(recordAsNull: false).json }

    /// The result as stored for replays (Sql/019): `record` written as `null`, with the byte
    /// offset where that `null` starts, and the record's bytes to keep beside it (nil when the
    /// result has no record). `answer` puts the bytes back: it is `json`, exactly.
    public struct Stored: Sendable {
        public let json: [UInt8]
        public let record: [UInt8]?
        public let recordOffset: Int?

        public init(json: [UInt8], record: [UInt8]?, recordOffset: Int?) {
            self.json = json
            self.record = record
            self.recordOffset = recordOffset
        }

        /// The result as answered: the record in place of its `null` (a new push and a replay alike).
        public var answer: [UInt8] {
            guard let record, let recordOffset else { return json }
            var bytes = json
            bytes.replaceSubrange(recordOffset..<recordOffset + 4, with: record)
            return bytes
        }
    }

    /// Rendered once: a push answers `stored.answer` and stores the rest.
    public var stored: Stored {
        let (json, offset) = rendered(recordAsNull: true)
        return Stored(json: json, record: record, recordOffset: record == nil ? nil : offset)
    }

    private func rendered(recordAsNull: Bool) -> (json: [UInt8], recordOffset: Int) {
        var writer = JSONWriter(reservingCapacity: 512)
        writer.beginObject()
        writer.field("opId", opID)
        writer.field("status", status.rawValue)
        writer.field("id", id)
        writer.field("clientId", clientID)
        writer.field("version", version)
        writer.key("record")
        let recordOffset = writer.bytes.count
        if let record, !recordAsNull { writer.raw(record) } else { writer.null() }
        if let conflictingFields {
            writer.key("conflictingFields")
            writer.beginArray()
            for field in conflictingFields { writer.string(field) }
            writer.endArray()
        }
        if let error {
            writer.key("error")
            error.writeErrorObject(to: &writer)
        }
        writer.endObject()
        return (writer.bytes, recordOffset)
    }
}
