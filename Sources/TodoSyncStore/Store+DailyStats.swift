import MariaDB
import TodoSyncCore

extension Store {
    /// The user's live stat for `day`, or nil.
    public func dailyStat(userID: Int64, day: Day) throws -> DailyStat? {
        try guarded { try db.queryOne(SQL.DailyStats.liveByDay, [.int(userID), .day(day)]).map(DailyStat.init(row:)) }
    }

    /// The body of `GET /daily-stats`: `{"items": [...]}` with the live stats of the bearer
    /// `token`'s user from `from` to `to`, by date, written straight from the rows. 401 when the
    /// token is unknown, revoked or expired.
    public func dailyStatsBody(token: String, from: Day, to: Day) throws -> [UInt8] {
        try itemsBodyOfTokenRead(SQL.DailyStats.liveInRangeForToken, token: token, [.day(from), .day(to)]) {
            row, items throws(DatabaseError) in try DailyStatRowJSON.write(row, to: &items)
        }
    }
}
