import MariaDB
import TodoSyncCore
import TodoSyncSnapshot

/// What one purge removed.
public struct PurgeReport: Sendable, CustomStringConvertible {
    public var tombstones = 0
    public var operations = 0
    public var tokens = 0
    public var idempotencyKeys = 0
    /// Deleted accounts erased, and their rows (`eraseDeletedAccounts`).
    public var accountsErased = 0
    public var accountRowsErased = 0
    /// Snapshot files removed by the cache's sweep (`SnapshotCache.sweep`).
    public var snapshotFiles = 0
    /// Expired friend requests deleted.
    public var friendRequests = 0

    public var description: String {
        "tombstones=\(tombstones) operations=\(operations) expiredTokens=\(tokens) idempotencyKeys=\(idempotencyKeys) "
            + "accountsErased=\(accountsErased) accountRowsErased=\(accountRowsErased) snapshotFiles=\(snapshotFiles) "
            + "expiredFriendRequests=\(friendRequests)"
    }
}

extension Store {
    /// Removes tombstones and stored push results older than `retentionSeconds`, expired tokens,
    /// and `Idempotency-Key` records older than `StoreConfiguration.idempotencyRetentionSeconds`.
    /// Accounts deleted by their users are erased, whatever their age (`eraseDeletedAccounts`).
    /// Each user's `purged_through` is raised first, in the same transaction, so a pull
    /// cursor that could have missed a purged deletion gets 410 `cursor_expired`.
    public func purge(retentionSeconds: Int64) throws -> PurgeReport {
        let now = Timestamp.now()
        let horizon = DatabaseValue.timestamp(now.adding(seconds: -retentionSeconds))
        var report = PurgeReport()
        try guarded {
            try db.inTransaction {
                report = PurgeReport()
                for table in SQL.Purge.tables {
                    try db.execute(SQL.Purge.recordPurgedThrough(table), [horizon])
                    report.tombstones += Int(try db.execute(SQL.Purge.deleteTombstones(table), [horizon]).affectedRows)
                }
                // The feed's copies of the same tombstones (they carry the same deletion time).
                try db.execute(SQL.Feed.purgeTombstones, [horizon])
            }
            // Keys whose answer is rebuilt from push results go first, with those results'
            // horizon when it is the nearer (Sql/028): a key never outlives what rebuilds it.
            let replayHorizon = now.adding(seconds: -min(retentionSeconds, configuration.idempotencyRetentionSeconds))
            report.idempotencyKeys = Int(try db.execute(SQL.Idempotency.purgeReplays, [.timestamp(replayHorizon)]).affectedRows)
            report.operations = Int(try db.execute(SQL.Purge.deleteOperations, [horizon]).affectedRows)
            try db.execute(SQL.Purge.deleteResultRecords, [horizon])
            report.tokens = Int(try db.execute(SQL.Purge.deleteExpiredTokens, [.timestamp(now)]).affectedRows)
            // Failed-login counters whose window has passed (they no longer throttle anything).
            let loginWindow = DatabaseValue.timestamp(now.adding(seconds: -configuration.loginLockoutSeconds))
            try db.execute(SQL.Logins.deleteExpired, [loginWindow])
            // Idempotency-Key records past their own retention (at least 24 h, not the tombstones').
            report.idempotencyKeys += Int(try db.execute(SQL.Idempotency.purge, [
                .timestamp(now.adding(seconds: -configuration.idempotencyRetentionSeconds)),
            ]).affectedRows)
            // Operation counts of past hours (only the current hour is ever charged or checked).
            try db.execute(SQL.Quotas.deletePastHours, [.timestamp(now.adding(seconds: -3600))])
            // Expired friend requests and request counts past their window (Sql/032).
            report.friendRequests = try purgeFriendRows(now: now)
        }
        let erased = try eraseDeletedAccounts()
        report.accountsErased = erased.accounts
        report.accountRowsErased = erased.rows
        // Snapshot files past the age limit (an erased account's went with it, above).
        report.snapshotFiles = configuration.snapshotCache?.sweep() ?? 0
        return report
    }
}

extension SQL {
    /// Retention: tombstones, push results and expired tokens older than the horizon.
    enum Purge {
        static func recordPurgedThrough(_ table: String) -> String {
            """
            UPDATE users u JOIN (SELECT user_id, MAX(version) AS purged FROM \(table)
                                  WHERE deleted_at IS NOT NULL AND deleted_at < ? GROUP BY user_id) p
                ON p.user_id = u.id
               SET u.purged_through = GREATEST(u.purged_through, p.purged)
            """
        }
        static func deleteTombstones(_ table: String) -> String {
            "DELETE FROM \(table) WHERE deleted_at IS NOT NULL AND deleted_at < ?"
        }
        static let tables = ["tags", "todos", "daily_stats"]
        static let deleteOperations = "DELETE FROM sync_operations WHERE created_at < ?"
        /// Records no stored result has named since the horizon (results are purged first).
        static let deleteResultRecords = "DELETE FROM sync_result_records WHERE last_used < ?"
        static let deleteExpiredTokens = "DELETE FROM auth_tokens WHERE expires_at < ?"
    }
}
