import MariaDB
import TodoSyncCore

extension Store {
    /// The user's live stat for `day`, or nil.
    public func dailyStat(userID: Int64, day: Day) throws -> DailyStat? {
        try guarded { try db.queryOne(SQL.DailyStats.liveByDay, [.int(userID), .day(day)]).map(DailyStat.init(row:)) }
    }

    /// The user's live stats from `from` to `to`, by date.
    public func dailyStats(userID: Int64, from: Day, to: Day) throws -> [DailyStat] {
        try guarded {
            try db.query(SQL.DailyStats.liveInRange, [.int(userID), .day(from), .day(to)]).map(DailyStat.init(row:))
        }
    }
}
