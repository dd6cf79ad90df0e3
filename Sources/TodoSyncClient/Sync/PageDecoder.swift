import TodoSyncCore

/// A tag, todo or tombstone as the server sent it: its bookkeeping in fixed fields, its synced
/// fields (`TodoField`, `TagField`) by their keys as sent (absent fields are nil: not known at
/// the version the record was sent at; `null` is a value).
struct ServerRecord: Sendable, Equatable {
    var id: Int64?
    var clientID: String?
    var version: Int64?
    var createdAt: String?
    var updatedAt: String?
    var deletedAt: String?
    /// The synced fields it carries, by contract key.
    var fields: JSONObject = [:]
    // daily stat
    var date: String?
    /// The object's own JSON bytes (kept for daily stats).
    var json: ArraySlice<UInt8> = []

    init() {}

    /// From a parsed object (push results, tests).
    init(_ object: JSONObject) {
        id = object["id"]?.int64Value
        clientID = object["clientId"]?.stringValue
        version = object["version"]?.int64Value
        createdAt = object["createdAt"]?.stringValue
        updatedAt = object["updatedAt"]?.stringValue
        deletedAt = object["deletedAt"]?.stringValue
        for key in Self.syncedKinds.keys { if let value = object[key] { self[contractKey: key] = value } }
        date = object["date"]?.stringValue
        json = ArraySlice(Array(JSONText.encode(.object(object)).utf8))
    }

    /// The kind of each synced field of either record, by key (the keys of the two lists differ).
    static let syncedKinds: [String: (kind: FieldKind, isNullable: Bool)] = Dictionary(uniqueKeysWithValues:
        TodoField.allCases.map { ($0.key, ($0.kind, $0.isNullable)) } + TagField.allCases.map { ($0.key, ($0.kind, $0.isNullable)) })

    /// A synced field's value as sent, by contract key: nil when absent, and when `null` where the
    /// field is not nullable (nothing to take: the device keeps its value).
    subscript(contractKey key: String) -> JSONValue? {
        get { fields[key] }
        set {
            guard let value = newValue, value != .null || Self.syncedKinds[key]?.isNullable == true else { return }
            fields[key] = value
        }
    }

    subscript(field: some SyncedField) -> JSONValue? { self[contractKey: field.key] }

    var hasTagID: Bool { fields[TodoField.tagId.key] != nil }
    var tagID: Int64? { fields[TodoField.tagId.key]?.int64Value }
    var title: String? { self[TodoField.title]?.stringValue }
    var name: String? { self[TagField.name]?.stringValue }
    var color: String? { self[TagField.color]?.stringValue }
}

/// One pull page, decoded.
struct DecodedPage: Sendable {
    var tags: [ServerRecord] = []
    var tagTombstones: [ServerRecord] = []
    var todos: [ServerRecord] = []
    var todoTombstones: [ServerRecord] = []
    var stats: [ServerRecord] = []
    var statTombstones: [ServerRecord] = []
    /// A window pull's `left`: records that still exist but are outside the window now
    /// (`{id, clientId, version}`; always empty for tags).
    var todoLeft: [ServerRecord] = []
    var statLeft: [ServerRecord] = []
    var cursor: String?
    var hasMore: Bool?

    var count: Int {
        tags.count + tagTombstones.count + todos.count + todoTombstones.count + stats.count + statTombstones.count
            + todoLeft.count + statLeft.count
    }

    /// This page as a pull of `window` (inside the page's own) would have it: the todos and daily
    /// stats it upserts outside `window` are `left` instead (`LocalStore.syncWindows`).
    func keeping(_ window: SyncWindow) -> DecodedPage {
        func inside(_ date: String?) -> Bool { date.flatMap(Day.init).map(window.contains) ?? true }
        var page = self
        page.todos = todos.filter { inside($0[TodoField.deadline]?.stringValue) }
        page.todoLeft += todos.filter { !inside($0[TodoField.deadline]?.stringValue) }
        page.stats = stats.filter { inside($0.date) }
        page.statLeft += stats.filter { !inside($0.date) }
        return page
    }
}

/// A strict, allocation-light decoder for the contract's pull page: known keys go straight into
/// `ServerRecord` (a synced field by its kind, from the list), unknown ones are skipped (the
/// contract may grow).
struct PageDecoder {
    struct Failure: Error, CustomStringConvertible {
        var offset: Int
        var description: String { "malformed pull page at byte \(offset)" }
    }

    private let bytes: [UInt8]
    private var index = 0

