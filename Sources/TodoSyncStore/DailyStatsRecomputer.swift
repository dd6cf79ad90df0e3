import MariaDB
import TodoSyncCore

/// Brings daily stats up to date inside a write transaction, once per transaction (`finish()`).
/// Each date's `DailyAggregate` is kept next to its stat (Sql/023): a write adds the deltas of
/// the todos it changed to the stored aggregate and renders the stat from it, instead of reading
/// every todo of the date; `recompute-stats` rebuilds aggregates from the todos themselves (the
/// full recompute, also what the tests hold the deltas against). A stat's version changes only
/// when its rendered content does; a date without live todos turns its stat into a tombstone.
struct DailyStatsRecomputer {
    let transaction: WriteTransaction

    private var db: Connection { transaction.db }

    /// What one date's stat row holds: the stat, and the aggregate it was rendered from (nil:
    /// unreadable, so rebuilt from the todos).
    private struct Stored {
        var stat: DailyStat
        var aggregate: DailyAggregate?
    }

    /// Renders every date whose aggregate the transaction changed, every date it asked to rebuild
    /// from its todos, and dates whose stats show a renamed or recolored tag. A date changed and
    /// changed back (a delta that adds up to nothing) is left alone. Dates are processed in
    /// order so versions are deterministic, `SQL.DailyStats.dayBatch` dates per query.
    func run() throws {
        var deltas: [Day: DailyAggregate] = [:]
        for change in transaction.statDeltas { deltas[change.day, default: .zero].add(change.input, sign: change.sign) }
        var days = Set(deltas.lazy.filter { $0.value != .zero }.map(\.key)).union(transaction.rebuiltDays)
        for tagID in transaction.changedTags {
            for row in try db.query(SQL.DailyStats.daysWithCompletedTag, [.int(transaction.userID), .int(tagID)]) {
                days.insert(Day(row.string(OnlyColumn.value)!)!)
            }
        }
        let sorted = days.sorted()
        let batch = SQL.DailyStats.dayBatch
        var tags = TagLookup(transaction: transaction)
        for start in stride(from: 0, to: sorted.count, by: batch) {
            let chunk = Array(sorted[start..<min(start + batch, sorted.count)])
            var stored: [Day: Stored] = [:]
            for row in try db.query(SQL.DailyStats.byDays, parameters(chunk)) {
                let stat = DailyStat(row: row)
                stored[stat.date] = Stored(stat: stat, aggregate: DailyAggregate(stored: row, of: stat))
            }
            let rebuilt = chunk.filter { transaction.rebuiltDays.contains($0) || (stored[$0].map { $0.aggregate == nil } ?? false) }
            var fromTodos: [Day: DailyAggregate] = [:]
            if !rebuilt.isEmpty {
                for row in try db.query(SQL.DailyStats.inputsForDays, parameters(rebuilt)) {
                    typealias C = SQL.DailyStats.InputColumn
                    fromTodos[Day(row.string(C.deadline)!)!, default: .zero].add(StatInput(
                        isCompleted: row.bool(C.isCompleted)!, isLife: row.bool(C.isLife)!,
                        difficulty: row.int(C.difficulty)!, estimatedTime: row.int(C.estimatedTime)!,
                        tagID: row.int64(C.tagID)))
                }
            }
            var aggregates: [Day: DailyAggregate] = [:]
            for day in chunk {
                if rebuilt.contains(day) {
                    aggregates[day] = fromTodos[day] ?? .zero
                } else {
                    var aggregate = stored[day]?.aggregate ?? .zero
                    aggregate.add(deltas[day] ?? .zero)
                    aggregates[day] = aggregate
                }
            }
            try tags.load(aggregates.values.flatMap(\.tagCounts.keys))
            var updates: [[DatabaseValue]] = []
            for day in chunk {
                let aggregate = aggregates[day]!
                try write(day, content: aggregate.render(tag: tags.current), aggregate: aggregate, stored: stored[day],
                          updates: &updates)
            }
            if let last = updates.last {
                try db.execute(SQL.DailyStats.updateBatch,
                               (0..<batch).flatMap { $0 < updates.count ? updates[$0] : last })
            }
        }
    }

