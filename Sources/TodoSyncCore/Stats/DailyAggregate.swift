/// The running sums one date's stat is rendered from (`render`), kept next to the stat
/// (`daily_stats`, Sql/023) so that a write applies each todo's change as a delta instead of
/// reading every todo of the date again. Every field is a plain sum over the date's live todos,
/// so adding a todo and removing it again leaves the aggregate exactly as it was.
public struct DailyAggregate: Sendable, Equatable {
    /// Live todos, and the completed ones among them.
    public var todoCount: Int
    public var completedCount: Int
    /// Σ difficulty × minutes over the completed todos.
    public var weightedMinutes: Int64
    /// Σ minutes over the completed todos with and without `isLife`.
    public var lifeMinutes: Int64
    public var workMinutes: Int64
    /// Completed todos per tag id; no zero entries.
    public var tagCounts: [Int64: Int]

    public init(todoCount: Int = 0, completedCount: Int = 0, weightedMinutes: Int64 = 0, lifeMinutes: Int64 = 0,
                workMinutes: Int64 = 0, tagCounts: [Int64: Int] = [:]) {
        self.todoCount = todoCount
        self.completedCount = completedCount
        self.weightedMinutes = weightedMinutes
        self.lifeMinutes = lifeMinutes
        self.workMinutes = workMinutes
        self.tagCounts = tagCounts
    }

    /// The aggregate of these todos.
    public init<Todos: Sequence>(_ todos: Todos) where Todos.Element == StatInput {
        self.init()
        for todo in todos { add(todo) }
    }

    public static let zero = DailyAggregate()

    /// Adds one live todo (`sign` +1) or takes it away (`sign` -1).
    public mutating func add(_ todo: StatInput, sign: Int = 1) {
        todoCount += sign
        guard todo.isCompleted else { return }
        completedCount += sign
        let minutes = Int64(todo.estimatedTime) * Int64(sign)
        weightedMinutes += Int64(todo.difficulty) * minutes
        if todo.isLife { lifeMinutes += minutes } else { workMinutes += minutes }
        if let tagID = todo.tagID {
            let count = tagCounts[tagID, default: 0] + sign
            tagCounts[tagID] = count == 0 ? nil : count
        }
    }

    /// Adds another aggregate (a delta).
    public mutating func add(_ other: DailyAggregate) {
        todoCount += other.todoCount
        completedCount += other.completedCount
        weightedMinutes += other.weightedMinutes
        lifeMinutes += other.lifeMinutes
        workMinutes += other.workMinutes
        for (tagID, delta) in other.tagCounts {
            let count = tagCounts[tagID, default: 0] + delta
            tagCounts[tagID] = count == 0 ? nil : count
        }
    }

    /// The contract's formulas ("Daily stats"), once: nil when the date has no live todo (no
    /// stat). `tag` gives a tag's current name and color.
    public func render(tag: (Int64) -> (name: String, color: String)) -> DailyStatContent? {
        guard todoCount > 0 else { return nil }
        let total = lifeMinutes + workMinutes
        let tagStats = tagCounts
            .map { id, count in
                let current = tag(id)
                return DailyStatContent.TagStat(tagID: id, name: current.name, color: current.color, count: count)
            }
            .sorted { ($0.count, -$0.tagID) > ($1.count, -$1.tagID) }
        return DailyStatContent(
            todoCount: todoCount,
            completedCount: completedCount,
            productivityHundredths: roundedQuotient(weightedMinutes * 100, 60),
            balanceNum: total == 0 ? 50 : Int(roundedQuotient(100 * lifeMinutes, total)),
            tagStatsJSON: DailyStatContent.encode(tagStats),
            centerXHundredths: total == 0 ? 0 : roundedQuotient(100 * (lifeMinutes - workMinutes), total),
            centerYHundredths: roundedQuotient(100 * Int64(completedCount), Int64(todoCount)))
    }

    /// `tagCounts` as stored: `id:count` pairs by ascending id, comma-separated (`""`: none).
    public var tagCountsText: String {
        tagCounts.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }.joined(separator: ",")
    }

    /// Parses `tagCountsText`; nil when the text is not in that form.
    public static func tagCounts(fromText text: String) -> [Int64: Int]? {
        var counts: [Int64: Int] = [:]
        guard !text.isEmpty else { return counts }
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let parts = pair.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, let id = Int64(parts[0]), let count = Int(parts[1]) else { return nil }
            counts[id] = count
        }
        return counts
    }
}