    static func decode(_ bytes: [UInt8]) throws -> DecodedPage {
        var decoder = PageDecoder(bytes: bytes)
        return try decoder.page()
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private mutating func page() throws -> DecodedPage {
        var page = DecodedPage()
        try object { key, decoder in
            switch key {
            case "changes":
                try decoder.object { kind, decoder in
                    try decoder.object { list, decoder in
                        let records = try decoder.array { try $0.record() }
                        switch (kind, list) {
                        case ("tags", "upserted"): page.tags = records
                        case ("tags", "deleted"): page.tagTombstones = records
                        case ("todos", "upserted"): page.todos = records
                        case ("todos", "deleted"): page.todoTombstones = records
                        case ("dailyStats", "upserted"): page.stats = records
                        case ("dailyStats", "deleted"): page.statTombstones = records
                        case ("todos", "left"): page.todoLeft = records
                        case ("dailyStats", "left"): page.statLeft = records
                        default: break
                        }
                    }
                }
            case "cursor": page.cursor = try decoder.string()
            case "hasMore": page.hasMore = try decoder.bool()
            default: try decoder.skipValue()
            }
        }
        skipWhitespace()
        guard index == bytes.count else { throw Failure(offset: index) }
        return page
    }

    private mutating func record() throws -> ServerRecord {
        var record = ServerRecord()
        skipWhitespace()
        let start = index
        try object { key, decoder in
            switch key {
            case "id": record.id = try decoder.optionalInt()
            case "clientId": record.clientID = try decoder.optionalString()
            case "version": record.version = try decoder.optionalInt()
            case "createdAt": record.createdAt = try decoder.optionalString()
            case "updatedAt": record.updatedAt = try decoder.optionalString()
            case "deletedAt": record.deletedAt = try decoder.optionalString()
            case "date": record.date = try decoder.optionalString()
            default:
                // A synced field (`TodoField`, `TagField`), read by its kind; others are skipped.
                guard let field = ServerRecord.syncedKinds[key] else { return try decoder.skipValue() }
                switch field.kind {
                case .text, .day, .instant: record[contractKey: key] = .optionalString(try decoder.optionalString())
                case .bool: record[contractKey: key] = .bool(try decoder.bool())
                case .integer, .reference: record[contractKey: key] = .optionalInt(try decoder.optionalInt())
                }
            }
        }
        record.json = bytes[start..<index]
        return record
    }

    // MARK: Grammar

    private mutating func object(_ member: (String, inout PageDecoder) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if peek() == UInt8(ascii: "}") { index += 1; return }
        while true {
            skipWhitespace()
            let key = try string()
            skipWhitespace()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            try member(key, &self)
            skipWhitespace()
            if peek() == UInt8(ascii: ",") { index += 1; continue }
            try expect(UInt8(ascii: "}"))
            return
        }
    }

    private mutating func array<T>(_ element: (inout PageDecoder) throws -> T) throws -> [T] {
        skipWhitespace()
        try expect(UInt8(ascii: "["))
        var items: [T] = []
        skipWhitespace()
        if peek() == UInt8(ascii: "]") { index += 1; return items }
        while true {
            skipWhitespace()
            items.append(try element(&self))
            skipWhitespace()
            if peek() == UInt8(ascii: ",") { index += 1; continue }
            try expect(UInt8(ascii: "]"))
            return items
        }
    }

    private mutating func skipValue() throws {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: "{"): try object { _, decoder in try decoder.skipValue() }
        case UInt8(ascii: "["): _ = try array { try $0.skipValue() }
        case UInt8(ascii: "\""): _ = try string()
        case UInt8(ascii: "t"), UInt8(ascii: "f"): _ = try bool()
        case UInt8(ascii: "n"): try literal("null")
        default: try number()
        }
    }

    private mutating func optionalString() throws -> String? {
        if peek() == UInt8(ascii: "n") { try literal("null"); return nil }
        return try string()
    }

    private mutating func optionalInt() throws -> Int64? {
        if peek() == UInt8(ascii: "n") { try literal("null"); return nil }
        let start = index
        try number()
        guard let value = Int64(String(decoding: bytes[start..<index], as: UTF8.self)) else { throw Failure(offset: start) }
        return value
    }

    private mutating func bool() throws -> Bool {
        if peek() == UInt8(ascii: "t") { try literal("true"); return true }
        try literal("false")
        return false
    }

    private mutating func number() throws {
        let start = index
        while index < bytes.count {
            switch bytes[index] {
            case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                 UInt8(ascii: "e"), UInt8(ascii: "E"):
                index += 1
            default:
                guard index > start else { throw Failure(offset: index) }
                return
            }
        }
        guard index > start else { throw Failure(offset: index) }
    }

    private mutating func string() throws -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        // Fast path: no escapes.
        while index < bytes.count, bytes[index] != UInt8(ascii: "\""), bytes[index] != UInt8(ascii: "\\") {
            index += 1
        }
        guard index < bytes.count else { throw Failure(offset: start) }
        if bytes[index] == UInt8(ascii: "\"") {
            defer { index += 1 }
            guard let text = String(validating: bytes[start..<index], as: UTF8.self) else { throw Failure(offset: start) }
            return text
        }
        var scalars = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                guard let text = String(validating: scalars, as: UTF8.self) else { throw Failure(offset: start) }
                return text
            }
            if byte != UInt8(ascii: "\\") {
                scalars.append(byte)
                index += 1
                continue
            }
            index += 1
            guard index < bytes.count else { break }
            let escaped = bytes[index]
            index += 1
            switch escaped {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): scalars.append(escaped)
            case UInt8(ascii: "b"): scalars.append(0x08)
            case UInt8(ascii: "f"): scalars.append(0x0C)
            case UInt8(ascii: "n"): scalars.append(0x0A)
            case UInt8(ascii: "r"): scalars.append(0x0D)
            case UInt8(ascii: "t"): scalars.append(0x09)
            case UInt8(ascii: "u"):
                var code = try hex4()
                if (0xD800...0xDBFF).contains(code) {
                    try expect(UInt8(ascii: "\\"))
                    try expect(UInt8(ascii: "u"))
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw Failure(offset: index) }
                    code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(code) else { throw Failure(offset: index) }
                scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
            default:
                throw Failure(offset: index)
            }
        }
        throw Failure(offset: start)
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count, let value = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16)
        else { throw Failure(offset: index) }
        index += 4
        return value
    }

    private mutating func literal(_ text: StaticString) throws {
        let count = text.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw Failure(offset: index) }
        let expected = UnsafeBufferPointer(start: text.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != expected[offset] { throw Failure(offset: index) }
        index += count
    }

    private mutating func expect(_ byte: UInt8) throws {
        guard index < bytes.count, bytes[index] == byte else { throw Failure(offset: index) }
        index += 1
    }

    private func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

    private mutating func skipWhitespace() {
        while index < bytes.count, bytes[index] == 0x20 || bytes[index] == 0x0A || bytes[index] == 0x0D || bytes[index] == 0x09 {
            index += 1
        }
    }
}
