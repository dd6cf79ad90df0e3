/// Writes JSON straight into a byte buffer. Used for every response body: the record shapes are
/// fixed, so this is both exact (keys in the contract's order, `null` written explicitly, no `\/`)
/// and several times faster than `JSONEncoder`.
public struct JSONWriter: Sendable {
    /// The bytes written so far.
    public private(set) var bytes: [UInt8] = []
    /// One entry per open object/array: whether a member has been written (so a comma is due).
    private var hasMembers: [Bool] = []
    /// `key(_:)` was just written; the next value belongs to it and needs no comma.
    private var afterKey = false

    public init(reservingCapacity capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Hands the bytes written so far to `body`, then forgets them, keeping the writer's place
    /// (open objects and arrays, whether a comma is due): a long document written in pieces.
    public mutating func drain<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        defer { bytes.removeAll(keepingCapacity: true) }
        return bytes.withUnsafeBytes(body)
    }

    private mutating func separate() {
        guard let last = hasMembers.last else { return }
        if last { bytes.append(UInt8(ascii: ",")) } else { hasMembers[hasMembers.count - 1] = true }
    }

    private mutating func beginValue() {
        if afterKey { afterKey = false } else { separate() }
    }

    /// `{`; pair with `endObject()`.
    public mutating func beginObject() {
        beginValue()
        bytes.append(UInt8(ascii: "{"))
        hasMembers.append(false)
    }

