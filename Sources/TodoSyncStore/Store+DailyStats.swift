import MariaDB
import TodoSyncCore

extension Store {
    /// The user's live stat for `day`, or nil.
    public func dailyStat(userID: Int64, day: Day) throws -> DailyStat? {
        try guarded { try db.queryOne(SQL.DailyStats.liveByDay, [.int(userID), .day(day)]).map(DailyStat.init(row:)) }
    }
}
