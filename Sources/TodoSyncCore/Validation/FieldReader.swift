/// Reads typed fields out of a JSON request object, collecting one `FieldProblem` per bad field
/// so a client learns about all of them at once. Unknown keys are ignored.
public struct FieldReader {
    private let object: [String: JSONValue]
    /// Problems found so far, in the order the fields were read.
    public private(set) var problems: [FieldProblem] = []

    /// Wraps a parsed body; anything but an object is a validation problem naming the body.
    public init(_ body: JSONValue) throws(DomainError) {
        guard case .object(let object) = body else {
            throw DomainError.validation(field: "body", "must be a JSON object, not \(body.typeName)")
        }
        self.object = object
    }

    /// Wraps an object found inside a larger body (e.g. a push operation's `data`).
    public init(object: [String: JSONValue]) {
        self.object = object
    }

    /// Whether the key is present (even as `null`).
    public func has(_ key: String) -> Bool { object[key] != nil }

    /// The raw value of a key, if present.
    public func value(_ key: String) -> JSONValue? { object[key] }

    /// Records a problem for `field`.
    public mutating func report(_ field: String, _ problem: String) {
        problems.append(FieldProblem(field: field, problem: problem))
    }

    /// Throws a validation error if any problem was recorded.
    public func finish() throws(DomainError) {
        if !problems.isEmpty { throw DomainError.validation(problems) }
    }

    /// A string of `length` characters (Unicode scalars, as MariaDB counts them). When `notBlank`,
    /// it must contain something other than whitespace. Absent: nil, plus a problem when `required`.
    public mutating func string(_ key: String, required: Bool, length: ClosedRange<Int>,
                                notBlank: Bool = false) -> String? {
        guard let value = object[key] else {
            if required { report(key, "is required") }
            return nil
        }
        guard case .string(let text) = value else {
            report(key, "must be a string, not \(value.typeName)")
            return nil
        }
        let count = text.unicodeScalars.count
        guard length.contains(count) else {
            report(key, "must be \(length.lowerBound)–\(length.upperBound) characters long (got \(count))")
            return nil
        }
        if notBlank, text.unicodeScalars.allSatisfy({ $0.properties.isWhitespace }) {
            report(key, "must not be blank")
            return nil
        }
        return text
    }

    /// A JSON boolean (not 0/1, not "true").
    public mutating func bool(_ key: String) -> Bool? {
        guard let value = object[key] else { return nil }
        guard case .bool(let flag) = value else {
            report(key, "must be true or false, not \(value.typeName)")
            return nil
        }
        return flag
    }

    /// An integer within `range` (a JSON number with no fractional part).
    public mutating func int(_ key: String, range: ClosedRange<Int64>) -> Int64? {
        guard let value = object[key] else { return nil }
        guard case .number(let number) = value, let integer = number.int64 else {
            report(key, "must be an integer between \(range.lowerBound) and \(range.upperBound)")
            return nil
        }
        guard range.contains(integer) else {
            report(key, "must be between \(range.lowerBound) and \(range.upperBound)")
            return nil
        }
        return integer
    }

    /// A record id (positive integer) or null: absent → nil, `null` → `.some(nil)`.
    public mutating func nullableID(_ key: String) -> Int64?? {
        guard let value = object[key] else { return nil }
        if case .null = value { return .some(nil) }
        guard case .number(let number) = value, let id = number.int64, id > 0 else {
            report(key, "must be null or a positive integer id")
            return nil
        }
        return .some(id)
    }

    /// A `YYYY-MM-DD` date between 2000-01-01 and 2999-12-31.
    public mutating func day(_ key: String, required: Bool) -> Day? {
        guard let value = object[key] else {
            if required { report(key, "is required") }
            return nil
        }
        guard case .string(let text) = value, let day = Day(text) else {
            report(key, "must be a real date YYYY-MM-DD between 2000-01-01 and 2999-12-31")
            return nil
        }
        return day
    }

    /// An instant (`FieldKind.instant`) or null: absent → nil, `null` → `.some(nil)`, else the
    /// instant in the contract's UTC form (`Timestamp(rfc3339Input:)`).
    public mutating func nullableInstant(_ key: String) -> String?? {
        guard let value = object[key] else { return nil }
        if case .null = value { return .some(nil) }
        guard case .string(let text) = value, let instant = Timestamp(rfc3339Input: text) else {
            report(key, "must be null or an RFC 3339 date-time with Z or an offset, its UTC year 2000–2999")
            return nil
        }
        return .some(instant.rfc3339)
    }

    /// An optional clientId: a UUID string (any case), or absent/null.
    public mutating func clientID(_ key: String = "clientId") -> String? {
        guard let value = object[key] else { return nil }
        if case .null = value { return nil }
        guard case .string(let text) = value, ClientID.isValid(text) else {
            report(key, "must be a UUID string")
            return nil
        }
        return text
    }

    /// Reports every present key that is `null` although the field is not nullable.
    public mutating func rejectNulls(_ keys: [String]) {
        for key in keys where object[key] == .null {
            report(key, "must not be null")
        }
    }
}

/// Client-made record ids: UUID strings, compared case-insensitively.
public enum ClientID {
    /// The length of every valid clientId, in bytes (ASCII): a UUID's 8-4-4-4-12 form.
    public static let length = 36

    /// Whether `text` is a UUID in its 8-4-4-4-12 hex form.
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == length else { return false }
        for (index, byte) in bytes.enumerated() {
            if index == 8 || index == 13 || index == 18 || index == 23 {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard isHex(byte) else { return false }
            }
        }
        return true
    }

    /// The comparison key: the lower-cased UUID.
    public static func key(_ clientID: String) -> String { clientID.lowercased() }

    /// The same key for a clientId given as UTF-8 bytes (a SQLite function's argument): an ASCII
    /// one (every valid clientId) without making a String of it.
    public static func key(utf8 bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return Array(key(String(decoding: bytes, as: UTF8.self)).utf8) }
        return bytes.map(TitleOrder.lowercaseASCII)
    }

    private static func isHex(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "f"))
            || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "F"))
    }
}