    /// `userID`, then the dates, unused slots repeating the last one.
    private func parameters(_ days: [Day]) -> [DatabaseValue] {
        [.int(transaction.userID)] + (0..<SQL.DailyStats.dayBatch).map { .day(days[min($0, days.count - 1)]) }
    }

    /// Brings one date's stat in line with its rendered content (nil: no live todos), and
    /// stores the aggregate it was rendered from. New content for an existing stat is added to
    /// `updates` (a row of `SQL.DailyStats.updateBatch`), written with the rest of its batch.
    private func write(_ day: Day, content: DailyStatContent?, aggregate: DailyAggregate, stored: Stored?,
                       updates: inout [[DatabaseValue]]) throws {
        let userID = transaction.userID
        let now = transaction.now
        switch (stored?.stat, content) {
        case (nil, nil):
            return
        case (nil, let content?):
            let version = try transaction.nextVersion()
            let inserted = try db.execute(SQL.DailyStats.insert, [.int(userID), .day(day)] + values(of: content) + [
                .int(version), .timestamp(now), .timestamp(now),
            ] + values(of: aggregate))
            transaction.changed(DailyStat(id: Int64(inserted.lastInsertID), date: day, content: content, version: version,
                                          createdAt: now.rfc3339, updatedAt: now.rfc3339, deletedAt: nil), isNew: true)
        case (var stat?, nil):
            guard stat.deletedAt == nil else {
                if stored?.aggregate != aggregate { try saveAggregate(aggregate, of: stat) }
                return
            }
            stat.version = try transaction.nextVersion()
            stat.updatedAt = now.rfc3339
            stat.deletedAt = now.rfc3339
            try db.execute(SQL.DailyStats.softDelete, [.timestamp(now), .timestamp(now), .int(stat.version)]
                + values(of: aggregate) + [.int(stat.id)])
            transaction.changed(stat)
        case (var stat?, let content?):
            guard stat.deletedAt != nil || stat.content != content else {
                if stored?.aggregate != aggregate { try saveAggregate(aggregate, of: stat) }
                return
            }
            stat.content = content
            stat.version = try transaction.nextVersion()
            stat.updatedAt = now.rfc3339
            stat.deletedAt = nil
            updates.append([.int(stat.id), .int(userID), .day(day)] + values(of: content)
                + [.int(stat.version), .timestamp(now), .timestamp(now)] + values(of: aggregate))
            transaction.changed(stat)
        }
    }

    /// New inputs that render as before: no new version.
    private func saveAggregate(_ aggregate: DailyAggregate, of stat: DailyStat) throws {
        try db.execute(SQL.DailyStats.saveAggregate, values(of: aggregate) + [.int(stat.id)])
    }

    private func values(of content: DailyStatContent) -> [DatabaseValue] {
        [
            .int(Int64(content.todoCount)), .int(Int64(content.completedCount)), .int(content.productivityHundredths),
            .int(Int64(content.balanceNum)), .int(content.centerXHundredths), .int(content.centerYHundredths),
            .text(content.tagStatsJSON),
        ]
    }

    /// In `DailyAggregateColumn` order.
    private func values(of aggregate: DailyAggregate) -> [DatabaseValue] {
        [.int(aggregate.weightedMinutes), .int(aggregate.lifeMinutes), .int(aggregate.workMinutes),
         .text(aggregate.tagCountsText)]
    }
}

/// The current name and color of the tags the rendered stats count, looked up once per
/// transaction, `SQL.DailyStats.tagBatch` at a time. A tag that does not exist renders with an
/// empty name and color (as the full recompute's outer join always did).
private struct TagLookup {
    let transaction: WriteTransaction
    private var known: [Int64: (name: String, color: String)] = [:]
    private var looked: Set<Int64> = []

    init(transaction: WriteTransaction) {
        self.transaction = transaction
    }

