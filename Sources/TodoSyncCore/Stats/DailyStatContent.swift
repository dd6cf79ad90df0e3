/// What the daily-stat formulas need of one live todo.
public struct StatInput: Sendable, Equatable {
    public let isCompleted: Bool
    public let isLife: Bool
    public let difficulty: Int
    public let estimatedTime: Int
    /// The todo's tag with its current name and color, if any.
    public let tag: TagRef?
    /// The todo's tag id (what an aggregate counts; the name and color come at rendering).
    public let tagID: Int64?

    public struct TagRef: Sendable, Equatable {
        public let id: Int64
        public let name: String
        public let color: String

        public init(id: Int64, name: String, color: String) {
            self.id = id
            self.name = name
            self.color = color
        }
    }

    public init(isCompleted: Bool, isLife: Bool, difficulty: Int, estimatedTime: Int, tag: TagRef?) {
        self.init(isCompleted: isCompleted, isLife: isLife, difficulty: difficulty, estimatedTime: estimatedTime,
                  tag: tag, tagID: tag?.id)
    }

    /// An input known by its tag id only (a delta: names and colors are looked up when rendering).
    public init(isCompleted: Bool, isLife: Bool, difficulty: Int, estimatedTime: Int, tagID: Int64?) {
        self.init(isCompleted: isCompleted, isLife: isLife, difficulty: difficulty, estimatedTime: estimatedTime,
                  tag: nil, tagID: tagID)
    }

    private init(isCompleted: Bool, isLife: Bool, difficulty: Int, estimatedTime: Int, tag: TagRef?, tagID: Int64?) {
        self.isCompleted = isCompleted
        self.isLife = isLife
        self.difficulty = difficulty
        self.estimatedTime = estimatedTime
        self.tag = tag
        self.tagID = tagID
    }
}

/// The derived part of a daily stat: everything but id, date, version and timestamps.
/// Decimals are kept as exact hundredths; `tagStats` as its canonical JSON text, which is what
/// the store keeps and the API sends, so reads and "did it change?" checks never re-parse it.
public struct DailyStatContent: Sendable, Equatable {
    public var todoCount: Int
    public var completedCount: Int
    public var productivityHundredths: Int64
    public var balanceNum: Int
    /// The contract's `tagStats` array as JSON, e.g. `[{"tagId":3,"name":"Work","color":"#FF8800","count":2}]`.
    public var tagStatsJSON: String
    public var centerXHundredths: Int64
    public var centerYHundredths: Int64

    public struct TagStat: Sendable, Equatable {
        public let tagID: Int64
        public let name: String
        public let color: String
        public let count: Int

        public init(tagID: Int64, name: String, color: String, count: Int) {
            self.tagID = tagID
            self.name = name
            self.color = color
            self.count = count
        }
    }

    public init(todoCount: Int, completedCount: Int, productivityHundredths: Int64, balanceNum: Int,
                tagStatsJSON: String, centerXHundredths: Int64, centerYHundredths: Int64) {
        self.todoCount = todoCount
        self.completedCount = completedCount
        self.productivityHundredths = productivityHundredths
        self.balanceNum = balanceNum
        self.tagStatsJSON = tagStatsJSON
        self.centerXHundredths = centerXHundredths
        self.centerYHundredths = centerYHundredths
    }

    /// The contract's formulas over one date's live todos; nil when there are none (no stat).
    /// (`DailyAggregate.render` is where the formulas are; this is the full recompute's way in.)
    public static func compute(_ todos: [StatInput]) -> DailyStatContent? {
        var tags: [Int64: StatInput.TagRef] = [:]
        for todo in todos { if let tag = todo.tag { tags[tag.id] = tag } }
        return DailyAggregate(todos).render { id in (tags[id]?.name ?? "", tags[id]?.color ?? "") }
    }

    /// `balance.title` and `balance.message` for `balanceNum`.
    public var balanceText: (title: String, message: String) { Self.balanceText(num: balanceNum) }

    /// The balance's title and message for a balance number.
    public static func balanceText(num: Int) -> (title: String, message: String) {
        if num < 30 { return ("Work-heavy", "Make some room for life today.") }
        if num <= 70 { return ("Balanced", "A good balance between work and life.") }
        return ("Life-heavy", "Plenty of life today; remember your goals.")
    }

    /// The canonical JSON of a `tagStats` array.
    public static func encode(_ tagStats: [TagStat]) -> String {
        var writer = JSONWriter()
        writer.beginArray()
        for stat in tagStats {
            writer.beginObject()
            writer.field("tagId", stat.tagID)
            writer.field("name", stat.name)
            writer.field("color", stat.color)
            writer.field("count", stat.count)
            writer.endObject()
        }
        writer.endArray()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    /// The tag ids `tagStats` refers to, read straight off the canonical JSON (whose every
    /// object starts with `{"tagId":`), for pull's referential completeness.
    public var tagIDs: [Int64] {
        var ids: [Int64] = []
        let marker = Array(#"{"tagId":"#.utf8)
        let bytes = Array(tagStatsJSON.utf8)
        var index = 0
        while index + marker.count <= bytes.count {
            if bytes[index] == marker[0], bytes[index..<index + marker.count].elementsEqual(marker) {
                index += marker.count
                var value: Int64 = 0
                while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                    value = value * 10 + Int64(bytes[index] - UInt8(ascii: "0"))
                    index += 1
                }
                ids.append(value)
            } else {
                index += 1
            }
        }
        return ids
    }
}

/// A user's statistic for one date, as stored and as sent to clients.
public struct DailyStat: Sendable, Equatable {
    public var id: Int64
    public var date: Day
    public var content: DailyStatContent
    public var version: Int64
    public var createdAt: String
    public var updatedAt: String
    public var deletedAt: String?

    public init(id: Int64, date: Day, content: DailyStatContent, version: Int64, createdAt: String,
                updatedAt: String, deletedAt: String?) {
        self.id = id
        self.date = date
        self.content = content
        self.version = version
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.deletedAt = deletedAt
    }

    /// Writes the contract's DailyStat object.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("id", id)
        writer.key("date")
        writer.day(date)
        writer.field("todoCount", content.todoCount)
        writer.field("completedCount", content.completedCount)
        writer.key("productivityNum")
        writer.decimal(hundredths: content.productivityHundredths)
        writer.key("balance")
        writer.beginObject()
        writer.field("num", content.balanceNum)
        let text = content.balanceText
        writer.field("title", text.title)
        writer.field("message", text.message)
        writer.endObject()
        writer.key("tagStats")
        writer.raw(Array(content.tagStatsJSON.utf8))
        writer.key("center")
        writer.beginObject()
        writer.key("x")
        writer.decimal(hundredths: content.centerXHundredths)
        writer.key("y")
        writer.decimal(hundredths: content.centerYHundredths)
        writer.endObject()
        writer.syncFields(version: version, createdAt: createdAt, updatedAt: updatedAt, deletedAt: deletedAt)
        writer.endObject()
    }
}
