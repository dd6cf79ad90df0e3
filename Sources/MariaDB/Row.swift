/// One result row: the column values in SELECT order.
///
/// The typed accessors return nil for NULL. They convert where it is lossless and unambiguous,
/// because MariaDB types expressions in ways that are easy to forget (`SUM(int_column)` is a
/// DECIMAL and arrives as text, `AVG` likewise):
/// - ``int64(_:)``: integers; doubles with an integral value; text holding a decimal integer,
///   optionally with a zero fraction (`"42"`, `"42.000"`).
/// - ``double(_:)``: doubles, integers, and numeric text.
/// - ``string(_:)``: text; integers and doubles in their decimal form; blobs holding valid UTF-8.
/// - ``bytes(_:)``: blobs, and text as its UTF-8 bytes.
///
/// Anything else yields nil. Indexes out of range trap.
public struct Row: Sendable, Equatable {
    /// The values; usually a slice of one array shared by all rows of a result.
    @usableFromInline
    let storage: ArraySlice<DatabaseValue>

    /// Creates a row holding `values` (mainly for tests and fakes).
    public init(_ values: [DatabaseValue]) {
        storage = values[...]
    }

    init(storage: ArraySlice<DatabaseValue>) {
        self.storage = storage
    }

    /// Number of columns.
    public var count: Int { storage.count }

    /// The values, in column order.
    public var values: [DatabaseValue] { Array(storage) }

    /// The value of column `index` (0-based).
    @inlinable
    public subscript(_ index: Int) -> DatabaseValue {
        storage[storage.startIndex + index]
    }

    /// Column `i` as a 64-bit integer; nil when NULL or not an integer.
    public func int64(_ i: Int) -> Int64? {
        switch self[i] {
        case .int(let value): return value
        case .double(let value): return Int64(exactly: value)
        case .text(let text): return Self.parseInteger(text)
        case .null, .blob: return nil
        }
    }

    /// Column `i` as an `Int`; nil when NULL or not an integer.
    public func int(_ i: Int) -> Int? {
        int64(i).flatMap { Int(exactly: $0) }
    }

    /// Column `i` as a boolean (nonzero integer is true); nil when NULL or not an integer.
    public func bool(_ i: Int) -> Bool? {
        int64(i).map { $0 != 0 }
    }

    /// Column `i` as a double; nil when NULL or not numeric.
    public func double(_ i: Int) -> Double? {
        switch self[i] {
        case .double(let value): return value
        case .int(let value): return Double(value)
        case .text(let text): return Double(text)
        case .null, .blob: return nil
        }
    }

    /// Column `i` as text; nil when NULL. DATE columns read as `"YYYY-MM-DD"`, DATETIME(3) as
    /// `"YYYY-MM-DD HH:MM:SS.mmm"` (as many fractional digits as the column declares).
    public func string(_ i: Int) -> String? {
        switch self[i] {
        case .text(let text): return text
        case .int(let value): return String(value)
        case .double(let value): return String(value)
        case .blob(let bytes):
            let text = String(decoding: bytes, as: UTF8.self)
            return text.utf8.elementsEqual(bytes) ? text : nil
        case .null: return nil
        }
    }

    /// Column `i` as bytes; nil when NULL or numeric.
    public func bytes(_ i: Int) -> [UInt8]? {
        switch self[i] {
        case .blob(let bytes): return bytes
        case .text(let text): return Array(text.utf8)
        case .null, .int, .double: return nil
        }
    }

    /// `"-12"`, `"12.000"` → integer; anything else → nil.
    static func parseInteger(_ text: String) -> Int64? {
        if let value = Int64(text) { return value }
        guard let dot = text.utf8.firstIndex(of: UInt8(ascii: ".")) else { return nil }
        let fraction = text.utf8[text.utf8.index(after: dot)...]
        guard fraction.allSatisfy({ $0 == UInt8(ascii: "0") }) else { return nil }
        return Int64(Substring(text.utf8[..<dot]))
    }
}