    mutating func load(_ ids: [Int64]) throws {
        let missing = Array(Set(ids).subtracting(looked)).sorted()
        let batch = SQL.DailyStats.tagBatch
        for start in stride(from: 0, to: missing.count, by: batch) {
            let chunk = Array(missing[start..<min(start + batch, missing.count)])
            let parameters = [DatabaseValue.int(transaction.userID)]
                + (0..<batch).map { DatabaseValue.int(chunk[min($0, chunk.count - 1)]) }
            for row in try transaction.db.query(SQL.DailyStats.tagsByIDs, parameters) {
                typealias C = SQL.DailyStats.TagNameColumn
                known[row.int64(C.id)!] = (row.string(C.name) ?? "", row.string(C.color) ?? "")
            }
        }
        looked.formUnion(missing)
    }

    func current(_ id: Int64) -> (name: String, color: String) {
        known[id] ?? ("", "")
    }
}

extension DailyAggregate {
    /// The aggregate stored with `stat` in a `SQL.DailyStats.byDays` row (its columns follow the
    /// stat's); nil when its tag counts do not parse. A tombstone's is all zeros.
    init?(stored row: Row, of stat: DailyStat) {
        typealias C = DailyAggregateColumn
        let offset = DailyStatColumn.allCases.count
        guard let counts = DailyAggregate.tagCounts(fromText: row.string(offset + C.tagCounts.index) ?? "") else {
            return nil
        }
        let live = stat.deletedAt == nil
        self.init(todoCount: live ? stat.content.todoCount : 0, completedCount: live ? stat.content.completedCount : 0,
                  weightedMinutes: row.int64(offset + C.weightedMinutes.index)!,
                  lifeMinutes: row.int64(offset + C.lifeMinutes.index)!,
                  workMinutes: row.int64(offset + C.workMinutes.index)!, tagCounts: counts)
    }
}

extension DailyStat {
    /// Maps a `SQL.DailyStats.columns` row, by `DailyStatColumn` position (tag_stats is kept as
    /// the JSON it was stored as).
    init(row: Row) {
        typealias C = DailyStatColumn
        self.init(
            id: row.int64(C.id.index)!, date: Day(row.string(C.day.index)!)!,
            content: DailyStatContent(
                todoCount: row.int(C.todoCount.index)!, completedCount: row.int(C.completedCount.index)!,
                productivityHundredths: row.int64(C.productivityHundredths.index)!,
                balanceNum: row.int(C.balanceNum.index)!, tagStatsJSON: row.string(C.tagStats.index)!,
                centerXHundredths: row.int64(C.centerXHundredths.index)!,
                centerYHundredths: row.int64(C.centerYHundredths.index)!),
            version: row.int64(C.version.index)!,
            createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.createdAt.index)!),
            updatedAt: Timestamp.rfc3339(fromDatabaseText: row.string(C.updatedAt.index)!),
            deletedAt: row.string(C.deletedAt.index).map(Timestamp.rfc3339(fromDatabaseText:)))
    }
}

