import MariaDB
import TodoSyncCore

extension Store {
    /// Charges a write request to the account's budgets before it runs: `operations` write
    /// operations this clock hour (`StoreConfiguration.quotaOperationsPerHour`) and, when
    /// `creates` > 0, room for that many more live records (`quotaRecords`). `throttled`
    /// with `Retry-After` when either is used up (the hour's rest, or an hour for records, which
    /// only deletes free). Per-account overrides: `users.quota_*`.
    public func chargeQuota(userID: Int64, operations: Int, creates: Int) throws {
        guard operations > 0 else { return }
        let now = Timestamp.now()
        let hourMilliseconds: Int64 = 3_600_000
        let hourStart = Timestamp(millisecondsSinceEpoch: now.millisecondsSinceEpoch / hourMilliseconds * hourMilliseconds)
        try guarded {
            guard let limits = try db.queryOne(SQL.Quotas.limits, [
                .int(Int64(configuration.quotaRecords)), .int(Int64(configuration.quotaOperationsPerHour)), .int(userID),
            ]) else { throw DomainError.unauthenticated }
            let recordQuota = limits.int64(0)!, operationQuota = limits.int64(1)!
            if creates > 0 {
                let live = try db.queryOne(SQL.Quotas.liveRecords, [.int(userID), .int(userID)])?.int64(0) ?? 0
                if live + Int64(creates) > recordQuota {
                    throw DomainError.throttled(
                        message: "This account has reached its quota of \(recordQuota) records; delete some first.",
                        retryAfterSeconds: 3600)
                }
            }
            let hour = DatabaseValue.timestamp(hourStart)
            try db.execute(SQL.Quotas.ensureUsageRow, [.int(userID), hour])
            let charged = try db.execute(SQL.Quotas.chargeOperations, [
                .int(Int64(operations)), .int(userID), hour, .int(Int64(operations)), .int(operationQuota),
            ])
            if charged.affectedRows == 0 {
                let left = (hourStart.millisecondsSinceEpoch + hourMilliseconds - now.millisecondsSinceEpoch + 999) / 1000
                throw DomainError.throttled(
                    message: "This account has reached its quota of \(operationQuota) write operations per hour.",
                    retryAfterSeconds: left)
            }
        }
    }
}
