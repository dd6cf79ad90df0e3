/// A field's value in a form that compares across the record, `data` and `base`.
public enum FieldValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case string(String)

    /// Reads a JSON value leniently (for `base`: a value that does not fit just never equals).
    /// Only the `color` field compares case-insensitively (colors are stored upper-case).
    public init(json: JSONValue, field: String) {
        switch json {
        case .null: self = .null
        case .bool(let flag): self = .bool(flag)
        case .number(let number): self = number.int64.map(FieldValue.int) ?? .string(number.literal)
        case .string(let text): self = .string(field == "color" ? TagColor.normalized(text) ?? text : text)
        case .array, .object: self = .string("\u{0}unsupported")
        }
    }
}

/// Records whose updatable fields can be read by name, for three-way merges.
public protocol MergeableRecord {
    /// The fields a client may update, by their contract names.
    static var updatableFields: [String] { get }
    /// The value of `field` (one of `updatableFields`).
    func value(of field: String) -> FieldValue
}

extension Tag: MergeableRecord {
    public static var updatableFields: [String] { TagField.allCases.map(\.rawValue) }

    public func value(of field: String) -> FieldValue {
        TagField(rawValue: field).map { .string($0.text(of: self)) } ?? .null
    }
}

extension Todo: MergeableRecord {
    public static var updatableFields: [String] { TodoField.allCases.map(\.rawValue) }

    public func value(of field: String) -> FieldValue {
        TodoField(rawValue: field)?.value(of: self) ?? .null
    }
}

/// The contract's three-way merge, per field named in `data`: where the server still has the
/// `base` value the client's value is taken; where server and client agree nothing is needed;
/// otherwise the server's value is kept and the field is reported as conflicting. A field that
/// `base` lacks conflicts unless server and client already agree.
public enum FieldMerge {
    /// Which of `changedFields` take the client's value, and which conflict.
    public static func decide<Record: MergeableRecord>(
        server: Record, client: Record, changedFields: [String], base: [String: FieldValue]
    ) -> (take: Set<String>, conflicting: [String]) {
        var take: Set<String> = []
        var conflicting: [String] = []
        for field in changedFields {
            let serverValue = server.value(of: field)
            let clientValue = client.value(of: field)
            if serverValue == clientValue { continue }
            if let baseValue = base[field], baseValue == serverValue {
                take.insert(field)
            } else {
                conflicting.append(field)
            }
        }
        return (take, conflicting)
    }
}
