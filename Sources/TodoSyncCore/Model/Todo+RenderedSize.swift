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
    /// Sets this field of `todo` to the value its rule allows that renders longest.
    func widen(_ todo: inout Todo) {
        switch self {
        case .title: todo.title = Self.widestString(Self.titleLength)
        case .raw: todo.raw = Self.widestString(Self.rawLength)
        case .notes: todo.notes = Self.widestString(Self.notesLength)
        case .isImportant: todo.isImportant = false
        case .isLife: todo.isLife = false
        case .tagId: todo.tagID = Int64.max
        case .difficulty: todo.difficulty = Int(Self.widestInteger(Self.difficultyRange))
        case .estimatedTime: todo.estimatedTime = Int(Self.widestInteger(Self.estimatedTimeRange))
        case .deadline: todo.deadline = Day.maximum
        case .isCompleted: todo.isCompleted = false
        }
    }

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
        let instant = "2999-12-31T23:59:59.999Z"
        var todo = Todo(id: Int64.max, clientID: String(repeating: "f", count: ClientID.length), title: "", raw: "",
                        isImportant: false, isLife: false, tagID: nil, difficulty: 0, estimatedTime: 0,
                        deadline: Day.maximum, isCompleted: false, version: Int64.max, createdAt: instant,
                        updatedAt: instant, deletedAt: instant)
        for field in TodoField.allCases { field.widen(&todo) }
        return todo
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
