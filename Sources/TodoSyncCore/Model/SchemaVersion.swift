/// The versions of the synced record shapes (API.md "Schema versions"). A field belongs to every
/// version from the one that introduced it (`TodoField.since`, `TagField.since`); a sync request
/// names the version it understands, and records it gets carry exactly that version's fields.
public enum SchemaVersion {
    /// What a client that names no version speaks (every client written before versions existed).
    public static let first = 1
    /// The newest shape: what REST always uses and what the change feed stores.
    /// 2: todos have `notes`; 3: todos have `remindAt`.
    public static let current = 3

    /// A requested version as text (a query parameter, or a JSON number's literal): nil when it is
    /// not an integer; an integer too large for `Int` saturates (it is above the current version,
    /// or below any minimum, either way).
    public static func integer(_ text: String) -> Int? {
        let digits = text.hasPrefix("-") ? text.dropFirst() : Substring(text)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return Int(text) ?? (text.hasPrefix("-") ? Int.min : Int.max)
    }

    /// The version a request for `requested` is served at, with `minimum` the oldest served: nil
    /// below it (426), the current version above it.
    public static func served(_ requested: Int, minimum: Int) -> Int? {
        requested < minimum ? nil : min(requested, current)
    }

    /// The contract names of the fields a record of `kind` has at the current version but not at
    /// `version` (none at the current one).
    public static func fieldsNewerThan(_ version: Int, todo: Bool) -> [String] {
        todo ? TodoField.allCases.filter { $0.since > version }.map(\.rawValue)
            : TagField.allCases.filter { $0.since > version }.map(\.rawValue)
    }
}
