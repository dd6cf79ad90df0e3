/// The fields of a tag create (`POST /tags`, push `create`).
public struct TagDraft: Sendable, Equatable {
    public var clientID: String?
    public var name: String
    /// Upper-cased `#RRGGBB`.
    public var color: String

    public init(clientID: String?, name: String, color: String) {
        self.clientID = clientID
        self.name = name
        self.color = color
    }

    /// Validates a create body.
    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> TagDraft {
        let clientID = reader.clientID()
        let name = reader.string("name", required: true, length: TagField.nameLength, notBlank: true)
        let color = TagColor.read(&reader, required: true)
        try reader.finish()
        return TagDraft(clientID: clientID, name: name!, color: color!)
    }
}

/// The fields of a tag update; nil means "leave as is".
public struct TagPatch: Sendable, Equatable {
    public var name: String?
    public var color: String?

    public init(name: String? = nil, color: String? = nil) {
        self.name = name
        self.color = color
    }

    /// Validates an update body: each field by its `TagField` rule.
    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> TagPatch {
        reader.rejectNulls(TagField.allCases.map(\.rawValue))
        var patch = TagPatch()
        for field in TagField.allCases { field.read(&reader, into: &patch) }
        try reader.finish()
        return patch
    }

    /// The patch applied to `tag`.
    public func applied(to tag: Tag) -> Tag {
        var result = tag
        for field in TagField.allCases { field.apply(self, to: &result) }
        return result
    }

    /// Only the fields named in `fields` (contract names) of this patch.
    public func restricted(to fields: Set<String>) -> TagPatch {
        var result = self
        for field in TagField.allCases where !fields.contains(field.rawValue) { field.clear(in: &result) }
        return result
    }
}

/// `#RRGGBB` colors: accepted in either case, stored upper-case.
public enum TagColor {
    /// Reads and normalises the `color` field.
    public static func read(_ reader: inout FieldReader, required: Bool) -> String? {
        guard let value = reader.value("color") else {
            if required { reader.report("color", "is required") }
            return nil
        }
        guard case .string(let text) = value, let color = normalized(text) else {
            reader.report("color", "must be a #RRGGBB hex color")
            return nil
        }
        return color
    }

    /// `#rrggbb` → `#RRGGBB`; nil if not of that form.
    public static func normalized(_ text: String) -> String? {
        let bytes = Array(text.utf8)
        guard bytes.count == 7, bytes[0] == UInt8(ascii: "#") else { return nil }
        for byte in bytes.dropFirst() {
            let isHex = (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
                || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
                || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
            guard isHex else { return nil }
        }
        return text.uppercased()
    }
}
