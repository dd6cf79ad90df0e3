import MariaDB
import TodoSyncCore

/// Recomputes daily stats inside a write transaction. A stat's version changes only when its
/// content does; a date without live todos turns its stat into a tombstone.
struct DailyStatsRecomputer {
    let transaction: WriteTransaction

    private var db: Connection { transaction.db }

    /// Recomputes every date the transaction touched, plus dates whose stats show a renamed or
    /// recolored tag. Dates are processed in order so versions are deterministic; their inputs
    /// and current stats are loaded `SQL.DailyStats.dayBatch` dates per query.
    func run() throws {
        var days = transaction.touchedDays
        for tagID in transaction.changedTags {
            for row in try db.query(SQL.DailyStats.daysWithCompletedTag, [.int(transaction.userID), .int(tagID)]) {
                days.insert(Day(row.string(0)!)!)
            }
        }
        let sorted = days.sorted()
        let batch = SQL.DailyStats.dayBatch
        for start in stride(from: 0, to: sorted.count, by: batch) {
            let chunk = Array(sorted[start..<min(start + batch, sorted.count)])
            let parameters = [DatabaseValue.int(transaction.userID)]
                + (0..<batch).map { DatabaseValue.day(chunk[min($0, chunk.count - 1)]) }
            var inputs: [Day: [StatInput]] = [:]
            for row in try db.query(SQL.DailyStats.inputsForDays, parameters) {
                let tag = row.int64(5).map { StatInput.TagRef(id: $0, name: row.string(6) ?? "", color: row.string(7) ?? "") }
                inputs[Day(row.string(0)!)!, default: []].append(StatInput(
                    isCompleted: row.bool(1)!, isLife: row.bool(2)!, difficulty: row.int(3)!,
                    estimatedTime: row.int(4)!, tag: tag))
            }
            var existing: [Day: DailyStat] = [:]
            for row in try db.query(SQL.DailyStats.byDays, parameters) {
                let stat = DailyStat(row: row)
                existing[stat.date] = stat
            }
            for day in chunk {
                try write(day, content: DailyStatContent.compute(inputs[day] ?? []), existing: existing[day])
            }
        }
    }

    /// Brings one date's stat in line with its computed content (nil: no live todos).
    private func write(_ day: Day, content: DailyStatContent?, existing: DailyStat?) throws {
        let userID = transaction.userID
        let now = transaction.now
        switch (existing, content) {
        case (nil, nil):
            return
        case (nil, let content?):
            let version = try transaction.nextVersion()
            let inserted = try db.execute(SQL.DailyStats.insert, [.int(userID), .day(day)] + values(of: content) + [
                .int(version), .timestamp(now), .timestamp(now),
            ])
            transaction.changed(DailyStat(id: Int64(inserted.lastInsertID), date: day, content: content, version: version,
                                          createdAt: now.rfc3339, updatedAt: now.rfc3339, deletedAt: nil))
        case (var stat?, nil):
            guard stat.deletedAt == nil else { return }
            stat.version = try transaction.nextVersion()
            stat.updatedAt = now.rfc3339
            stat.deletedAt = now.rfc3339
            try db.execute(SQL.DailyStats.softDelete, [
                .timestamp(now), .timestamp(now), .int(stat.version), .int(stat.id),
            ])
            transaction.changed(stat)
        case (var stat?, let content?):
            guard stat.deletedAt != nil || stat.content != content else { return }
            stat.content = content
            stat.version = try transaction.nextVersion()
            stat.updatedAt = now.rfc3339
            stat.deletedAt = nil
            try db.execute(SQL.DailyStats.update, values(of: content) + [
                .int(stat.version), .timestamp(now), .int(stat.id),
            ])
            transaction.changed(stat)
        }
    }

    private func values(of content: DailyStatContent) -> [DatabaseValue] {
        [
            .int(Int64(content.todoCount)), .int(Int64(content.completedCount)), .int(content.productivityHundredths),
            .int(Int64(content.balanceNum)), .int(content.centerXHundredths), .int(content.centerYHundredths),
            .text(content.tagStatsJSON),
        ]
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
