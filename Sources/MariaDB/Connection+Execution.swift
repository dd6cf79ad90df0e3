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
                if inTransaction { try checkTransactionStillOpen(sql: sql) }
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
    /// Connection errors drop the connection (and doom an active transaction). For statements
    /// that keep the transaction open (`keepsTransaction`: SAVEPOINT, RELEASE / ROLLBACK TO
    /// SAVEPOINT), a transaction the server ended
    /// on its own dooms it like a deadlock (see ``checkTransactionStillOpen(sql:)``); so does
    /// 1305 "SAVEPOINT does not exist", which is how such a loss shows at a savepoint statement.
    func runControlStatement(_ sql: String, keepsTransaction: Bool = false) throws(DatabaseError) {
        guard let handle else {
            throw .client(UInt32(CR_SERVER_GONE_ERROR), "Not connected", sql: sql)
        }
        let started = Self.now()
        do {
            try Self.runText(sql, on: handle)
            touch()
        } catch {
            if error.isConnectionError { connectionLost(error, startedAt: started) }
            if keepsTransaction, error.code == DatabaseError.savepointDoesNotExist, case .active = transaction {
                throw transactionLostByServer(sql: sql, reason: error.message)
            }
            throw error
        }
        if keepsTransaction, case .active = transaction { try checkTransactionStillOpen(sql: sql) }
    }

    /// Inside ``inTransaction(maxAttempts:_:)``: throws (and dooms the transaction) when the
    /// server's status flags of the last exchange say that no transaction is open any more.
    ///
    /// A Galera node rolls a local transaction back when a replicated write conflicts with it
    /// (a "brute force abort"). When that happens while the client is between statements, the
    /// next statement should fail with 1213, but MariaDB 10.11 lets a prepared statement
    /// (COM_STMT_EXECUTE) through without that error (seen under node failures: a RELEASE
    /// SAVEPOINT then failed with 1305, and statements of the rolled-back transaction had run
    /// as autocommit statements, outside the user's lock). Checking SERVER_STATUS_IN_TRANS
    /// after every statement costs nothing (the flags come with every OK/EOF packet) and turns
    /// that into the deadlock it is: the whole transaction runs again.
    func checkTransactionStillOpen(sql: String) throws(DatabaseError) {
        guard let handle, handle.pointee.server_status & UInt32(SERVER_STATUS_IN_TRANS) == 0 else { return }
        throw transactionLostByServer(sql: sql, reason: "no transaction open after the statement")
    }

    /// Dooms the active transaction with a deadlock error (1213) that says why, and returns it.
    private func transactionLostByServer(sql: String, reason: String) -> DatabaseError {
        let error = DatabaseError(
            code: DatabaseError.deadlock, sqlState: "40001",
            message: "The server ended the transaction without reporting it (\(reason)); it is run again",
            sql: sql, isConnectFailure: false)
        TransactionRetryStatistics.recordSilentRollback()
        transaction = .doomed(error)
        return error
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
