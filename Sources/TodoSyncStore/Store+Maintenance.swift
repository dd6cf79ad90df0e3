import MariaDB
import TodoSyncCore

extension Store {
    /// All user ids, for maintenance commands.
    public func allUserIDs() throws -> [Int64] {
        try guarded { try db.query(SQL.Maintenance.allUserIDs).compactMap { $0.int64(OnlyColumn.value) } }
    }

    /// Rebuilds every daily stat of a user, and the aggregate it is rendered from, from the
    /// user's todos (versions bump only where content changes), `SQL.Maintenance.rebuildBatch`
    /// dates per transaction so that no transaction holds the user's lock for long. For data
    /// loaded in bulk, after a change of the formulas, and as the oracle of the incremental
    /// stats (`DailyStatsOracleTests`). Returns the number of dates examined.
    @discardableResult
    public func recomputeDailyStats(userID: Int64) throws -> Int {
        let days = try guarded {
            try db.query(SQL.Maintenance.daysOfUser, [.int(userID), .int(userID)]).compactMap { $0.string(OnlyColumn.value).flatMap(Day.init) }
        }
        for start in stride(from: 0, to: days.count, by: SQL.Maintenance.rebuildBatch) {
            try write(userID: userID, operations: 0) { transaction in
                for day in days[start..<min(start + SQL.Maintenance.rebuildBatch, days.count)] { transaction.rebuild(day) }
            }
        }
        return days.count
    }
}

extension Store {
    /// The database's current epoch (the history every pull cursor names).
    public func epoch() throws -> UInt64 {
        try guarded { UInt64(bitPattern: try db.queryOne(SQL.Epoch.current)?.int64(OnlyColumn.value) ?? 0) }
    }

    /// Starts a new history: every cursor issued so far gets 410 `cursor_expired` from now on.
    /// Run it right after restoring the database from a backup, before serving traffic again.
    /// Returns the new epoch (random, non-zero, below 2^60 so it fits the signed column reads).
    @discardableResult
    public func renewEpoch() throws -> UInt64 {
        let previous = try epoch()
        var next: UInt64
        repeat { next = UInt64.random(in: 1..<(1 << 60)) } while next == previous
        try guarded { try db.execute(SQL.Epoch.renew, [.int(Int64(next)), .timestamp(Timestamp.now())]) }
        return next
    }
}

extension SQL {
    enum Epoch {
        static let current = "SELECT epoch FROM sync_epoch WHERE id = 1"
        static let renew = "UPDATE sync_epoch SET epoch = ?, renewed_at = ? WHERE id = 1"
    }

    /// Maintenance: full recomputation of derived data.
    enum Maintenance {
        /// Live accounts only: a deleted one waits for its erase, and cannot be written.
        static let allUserIDs = "SELECT id FROM users WHERE deleted_at IS NULL ORDER BY id"
        /// `recompute-stats` rebuilds this many dates per transaction.
        static let rebuildBatch = 512
        /// Every date that has a live todo or a stat row (live or tombstone) for the user.
        static let daysOfUser = """
            SELECT DISTINCT deadline FROM todos FORCE INDEX (todos_user_day)
             WHERE user_id = ? AND deleted_at IS NULL
            UNION
            SELECT day FROM daily_stats WHERE user_id = ?
            """
    }
}
