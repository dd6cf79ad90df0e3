import MariaDB
import TodoSyncCore

/// Per-account budgets (Sql/012, Sql/017): write operations per clock hour and live records
/// (tags + todos), each `StoreConfiguration`'s default unless the account has its own
/// (`users.quota_*`). Both are charged by `Store.write` inside the write transaction, under the
/// user's row lock, so they add no round trip of their own and no commit.
extension Store {
    /// Charges `operations` to the account's current clock hour. Returns nil when charged, or
    /// (charging nothing) the refusal when that would pass `quota`: `throttled` with the seconds
    /// left in the hour. `Store.write` raises it at the write's first change, not at once, so
    /// that a write that changes nothing (a replay) is still answered at the quota.
    func chargeOperations(userID: Int64, _ operations: Int, quota: Int64, at now: Timestamp) throws -> DomainError? {
        try chargeHour(SQL.Quotas.chargeOperations, userID: userID, Int64(operations), quota: quota, at: now,
                       refusal: "This account has reached its quota of \(quota) write operations per hour.")
    }

    /// Charges `bytes` stored by a write to the account's clock hour; `throttled` (with the rest
    /// of the hour) when that would pass `quota`. Inside the write's transaction, so a refused
    /// write rolls back whole and costs nothing.
    func chargeStoredBytes(userID: Int64, _ bytes: Int64, quota: Int64, at now: Timestamp) throws {
        if let refusal = try chargeHour(SQL.Quotas.chargeStoredBytes, userID: userID, bytes, quota: quota, at: now,
                                        refusal: "This account has reached its quota of \(quota) stored bytes per hour.") {
            throw refusal
        }
    }

    /// The one mechanism of the hourly budgets: charges `amount` with `statement` (one of
    /// `SQL.Quotas.charge…`) to the account's current clock hour; nil when charged, else (charging
    /// nothing) `throttled` with `refusal` and the seconds left in the hour.
    private func chargeHour(_ statement: String, userID: Int64, _ amount: Int64, quota: Int64, at now: Timestamp,
                            refusal: String) throws -> DomainError? {
        guard amount > 0 else { return nil }
        let hourMilliseconds: Int64 = 3_600_000
        let hourStart = now.millisecondsSinceEpoch / hourMilliseconds * hourMilliseconds
        let charged = amount <= quota ? try db.execute(statement, [
            .int(userID), .timestamp(Timestamp(millisecondsSinceEpoch: hourStart)), .int(amount), .int(amount),
            .int(quota), .int(amount),
        ]).affectedRows : 0
        guard charged == 0 else { return nil }
        return DomainError.throttled(
            message: refusal, retryAfterSeconds: (hourStart + hourMilliseconds - now.millisecondsSinceEpoch + 999) / 1000)
    }

    /// `throttled` when adding `delta` live records to the account's `live` ones would pass
    /// `quota` (an hour: only deletes free records). Runs after the transaction's writes. Before
    /// refusing, `live` (the counter in `users.live_records`, as the transaction began) is
    /// checked against an exact count, which already includes this transaction's rows, and
    /// corrected, so a counter that drifted never refuses a write that fits.
    func checkRecordQuota(userID: Int64, live: Int64, adding delta: Int64, quota: Int64) throws {
        guard delta > 0, live + delta > quota else { return }
        let exact = try db.queryOne(SQL.Quotas.liveRecords, [.int(userID), .int(userID)])?.int64(OnlyColumn.value) ?? 0
        if exact > quota {
            throw DomainError.throttled(
                message: "This account has reached its quota of \(quota) records; delete some first.",
                retryAfterSeconds: 3600)
        }
        // `finish()` adds `delta` to the stored counter.
        if exact - delta != live { try db.execute(SQL.Quotas.setLiveRecords, [.int(exact - delta), .int(userID)]) }
    }
}

extension SQL {
    /// Per-account quotas (Sql/012, Sql/017): live records, and write operations per clock hour.
    /// Charged inside the write transaction, under the user's row lock (`Store.write`).
    enum Quotas {
        /// The exact live-record count, to reconcile `users.live_records` when it says the
        /// record quota would be passed (rows written by older responders or by hand).
        static let liveRecords = """
            SELECT (SELECT COUNT(*) FROM todos WHERE user_id = ? AND deleted_at IS NULL)
                 + (SELECT COUNT(*) FROM tags WHERE user_id = ? AND deleted_at IS NULL)
            """
        static let setLiveRecords = "UPDATE users SET live_records = ? WHERE id = ?"
        /// Charges an amount to one of `account_usage`'s per-hour counters unless that would pass
        /// its quota: the affected-row count is 1 (new hour row), 2 (charged) or 0 (quota reached,
        /// unchanged). Parameters: user, hour, amount, amount, quota, amount.
        private static func chargeHour(_ column: String) -> String {
            """
            INSERT INTO account_usage (user_id, hour_start, \(column)) VALUES (?, ?, ?)
                ON DUPLICATE KEY UPDATE \(column) = IF(\(column) + ? <= ?, \(column) + ?, \(column))
            """
        }
        /// Write operations (Sql/012).
        static let chargeOperations = chargeHour("operations")
        /// Bytes of push results and their records (Sql/020).
        static let chargeStoredBytes = chargeHour("stored_bytes")
        static let deletePastHours = "DELETE FROM account_usage WHERE hour_start < ?"
    }
}
