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
    public static let updatableFields = ["name", "color"]

    public func value(of field: String) -> FieldValue {
        switch field {
        case "name": return .string(name)
        case "color": return .string(color)
        default: return .null
        }
    }
}

extension Todo: MergeableRecord {
    public static let updatableFields = ["title", "raw", "isImportant", "isLife", "tagId", "difficulty",
                                         "estimatedTime", "deadline", "isCompleted"]

    public func value(of field: String) -> FieldValue {
        switch field {
        case "title": return .string(title)
        case "raw": return .string(raw)
        case "isImportant": return .bool(isImportant)
        case "isLife": return .bool(isLife)
        case "tagId": return tagID.map(FieldValue.int) ?? .null
        case "difficulty": return .int(Int64(difficulty))
        case "estimatedTime": return .int(Int64(estimatedTime))
        case "deadline": return .string(deadline.description)
        case "isCompleted": return .bool(isCompleted)
        default: return .null
        }
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

extension TodoPatch {
    /// Only the fields in `fields` of this patch.
    public func restricted(to fields: Set<String>) -> TodoPatch {
        TodoPatch(
            title: fields.contains("title") ? title : nil, raw: fields.contains("raw") ? raw : nil,
            isImportant: fields.contains("isImportant") ? isImportant : nil,
            isLife: fields.contains("isLife") ? isLife : nil, tagID: fields.contains("tagId") ? tagID : nil,
            difficulty: fields.contains("difficulty") ? difficulty : nil,
            estimatedTime: fields.contains("estimatedTime") ? estimatedTime : nil,
            deadline: fields.contains("deadline") ? deadline : nil,
            isCompleted: fields.contains("isCompleted") ? isCompleted : nil)
    }
}

extension TagPatch {
    /// Only the fields in `fields` of this patch.
    public func restricted(to fields: Set<String>) -> TagPatch {
        TagPatch(name: fields.contains("name") ? name : nil, color: fields.contains("color") ? color : nil)
    }
}
