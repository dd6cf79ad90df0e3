/// An account. The password hash never leaves the store.
public struct User: Sendable, Equatable {
    public let id: Int64
    public let email: String

    public init(id: Int64, email: String) {
        self.id = id
        self.email = email
    }
}

/// What register and login answer: the user and a fresh bearer token.
public struct Session: Sendable {
    public let user: User
    public let token: String

    public init(user: User, token: String) {
        self.user = user
        self.token = token
    }

    /// `{"user": {"id", "email"}, "token"}`.
    public var jsonBody: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("user")
        writer.beginObject()
        writer.field("id", user.id)
        writer.field("email", user.email)
        writer.endObject()
        writer.field("token", token)
        writer.endObject()
        return writer.bytes
    }
}

/// `{"items": [...]}` for any record type.
public func itemsBody<T>(_ items: [T], write: (T, inout JSONWriter) -> Void) -> [UInt8] {
    var writer = JSONWriter(reservingCapacity: 64 + items.count * 320)
    writer.beginObject()
    writer.key("items")
    writer.beginArray()
    for item in items { write(item, &writer) }
    writer.endArray()
    writer.endObject()
    return writer.bytes
}
