/// A parsed JSON document. Keeps what request validation needs and `Codable` hides:
/// absent vs `null`, booleans vs numbers, and the number's exact literal.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// A short name of the value's JSON type, for validation messages.
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// A JSON number, kept as its literal so that integers are read exactly.
public struct JSONNumber: Sendable, Equatable {
    /// The literal as it appeared in the document, e.g. `-12`, `1.5e3`.
    public let literal: String

    public init(literal: String) { self.literal = literal }

    /// The value as an integer when it is one exactly (`3`, `3.0`, `3e0`), else nil.
    public var int64: Int64? {
        if let exact = Int64(literal) { return exact }
        guard let double = Double(literal), double.isFinite, double.rounded() == double,
              abs(double) < 9.0e15 else { return nil }
        return Int64(double)
    }

    /// The value as a double (may be infinite for huge literals).
    public var double: Double? { Double(literal) }
}