    public mutating func endObject() {
        hasMembers.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    /// `[`; pair with `endArray()`.
    public mutating func beginArray() {
        beginValue()
        bytes.append(UInt8(ascii: "["))
        hasMembers.append(false)
    }

    public mutating func endArray() {
        hasMembers.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes `"key":`; the next value call writes its value.
    public mutating func key(_ key: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    /// Writes `"key":` for a key only known at run time.
    public mutating func key(_ key: String) {
        separate()
        JSONWriter.appendQuoted(key, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    public mutating func string(_ value: String) {
        beginValue()
        JSONWriter.appendQuoted(value, to: &bytes)
    }

    public mutating func optionalString(_ value: String?) {
        if let value { string(value) } else { null() }
    }

    public mutating func int(_ value: Int64) {
        beginValue()
        JSONWriter.appendDecimal(value, to: &bytes)
    }

    /// A date as `"YYYY-MM-DD"`, written digit by digit.
    public mutating func day(_ day: Day) {
        beginValue()
        JSONWriter.appendQuotedDay(year: day.year, month: day.month, day: day.day, to: &bytes)
    }

    /// Appends the decimal digits of `value` without an intermediate String.
    public static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[19 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            } while magnitude > 0
            bytes.append(contentsOf: buffer[(20 - count)...])
        }
    }

    public mutating func optionalInt(_ value: Int64?) {
        if let value { int(value) } else { null() }
    }

    public mutating func bool(_ value: Bool) {
        beginValue()
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public mutating func null() {
        beginValue()
        bytes.append(contentsOf: "null".utf8)
    }

    /// A number with exactly `hundredths` / 100, written without trailing zeros (`1.5`, `2`, `-0.25`).
    public mutating func decimal(hundredths: Int64) {
        beginValue()
        JSONWriter.appendHundredths(hundredths, to: &bytes)
    }

    /// Splices an already-encoded JSON value.
    public mutating func raw(_ json: [UInt8]) {
        beginValue()
        bytes.append(contentsOf: json)
    }

    public mutating func field(_ name: StaticString, _ value: String) { key(name); string(value) }
    public mutating func field(_ name: StaticString, _ value: String?) { key(name); optionalString(value) }
    public mutating func field(_ name: StaticString, _ value: Int64) { key(name); int(value) }
    public mutating func field(_ name: StaticString, _ value: Int64?) { key(name); optionalInt(value) }
    public mutating func field(_ name: StaticString, _ value: Int) { key(name); int(Int64(value)) }
    public mutating func field(_ name: StaticString, _ value: Bool) { key(name); bool(value) }

    /// The fields every synced record ends with: `version`, `createdAt`, `updatedAt`, `deletedAt`.
    public mutating func syncFields(version: Int64, createdAt: String, updatedAt: String, deletedAt: String?) {
        field("version", version)
        field("createdAt", createdAt)
        field("updatedAt", updatedAt)
        field("deletedAt", deletedAt)
    }

    /// `hundredths / 100` as a JSON number without trailing zeros.
    public static func formatHundredths(_ hundredths: Int64) -> String {
        var bytes: [UInt8] = []
        appendHundredths(hundredths, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `hundredths / 100` as a JSON number without trailing zeros (`1.5`, `2`, `-0.25`).
    public static func appendHundredths(_ hundredths: Int64, to bytes: inout [UInt8]) {
        let magnitude = hundredths.magnitude
        let fraction = Int(magnitude % 100)
        if hundredths < 0 { bytes.append(UInt8(ascii: "-")) }
        appendDecimal(Int64(magnitude / 100), to: &bytes)
        guard fraction != 0 else { return }
        bytes.append(UInt8(ascii: "."))
        bytes.append(UInt8(ascii: "0") + UInt8(fraction / 10))
        if fraction % 10 != 0 { bytes.append(UInt8(ascii: "0") + UInt8(fraction % 10)) }
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `value` as a JSON string literal: escapes `"`, `\\` and control characters only,
    /// so every other character (emoji, Hangul, RTL) goes out as its own UTF-8 bytes. Runs of
    /// bytes that need no escaping are copied in one go.
    public static func appendQuoted(_ value: String, to bytes: inout [UInt8]) {
        var value = value
        value.withUTF8 { appendQuoted(utf8: UnsafeRawBufferPointer($0), to: &bytes) }
    }

    /// ``appendQuoted(_:to:)`` for text that is already UTF-8 bytes (valid UTF-8 is the caller's
    /// promise: the bytes are copied as they are).
    public static func appendQuoted(utf8: UnsafeRawBufferPointer, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var runStart = 0
        for index in 0..<utf8.count {
            let byte = utf8[index]
            guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
            if runStart < index { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: utf8[runStart..<index])) }
            runStart = index + 1
            switch byte {
            case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "\""))
            case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "\\"))
            case 0x0A: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "n"))
            case 0x0D: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "r"))
            case 0x09: bytes.append(UInt8(ascii: "\\")); bytes.append(UInt8(ascii: "t"))
            default:
                bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                          hexDigits[Int(byte >> 4)], hexDigits[Int(byte & 0x0F)]])
            }
        }
        if runStart < utf8.count { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: utf8[runStart...])) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends the bytes of `literal` (JSON punctuation and keys of a fixed record shape).
    public static func appendLiteral(_ literal: StaticString, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends a date as `"YYYY-MM-DD"` (the form of ``day(_:)``).
    public static func appendQuotedDay(year: Int, month: Int, day: Int, to bytes: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 12) { buffer in
            buffer[0] = UInt8(ascii: "\"")
            putDate(year: year, month: month, day: day, into: buffer, at: 1)
            buffer[11] = UInt8(ascii: "\"")
            bytes.append(contentsOf: buffer)
        }
    }

    /// Appends a UTC time as `"YYYY-MM-DDTHH:MM:SS.mmmZ"` (the form of ``Timestamp/rfc3339``).
    public static func appendQuotedTimestamp(
        year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int, to bytes: inout [UInt8]
    ) {
        // Built in a stack buffer and appended at once: one capacity check instead of 26.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 26) { buffer in
            buffer[0] = UInt8(ascii: "\"")
            putDate(year: year, month: month, day: day, into: buffer, at: 1)
            buffer[11] = UInt8(ascii: "T")
            putDigits(hour, count: 2, into: buffer, at: 12)
            buffer[14] = UInt8(ascii: ":")
            putDigits(minute, count: 2, into: buffer, at: 15)
            buffer[17] = UInt8(ascii: ":")
            putDigits(second, count: 2, into: buffer, at: 18)
            buffer[20] = UInt8(ascii: ".")
            putDigits(millisecond, count: 3, into: buffer, at: 21)
            buffer[24] = UInt8(ascii: "Z")
            buffer[25] = UInt8(ascii: "\"")
            bytes.append(contentsOf: buffer)
        }
    }

    /// `YYYY-MM-DD` into `buffer` at `offset` (10 bytes).
    private static func putDate(year: Int, month: Int, day: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        putDigits(year, count: 4, into: buffer, at: offset)
        buffer[offset + 4] = UInt8(ascii: "-")
        putDigits(month, count: 2, into: buffer, at: offset + 5)
        buffer[offset + 7] = UInt8(ascii: "-")
        putDigits(day, count: 2, into: buffer, at: offset + 8)
    }

    /// The last `count` decimal digits of `value` (non-negative), zero-padded, into `buffer`.
    private static func putDigits(_ value: Int, count: Int, into buffer: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        var rest = value
        for index in stride(from: offset + count - 1, through: offset, by: -1) {
            buffer[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
            rest /= 10
        }
    }

    /// Writes one value whose bytes `body` appends itself, with the static `append…` helpers:
    /// the fast path for fixed record shapes. `body` must append exactly one complete JSON value.
    public mutating func splice(_ body: (inout [UInt8]) -> Void) {
        beginValue()
        body(&bytes)
    }
}
