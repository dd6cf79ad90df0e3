import CMariaDB

/// Running statements: the prepared-statement cache and the retry rules.
extension Connection {
    /// Runs `work` with the prepared statement for `sql`, connecting and retrying as documented
    /// on the type. `isQuery`: the caller only reads rows (retry allowed for read-only SQL).
    /// `mayRepeat` is asked before `work` runs a second time after a lost connection (false: the
    /// first attempt already had effects outside the database, such as rows handed to a caller).
    func withStatement<R>(
        _ sql: String, isQuery: Bool, mayRepeat: () -> Bool = { true },
        _ work: (Statement) throws(DatabaseError) -> R
    ) throws(DatabaseError) -> R {
        assertConfined()
        precondition(!isStreamingRows, "a forEachRow callback ran a statement on its own connection")
        if case .doomed(let error) = transaction { throw error }
        let inTransaction: Bool
        if case .active = transaction { inTransaction = true } else { inTransaction = false }
        var attempt = 0
        while true {
            attempt += 1
            let mayRetry = !inTransaction && attempt == 1
            let statement: Statement
            var started = Self.now()
            do {
                try ensureConnected()
                started = Self.now()
                statement = try preparedStatement(for: sql)
            } catch {
                if error.isConnectFailure { throw error }
                if error.isConnectionError {
                    connectionLost(error, startedAt: started)
                    if mayRetry && !lastLossWasSlow { continue }
                }
                throw error
            }
            started = Self.now()
            do {
                let result = try work(statement)
                touch()
                DatabaseDiagnostics.statementFinished(sql, nanoseconds: lastActivity &- started)
                return result
            } catch {
                if error.isConnectionError {
                    connectionLost(error, startedAt: started)
                    let notApplied = error.code == DatabaseError.serverGoneAway
                        || error.code == DatabaseError.unknownStatementHandler
                    if mayRetry && !lastLossWasSlow && (notApplied || (isQuery && statement.isReadOnly)) && mayRepeat() {
                        continue
                    }
                } else if DatabaseError.sessionBreakingCodes.contains(error.code) {
                    // The protocol state is unknown: start over on a new session (no retry).
                    connectionLost(error)
                } else if error.code == DatabaseError.deadlock, inTransaction {
                    // InnoDB rolled the whole transaction back: nothing more may run in it.
                    transaction = .doomed(error)
                } else if error.code == DatabaseError.deadlock {
                    // An autocommit statement that deadlocked, or lost Galera certification
                    // (a hot row written on two nodes), was rolled back entirely: run it again.
                    touch()
                    let retry = attempt < configuration.transactionAttempts && mayRepeat()
                    TransactionRetryStatistics.record(error, atCommit: false, retried: retry)
                    if retry {
                        Self.backOff(attempt: attempt)
                        continue
                    }
                } else {
                    touch()
                }
                throw error
            }
        }
    }

    /// Runs a fixed control statement (BEGIN, COMMIT, ROLLBACK, SAVEPOINT, SET) as plain text.
    /// Connection errors drop the connection (and doom an active transaction).
    func runControlStatement(_ sql: String) throws(DatabaseError) {
        guard let handle else {
            throw .client(UInt32(CR_SERVER_GONE_ERROR), "Not connected", sql: sql)
        }
        let started = Self.now()
        do {
            try Self.runText(sql, on: handle)
            touch()
        } catch {
            if error.isConnectionError { connectionLost(error, startedAt: started) }
            throw error
        }
    }

    func preparedStatement(for sql: String) throws(DatabaseError) -> Statement {
        useTick &+= 1
        if let statement = statements[sql] {
            statement.lastUsed = useTick
            return statement
        }
        guard let handle else {
            throw .client(UInt32(CR_SERVER_GONE_ERROR), "Not connected", sql: sql)
        }
        if statements.count >= max(configuration.statementCacheCapacity, 1) {
            evictLeastRecentlyUsedStatement()
        }
        let statement = try Statement(sql: sql, connection: handle)
        statement.lastUsed = useTick
        statements[sql] = statement
        return statement
    }

    private func evictLeastRecentlyUsedStatement() {
        guard let oldest = statements.min(by: { $0.value.lastUsed < $1.value.lastUsed }) else { return }
        statements.removeValue(forKey: oldest.key)
    }
}
