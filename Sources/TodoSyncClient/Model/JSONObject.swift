import TodoSyncCore

/// A JSON object as the client keeps fields in the outbox and conflicts.
typealias JSONObject = [String: JSONValue]

extension JSONWriter {
    /// Writes any parsed JSON value (object keys sorted, so equal objects give equal text).
    mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let flag): bool(flag)
        case .number(let number): raw(Array(number.literal.utf8))
        case .string(let text): string(text)
        case .array(let items):
            beginArray()
            for item in items { self.value(item) }
            endArray()
        case .object(let members):
            beginObject()
            for key in members.keys.sorted() {
                self.key(key)
                self.value(members[key]!)
            }
            endObject()
        }
    }
}

extension JSONValue {
    public static func int(_ value: Int64) -> JSONValue { .number(JSONNumber(literal: String(value))) }
    public static func int(_ value: Int) -> JSONValue { .number(JSONNumber(literal: String(value))) }
    public static func optionalInt(_ value: Int64?) -> JSONValue { value.map { .int($0) } ?? .null }
    public static func optionalString(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }

    var stringValue: String? { if case .string(let text) = self { return text } else { return nil } }
    var boolValue: Bool? { if case .bool(let flag) = self { return flag } else { return nil } }
    var int64Value: Int64? { if case .number(let number) = self { return number.int64 } else { return nil } }
    var doubleValue: Double? { if case .number(let number) = self { return number.double } else { return nil } }
    var objectValue: JSONObject? { if case .object(let members) = self { return members } else { return nil } }
    var arrayValue: [JSONValue]? { if case .array(let items) = self { return items } else { return nil } }
    var isNull: Bool { self == .null }
}

/// JSON text of parsed values, for the store and for tools (the terminal client's `--json`).
public enum JSONText {
    /// The text of an object (keys sorted).
    static func encode(_ object: JSONObject) -> String {
        var writer = JSONWriter()
        writer.value(.object(object))
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    public static func encode(_ value: JSONValue) -> String {
        var writer = JSONWriter()
        writer.value(value)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// Parses text this store wrote; an unreadable value is a corrupt store.
    static func object(_ text: String) -> JSONObject {
        guard let value = try? JSONParser.parse(Array(text.utf8), maxDepth: 16), let object = value.objectValue else {
            preconditionFailure("corrupt JSON object in the local store")
        }
        return object
    }

    static func stringArray(_ text: String) -> [String] {
        guard let value = try? JSONParser.parse(Array(text.utf8), maxDepth: 4), let items = value.arrayValue else { return [] }
        return items.compactMap(\.stringValue)
    }
}
