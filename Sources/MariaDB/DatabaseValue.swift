/// A value sent to or read from the database.
///
/// Integer columns arrive as ``int(_:)``, FLOAT/DOUBLE as ``double(_:)``, character columns,
/// DECIMAL and temporal columns as ``text(_:)``, binary columns as ``blob(_:)``.
public enum DatabaseValue: Sendable, Hashable {
    /// SQL NULL.
    case null
    /// A signed 64-bit integer.
    case int(Int64)
    /// A double-precision float.
    case double(Double)
    /// UTF-8 text.
    case text(String)
    /// Raw bytes.
    case blob([UInt8])

    /// True for ``null``.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}