extension SQL {
    enum DailyStats {
        /// `DailyStatColumn`'s columns, in its order (what `DailyStat(row:)` decodes).
        static let columns = DailyStatColumn.selectList
        /// Recomputation loads `dayBatch` dates per query (unused slots repeat a date).
        static let dayBatch = 16
        private static let daySlots = Array(repeating: "?", count: dayBatch).joined(separator: ", ")
        /// The full recompute's inputs for a batch of dates, with the date first: every live todo.
        static let inputsForDays = """
            SELECT deadline, is_completed, is_life, difficulty, estimated_time, tag_id
              FROM todos FORCE INDEX (todos_user_day)
             WHERE user_id = ? AND deleted_at IS NULL AND deadline IN (\(daySlots))
            """
        enum InputColumn: Int, ResultColumns { case deadline, isCompleted, isLife, difficulty, estimatedTime, tagID }
        /// A batch of dates' stats (live or tombstones), each followed by its aggregate's columns.
        static let byDays = """
            SELECT \(columns), \(DailyAggregateColumn.selectList) FROM daily_stats WHERE user_id = ? AND day IN (\(daySlots))
            """
        /// Rendering looks tags up `tagBatch` at a time (unused slots repeat an id). Tombstones
        /// included, as the stat of a todo whose tag is being deleted in the same write needs.
        static let tagBatch = 32
        static let tagsByIDs = """
            SELECT id, name, color FROM tags WHERE user_id = ? AND id IN (\(Array(repeating: "?", count: tagBatch).joined(separator: ", ")))
            """
        enum TagNameColumn: Int, ResultColumns { case id, name, color }
        static let liveByDay = """
            SELECT \(columns) FROM daily_stats WHERE user_id = ? AND day = ? AND deleted_at IS NULL
            """
        /// Live stats of the owner's user from `from` to `to`, by day: a range read of the primary
        /// key (user_id, day), no lookup per row, no filesort. Parameters: the owner's, from, to.
        static func liveInRange(_ owner: ReadOwner) -> String {
            """
            SELECT \(qualified(columns, "s")), \(owner.userID(alias: "s"))
              FROM \(owner.from("daily_stats s FORCE INDEX (PRIMARY)", alias: "s"))
             WHERE \(owner.condition(alias: "s")) AND s.day BETWEEN ? AND ? AND s.deleted_at IS NULL
             ORDER BY s.day
            """
        }
        static let liveInRangeForUser = liveInRange(.user)
        static let liveInRangeForToken = liveInRange(.token)
        static let insert = """
            INSERT INTO daily_stats (user_id, day, todo_count, completed_count, productivity_hundredths, balance_num,
                                     center_x_hundredths, center_y_hundredths, tag_stats, version, created_at,
                                     updated_at, \(DailyAggregateColumn.selectList))
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(aggregateSlots))
            """
        /// Writes new content into `dayBatch` existing stats at once (by id; unused rows repeat
        /// one); also brings a tombstone back to life (deleted_at cleared). Each row: id, user id,
        /// day, the content, version, created (never written: the row exists), updated, the
        /// aggregate. One statement instead of one UPDATE per date.
        static let updateBatch = """
            INSERT INTO daily_stats (id, user_id, day, todo_count, completed_count, productivity_hundredths, balance_num,
                                     center_x_hundredths, center_y_hundredths, tag_stats, version, created_at,
                                     updated_at, \(DailyAggregateColumn.selectList))
            VALUES \(Array(repeating: "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, \(aggregateSlots))", count: dayBatch)
                .joined(separator: ", "))
            ON DUPLICATE KEY UPDATE todo_count = VALUES(todo_count), completed_count = VALUES(completed_count),
                productivity_hundredths = VALUES(productivity_hundredths), balance_num = VALUES(balance_num),
                center_x_hundredths = VALUES(center_x_hundredths), center_y_hundredths = VALUES(center_y_hundredths),
                tag_stats = VALUES(tag_stats), version = VALUES(version), updated_at = VALUES(updated_at),
                deleted_at = NULL, \(DailyAggregateColumn.allCases.map { "\($0.sqlName) = VALUES(\($0.sqlName))" }
                .joined(separator: ", "))
            """
        /// A date that lost its last live todo: its aggregate is all zeros again.
        static let softDelete = """
            UPDATE daily_stats SET deleted_at = ?, updated_at = ?, version = ?, \(aggregateAssignments) WHERE id = ?
            """
        /// New inputs whose rendering did not change (no new version): `todo_count` and
        /// `completed_count` are part of the stat, so they cannot have changed either.
        static let saveAggregate = """
            UPDATE daily_stats SET \(aggregateAssignments) WHERE id = ?
            """
        private static let aggregateSlots = DailyAggregateColumn.allCases.map { _ in "?" }.joined(separator: ", ")
        private static let aggregateAssignments = DailyAggregateColumn.allCases.map { "\($0.sqlName) = ?" }
            .joined(separator: ", ")
        /// Dates whose stat lists this tag (completed live todos carry it).
        static let daysWithCompletedTag = """
            SELECT DISTINCT deadline FROM todos
             WHERE user_id = ? AND tag_id = ? AND deleted_at IS NULL AND is_completed = 1
            """
    }
}
