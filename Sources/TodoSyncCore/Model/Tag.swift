/// A user's tag, as stored and as sent to clients.
public struct Tag: Sendable, Equatable {
    public var id: Int64
    public var clientID: String?
    public var name: String
    public var color: String
    public var version: Int64
    /// RFC 3339 with milliseconds.
    public var createdAt: String
    public var updatedAt: String
    public var deletedAt: String?

    public init(id: Int64, clientID: String?, name: String, color: String, version: Int64,
                createdAt: String, updatedAt: String, deletedAt: String?) {
        self.id = id
        self.clientID = clientID
        self.name = name
        self.color = color
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
    }

    /// Writes the contract's Tag object.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("clientId", clientID)
        writer.field("name", name)
        writer.field("color", color)
        writer.syncFields(version: version, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt)
        writer.endObject()
    }
}
