import MariaDB
import TodoSyncCore

extension Store {
    /// All user ids, for maintenance commands.
    public func allUserIDs() throws -> [Int64] {
        try guarded { try db.query(SQL.Maintenance.allUserIDs).compactMap { $0.int64(0) } }
    }

    /// Recomputes every daily stat of a user through the normal write path (versions bump only
    /// where content changes). For data loaded in bulk, or after a change of the formulas.
    /// Returns the number of dates examined.
    @discardableResult
    public func recomputeDailyStats(userID: Int64) throws -> Int {
        try write(userID: userID) { transaction in
            let days = try db.query(SQL.Maintenance.daysOfUser, [.int(userID), .int(userID)]).compactMap {
                $0.string(0).flatMap(Day.init)
            }
            for day in days { transaction.touch(day) }
            return days.count
        }
    }
}
