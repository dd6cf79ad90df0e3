/// How many bytes a todo's JSON can take, derived from the fields' rules (issue 34, item 3).
///
/// Every column that keeps a todo's rendering (the todo list, the change feed, stored push
/// results, Idempotency-Key answers) must hold the largest valid todo: a todo that validates but
/// cannot be stored is a 500 on every retry, and in a push it took the whole batch with it. The
/// largest todo is built here from the rules themselves (`TodoField`'s limits, `ClientID.length`,
/// the widest date, id and timestamp) and rendered by the writer that renders every todo, so a new
/// field or a longer limit moves `Todo.maximumRenderedBytes` by itself; `StorageCapacityTests`
/// holds it to the real columns' capacities in information_schema.
extension JSONWriter {
    /// The most bytes one Unicode scalar takes inside a string this writer writes: a control
    /// character other than `\n`, `\r` and `\t` goes out as `\u00XX` (6 bytes); `"` and `\` as
    /// 2; every other scalar as its UTF-8 bytes (at most 4).
    public static let maximumBytesPerScalar = 6
    /// A scalar that takes `maximumBytesPerScalar` bytes.
    public static let widestScalar: Character = "\u{1}"
}

extension TodoField {
    /// The value of the field's rule that renders longest, from its kind and limits: a new field
    /// needs no edit here.
    var widestValue: JSONValue {
        switch kind {
        case .text: .string(Self.widestString(length ?? 0...0))
        case .bool: .bool(false)
        case .integer: .number(JSONNumber(literal: "\(Self.widestInteger(range ?? 0...0))"))
        case .day: .string(Day.maximum.description)
        case .instant: .string(Self.widestInstant)
        case .reference: .number(JSONNumber(literal: "\(Int64.max)"))
        }
    }

    /// Every instant renders in the same 24 bytes; this one is the latest the rule allows.
    static let widestInstant = "2999-12-31T23:59:59.999Z"

    /// The longest string of the rule, of scalars that each take the most bytes once escaped.
    private static func widestString(_ length: ClosedRange<Int>) -> String {
        String(repeating: JSONWriter.widestScalar, count: length.upperBound)
    }

    /// The integer of the range with the most characters (a sign counts).
    private static func widestInteger(_ range: ClosedRange<Int64>) -> Int64 {
        "\(range.lowerBound)".utf8.count > "\(range.upperBound)".utf8.count ? range.lowerBound : range.upperBound
    }
}

extension Todo {
    /// The valid todo whose JSON is longest: every field at the widest value of its rule, the
    /// largest id and version, a clientId, and a tombstone's `deletedAt` (longer than `null`).
    public static var widest: Todo {
        let instant = TodoField.widestInstant
        let todo = Todo(id: Int64.max, clientID: String(repeating: "f", count: ClientID.length), title: "", raw: "",
                        isImportant: false, isLife: false, tagID: nil, difficulty: 0, estimatedTime: 0,
                        deadline: Day.maximum, isCompleted: false, version: Int64.max, createdAt: instant,
                        updatedAt: instant, deletedAt: instant)
        // Through the create parsing, as a client's values would go: valid by construction.
        var reader = FieldReader(object: Dictionary(uniqueKeysWithValues: TodoField.allCases.map { ($0.key, $0.widestValue) }))
        let patch = TodoPatch.read(&reader)
        precondition(reader.problems.isEmpty, "the widest todo breaks its own rules: \(reader.problems)")
        return patch.applied(to: todo)
    }

    /// The most bytes the JSON of a valid todo takes (at the current schema version, the widest:
    /// an older version's record has fewer fields): what every column that stores one must hold.
    public static let maximumRenderedBytes: Int = {
        var writer = JSONWriter(reservingCapacity: 80_000)
        widest.write(to: &writer)
        return writer.bytes.count
    }()

    /// An upper bound of this todo's rendered bytes, without rendering it: each scalar of its
    /// strings takes at most `maximumBytesPerScalar` bytes and at least one UTF-8 byte, and the
    /// rest of the object is at most what the widest todo's is.
    public var renderedBytesBound: Int {
        let text = title.utf8.count + raw.utf8.count + (notes?.utf8.count ?? 0)
        return Todo.maximumRenderedBytes - Todo.widestTextScalars * JSONWriter.maximumBytesPerScalar
            + text * JSONWriter.maximumBytesPerScalar
    }

    /// The scalars of the widest todo's strings (title, raw, notes).
    private static let widestTextScalars: Int = {
        let todo = widest
        return todo.title.unicodeScalars.count + todo.raw.unicodeScalars.count + (todo.notes?.unicodeScalars.count ?? 0)
    }()
}

extension DailyStatContent {
    /// The most bytes one entry of a stat's `tagStats` takes, with the comma after it: the widest
    /// tag id, name (`TagField.nameLength` of the widest scalar), color and count. The contract
    /// sets no limit on how many tags a date's completed todos name, so a stat's size is bounded
    /// per tag: `maximumTagStatsBytes(tags:)`.
    public static let maximumTagStatBytes: Int = {
        let widest = TagStat(tagID: Int64.max, name: String(repeating: JSONWriter.widestScalar,
                                                            count: TagField.nameLength.upperBound),
                             color: "#FFFFFF", count: Int.max)
        return encode([widest]).utf8.count - 2 + 1
    }()

    /// The most bytes `tagStats` takes on a date whose completed todos name `tags` tags.
    public static func maximumTagStatsBytes(tags: Int) -> Int { 2 + tags * maximumTagStatBytes }

    /// The most bytes the stored `tag_counts` ("tagId:count", comma-separated) takes for `tags` tags.
    public static func maximumTagCountsBytes(tags: Int) -> Int { tags * ("\(Int64.max):\(Int64.max),".utf8.count) }
}
