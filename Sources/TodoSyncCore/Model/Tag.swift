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

    /// Writes the contract's Tag object at the current schema version (REST, the change feed).
    public func write(to writer: inout JSONWriter) { write(to: &writer, schemaVersion: SchemaVersion.current) }

    /// Writes the contract's Tag object with the fields of schema version `schema` (`TagField.since`).
    public func write(to writer: inout JSONWriter, schemaVersion schema: Int) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("clientId", clientID)
        for field in TagField.allCases where field.since <= schema {
            writer.key(field.rawValue)
            writer.string(field.text(of: self))
        }
        writer.syncFields(version: version, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt)
        writer.endObject()
    }
}

/// The synced content fields of a tag, described once (`SyncedField`, as `TodoField` for todos):
/// contract name, the schema version that introduced it, its kind, limits and column, and how it
/// is read, written and patched.
public enum TagField: String, SyncedField {
    case name, color

    /// The schema version that introduced the field.
    public var since: Int {
        switch self {
        case .name, .color: 1
        }
    }

    /// Both are text (a color of its own format, `TagColor`).
    public var kind: FieldKind { .text }

    public var isNullable: Bool { false }

    /// The validation limit of `name` (API.md "Tags"), the one copy (server and client).
    public static let nameLength = 1...50

    public var length: ClosedRange<Int>? {
        switch self {
        case .name: Self.nameLength
        case .color: nil
        }
    }

    public var refusesBlank: Bool { self == .name }

    public var range: ClosedRange<Int64>? { nil }

    /// The column of `tags` (`TagColumn` takes its name from here).
    public var column: String {
        switch self {
        case .name: "name"
        case .color: "color"
        }
    }

    /// As Sql/001 declares it (`ColumnsTests` compares it with the migrated table).
    public var columnType: String {
        switch self {
        case .name: "VARCHAR(50)"
        case .color: "CHAR(7)"
        }
    }

    /// The field's value in `tag` (both fields are text).
    public func text(of tag: Tag) -> String {
        switch self {
        case .name: tag.name
        case .color: tag.color
        }
    }

    /// Reads the field into `patch` when present and not `null`, checking its rule.
    public func read(_ reader: inout FieldReader, into patch: inout TagPatch) {
        guard let value = reader.value(rawValue), value != .null else { return }
        switch self {
        case .name: patch.name = reader.string(rawValue, required: true, length: Self.nameLength, notBlank: true)
        case .color: patch.color = TagColor.read(&reader, required: true)
        }
    }

    /// Writes the field's value from `patch` into `tag`, when the patch has one.
    public func apply(_ patch: TagPatch, to tag: inout Tag) {
        switch self {
        case .name: if let value = patch.name { tag.name = value }
        case .color: if let value = patch.color { tag.color = value }
        }
    }

    /// Leaves the field out of `patch`.
    public func clear(in patch: inout TagPatch) {
        switch self {
        case .name: patch.name = nil
        case .color: patch.color = nil
        }
    }
}
