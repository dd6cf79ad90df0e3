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
        try guarded {
            var rows = 0
            let body = try itemsBody(reservingCapacity: 16384) { (writer: inout JSONWriter) throws in
                rows = try db.forEachRow(
                    SQL.DailyStats.liveInRangeForToken, tokenParameters(token) + [.day(from), .day(to)]
                ) { row throws(DatabaseError) in
                    try DailyStatRowJSON.write(row, to: &writer)
                }
            }
            if rows == 0 { try requireValidToken(token) }
            return body
        }
    }
}
