import MariaDB
import TodoSyncCore

extension Store {
    /// The user's live stat for `day`, or nil.
    public func dailyStat(userID: Int64, day: Day) throws -> DailyStat? {
        try guarded { try db.queryOne(SQL.DailyStats.liveByDay, [.int(userID), .day(day)]).map(DailyStat.init(row:)) }
    }

    /// The live stats of the bearer `token`'s user from `from` to `to`, by date. 401 when the
    /// token is unknown, revoked or expired.
    public func dailyStats(token: String, from: Day, to: Day) throws -> [DailyStat] {
        try guarded {
            let stats = try db.query(SQL.DailyStats.liveInRangeForToken, tokenParameters(token) + [.day(from), .day(to)])
                .map(DailyStat.init(row:))
            if stats.isEmpty { try requireValidToken(token) }
            return stats
        }
    }
}
