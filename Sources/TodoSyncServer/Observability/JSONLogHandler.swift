#if canImport(Glibc)
import Glibc
#endif
import Logging

/// A swift-log handler that writes one JSON object per line to a file descriptor (stderr by
/// default): `{"ts":"2026-11-24T14:05:03.123Z","level":"info","logger":"todosync","msg":"...",...}`
/// with the logger's and the call's metadata as further top-level keys (integers and finite
/// floating-point values as JSON numbers, everything else as strings).
///
/// Each line is one `write(2)`: lines from concurrent worker threads never interleave, and with
/// the descriptor opened `O_APPEND` (the stack's `>>`, systemd's `append:`) a log rotated by
/// copy-and-truncate goes on at the start of the emptied file.
///
/// Kept cheap, since every request logs a line: the logger's own metadata (set rarely, e.g. the
/// worker index) is rendered once when it changes, the call's metadata is written in dictionary
/// order without merging or sorting, and numbers are recognised by concrete type, not by a cast
/// to a protocol.
struct JSONLogHandler: LogHandler {
    let label: String
    let fd: Int32
    var logLevel: Logger.Level
    var metadataProvider: Logger.MetadataProvider?
    var metadata: Logger.Metadata = [:] {
        didSet { renderedMetadata = Self.render(metadata) }
    }
    /// `metadata` as `,"key":value` pairs.
    private var renderedMetadata: [UInt8] = []

    init(label: String, level: Logger.Level, fd: Int32 = STDERR_FILENO) {
        self.label = label
        self.logLevel = level
        self.fd = fd
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    private static func render(_ metadata: Logger.Metadata, skipping skipped: Logger.Metadata? = nil) -> [UInt8] {
        var bytes: [UInt8] = []
        for (key, value) in metadata where skipped?[key] == nil {
            bytes.append(UInt8(ascii: ","))
            appendString(key, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
            appendValue(value, to: &bytes)
        }
        return bytes
    }

    func log(event: LogEvent) {
        var line: [UInt8] = []
        line.reserveCapacity(320)
        line.append(contentsOf: #"{"ts":""#.utf8)
        Self.appendTimestamp(to: &line)
        line.append(contentsOf: #"","level":""#.utf8)
        line.append(contentsOf: event.level.rawValue.utf8)
        line.append(contentsOf: #"","logger":"#.utf8)
        Self.appendString(label, to: &line)
        line.append(contentsOf: #","msg":"#.utf8)
        Self.appendString(event.message.description, to: &line)
        // Keys of the call win over the provider's, which win over the logger's own.
        var extra = event.metadata ?? [:]
        if let provided = metadataProvider?.get() { extra.merge(provided) { call, _ in call } }
        if extra.isEmpty {
            line.append(contentsOf: renderedMetadata)
        } else {
            if metadata.keys.contains(where: { extra[$0] != nil }) {
                line.append(contentsOf: Self.render(metadata, skipping: extra))
            } else {
                line.append(contentsOf: renderedMetadata)
            }
            line.append(contentsOf: Self.render(extra))
        }
        line.append(contentsOf: "}\n".utf8)
        line.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0 && errno == EINTR {
                    continue
                } else {
                    return  // nowhere to report a failing log
                }
            }
        }
    }

    private static func appendValue(_ value: Logger.MetadataValue, to line: inout [UInt8]) {
        switch value {
        case .string(let text):
            appendString(text, to: &line)
        case .stringConvertible(let convertible):
            // One type comparison, then one cast: trying `as Int`, `as Int64`, `as Double` in turn
            // cost a dynamic cast each (about 1,300 instructions for a request line).
            let type = ObjectIdentifier(Swift.type(of: convertible))
            if type == ObjectIdentifier(Int.self) || type == ObjectIdentifier(Int64.self) {
                line.append(contentsOf: convertible.description.utf8)
            } else if type == ObjectIdentifier(Double.self), (convertible as! Double).isFinite {
                line.append(contentsOf: convertible.description.utf8)
            } else {
                appendString(convertible.description, to: &line)
            }
        case .array(let values):
            line.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                appendValue(element, to: &line)
            }
            line.append(UInt8(ascii: "]"))
        case .dictionary(let entries):
            line.append(UInt8(ascii: "{"))
            for (index, entry) in entries.sorted(by: { $0.key < $1.key }).enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                appendString(entry.key, to: &line)
                line.append(UInt8(ascii: ":"))
                appendValue(entry.value, to: &line)
            }
            line.append(UInt8(ascii: "}"))
        }
    }

    /// A JSON string literal: quotes, backslashes and control characters escaped; other UTF-8 as
    /// is. Runs of plain bytes are copied at once (most strings need no escape at all).
    static func appendString(_ text: String, to line: inout [UInt8]) {
        line.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var start = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F else {
                    continue
                }
                line.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                appendEscaped(byte, to: &line)
                start = index + 1
            }
            line.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start...]))
        }
        line.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, to line: inout [UInt8]) {
        switch byte {
        case UInt8(ascii: "\""): line.append(contentsOf: #"\""#.utf8)
        case UInt8(ascii: "\\"): line.append(contentsOf: #"\\"#.utf8)
        case UInt8(ascii: "\n"): line.append(contentsOf: #"\n"#.utf8)
        case UInt8(ascii: "\r"): line.append(contentsOf: #"\r"#.utf8)
        case UInt8(ascii: "\t"): line.append(contentsOf: #"\t"#.utf8)
        default:
            let hex = Array("0123456789abcdef".utf8)
            line.append(contentsOf: #"\u00"#.utf8)
            line.append(hex[Int(byte >> 4)])
            line.append(hex[Int(byte & 0xF)])
        }
    }

    /// `2026-11-24T14:05:03.123Z` (UTC, milliseconds). Digits appended directly: a nested digit
    /// loop cost about 1,100 instructions per line (callgrind).
    private static func appendTimestamp(to line: inout [UInt8]) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let zero = UInt8(ascii: "0")
        let year = Int(parts.tm_year) + 1900
        let milliseconds = Int(now.tv_nsec / 1_000_000)
        line.append(zero &+ UInt8(truncatingIfNeeded: year / 1000 % 10))
        line.append(zero &+ UInt8(truncatingIfNeeded: year / 100 % 10))
        appendTwoDigits(year % 100, separator: "-", to: &line)
        appendTwoDigits(Int(parts.tm_mon) + 1, separator: "-", to: &line)
        appendTwoDigits(Int(parts.tm_mday), separator: "T", to: &line)
        appendTwoDigits(Int(parts.tm_hour), separator: ":", to: &line)
        appendTwoDigits(Int(parts.tm_min), separator: ":", to: &line)
        appendTwoDigits(Int(parts.tm_sec), separator: ".", to: &line)
        line.append(zero &+ UInt8(truncatingIfNeeded: milliseconds / 100))
        appendTwoDigits(milliseconds % 100, separator: "Z", to: &line)
    }

    @inline(__always)
    private static func appendTwoDigits(_ value: Int, separator: Unicode.Scalar, to line: inout [UInt8]) {
        line.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value / 10))
        line.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: value % 10))
        line.append(UInt8(ascii: separator))
    }
}

/// The handler `TODOSYNC_LOG_FORMAT` selects: `json` (default: one object per line) or `text`
/// (swift-log's plain stream format, for reading by eye).
func makeLogHandler(label: String, level: Logger.Level, format: String) -> any LogHandler {
    if format == "text" {
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return handler
    }
    return JSONLogHandler(label: label, level: level)
}
