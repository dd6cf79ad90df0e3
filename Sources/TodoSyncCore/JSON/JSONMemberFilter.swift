#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Copies a JSON object leaving out some of its top-level members: how a record rendered at the
/// current schema version (the change feed's bytes) is sent to a client of an older version
/// (`SchemaVersion.fieldsNewerThan`). The object must be compact, as `JSONWriter` writes it.
public enum JSONMemberFilter {
    /// Appends `object` to `bytes` without the members named in `keys` (their exact key bytes).
    public static func append(_ object: UnsafeRawBufferPointer, removing keys: [[UInt8]], to bytes: inout [UInt8]) {
        let count = object.count
        guard !keys.isEmpty, count >= 2, object[0] == UInt8(ascii: "{") else {
            return bytes.append(contentsOf: object)
        }
        bytes.append(UInt8(ascii: "{"))
        var first = true
        var index = 1
        while index < count - 1 {
            let memberStart = index
            let keyEnd = endOfString(object, from: index)  // after the key's closing quote
            let memberEnd = endOfValue(object, from: keyEnd + 1)  // past the colon
            let key = UnsafeRawBufferPointer(rebasing: object[(memberStart + 1)..<(keyEnd - 1)])
            if !keys.contains(where: { $0.elementsEqual(key) }) {
                if !first { bytes.append(UInt8(ascii: ",")) }
                bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: object[memberStart..<memberEnd]))
                first = false
            }
            index = memberEnd
            if index < count, object[index] == UInt8(ascii: ",") { index += 1 }
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// How ``appendFlatObject(_:removing:to:)`` names a member: its key in quotes and the colon.
    public static func memberPattern(_ key: String) -> [UInt8] {
        [UInt8(ascii: "\"")] + Array(key.utf8) + [UInt8(ascii: "\""), UInt8(ascii: ":")]
    }

    /// Appends `object`, one flat compact object, to `bytes` without the members named by
    /// `patterns` (``memberPattern(_:)``), given in the order the object has them (the order of
    /// `SchemaVersion.fieldsNewerThan`). The same bytes as ``append(_:removing:to:)``, without
    /// parsing the object: in `JSONWriter`'s compact JSON a quote inside a string is always
    /// escaped, so `"<key>":` can only be a member's key, and in a flat object (records are: no
    /// value is an object or array) every key is a top-level member, written once. Each key is
    /// found with `memchr` (the colons) from where the previous one ended, and the search stops
    /// there: the rest of the object is copied, not scanned. Its value is skipped with `memchr`
    /// when it is a string. What stays goes in with at most `patterns.count + 1` copies.
    public static func appendFlatObject(_ object: UnsafeRawBufferPointer, removing patterns: [[UInt8]],
                                        to bytes: inout [UInt8]) {
        let count = object.count
        var kept = 0  // where the bytes not yet appended start
        var from = 0
        for pattern in patterns {
            guard let at = find(pattern, in: object, from: from) else { continue }
            let end = min(endOfValue(object, from: at + pattern.count), count)
            // The member with the comma before it, or, for the first member left (the comma before
            // it, if any, went with a member already cut), the one after it.
            let cut = at > kept && object[at - 1] == UInt8(ascii: ",")
                ? (at - 1)..<end : at..<(end < count && object[end] == UInt8(ascii: ",") ? end + 1 : end)
            let keptEnd = max(cut.lowerBound, kept)
            if keptEnd > kept { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: object[kept..<keptEnd])) }
            kept = max(cut.upperBound, kept)
            from = end
        }
        bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: object[kept..<count]))
    }

    /// Where `pattern` (ending in a colon) first occurs in `json` at or after `from`: the colons
    /// are found with `memchr`, the bytes before each compared (the last eight as one word).
    private static func find(_ pattern: [UInt8], in json: UnsafeRawBufferPointer, from start: Int) -> Int? {
        let base = json.baseAddress!
        let word = pattern.count >= 8
            ? pattern.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: pattern.count - 8, as: UInt64.self) } : 0
        var index = start + pattern.count - 1
        while index < json.count {
            guard let colon = memchr(base + index, Int32(UInt8(ascii: ":")), json.count - index) else { return nil }
            let end = base.distance(to: UnsafeRawPointer(colon)) + 1
            let at = end - pattern.count
            let matches = pattern.count >= 8
                ? (base + end - 8).loadUnaligned(as: UInt64.self) == word
                    && pattern.withUnsafeBytes { memcmp(base + at, $0.baseAddress!, pattern.count - 8) } == 0
                : pattern.elementsEqual(UnsafeRawBufferPointer(rebasing: json[at..<end]))
            if matches { return at }
            index = end
        }
        return nil
    }

    /// `object` without the members named in `keys`.
    public static func removing(_ keys: [String], from object: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        object.withUnsafeBytes { append($0, removing: keys.map { Array($0.utf8) }, to: &bytes) }
        return bytes
    }

    /// The top-level members of a compact object, in order: each key (unescaped as written: the
    /// writers' keys need no escapes) and its value's JSON bytes.
    public static func members(of object: [UInt8]) -> [(key: String, value: [UInt8])] {
        object.withUnsafeBytes { json in
            var members: [(key: String, value: [UInt8])] = []
            forEachMember(of: json) { key, value in
                members.append((String(decoding: key, as: UTF8.self), Array(value)))
            }
            return members
        }
    }

    /// Calls `body` with each top-level member of a compact object, in order, where its bytes lie:
    /// the key's bytes (between its quotes, unescaped as written: the writers' keys need no
    /// escapes) and the value's JSON bytes. Nothing is allocated (the snapshot build's hot path).
    public static func forEachMember(of json: UnsafeRawBufferPointer,
                                     _ body: (_ key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws -> Void) rethrows {
        guard json.count >= 2, json[0] == UInt8(ascii: "{") else { return }
        var index = 1
        while index < json.count - 1 {
            let keyEnd = endOfString(json, from: index)
            let valueEnd = endOfValue(json, from: keyEnd + 1)
            try body(UnsafeRawBufferPointer(rebasing: json[(index + 1)..<(keyEnd - 1)]),
                     UnsafeRawBufferPointer(rebasing: json[(keyEnd + 1)..<valueEnd]))
            index = valueEnd + 1
        }
    }

    /// The index just past the string that starts (with its quote) at `start`. Quotes are found
    /// by `memchr` (strings are most of a record's bytes); one preceded by an odd number of
    /// backslashes is escaped.
    private static func endOfString(_ json: UnsafeRawBufferPointer, from start: Int) -> Int {
        guard let base = json.baseAddress else { return start + 1 }
        var index = start + 1
        while index < json.count {
            guard let found = memchr(base + index, Int32(UInt8(ascii: "\"")), json.count - index) else { return json.count + 1 }
            let quote = base.distance(to: UnsafeRawPointer(found))
            var backslashes = 0
            while quote - backslashes - 1 > start, json[quote - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
            if backslashes % 2 == 0 { return quote + 1 }
            index = quote + 1
        }
        return json.count + 1
    }

    /// The index just past the value that starts at `start` (a `,` or the closing `}` follows).
    private static func endOfValue(_ json: UnsafeRawBufferPointer, from start: Int) -> Int {
        var depth = 0
        var index = start
        while index < json.count {
            switch json[index] {
            case UInt8(ascii: "\""):
                index = endOfString(json, from: index)
                if depth == 0 { return index }
                continue
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return index }
                depth -= 1
                if depth == 0 { return index + 1 }
            case UInt8(ascii: ","):
                if depth == 0 { return index }
            default:
                break
            }
            index += 1
        }
        return index
    }
}
