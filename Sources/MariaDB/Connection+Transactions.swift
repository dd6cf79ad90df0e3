#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

extension Connection {
    /// Runs `body` in a transaction: START TRANSACTION; COMMIT when it returns, ROLLBACK when it
    /// throws.
    ///
    /// The whole body is run again (after a ROLLBACK and a 2–20 ms × attempt jittered pause),
    /// up to `maxAttempts` runs in all (default: the configuration's `transactionAttempts`), when it fails with a deadlock (1213) or lock wait
    /// timeout (1205), or when the connection is lost before COMMIT is sent (a new connection
    /// is opened first; if that fails, its error is thrown). A loss that took a second or more
    /// to notice (a read timeout: the server hangs) is not retried, so that a hung server costs
    /// one read timeout, not that plus a connect timeout. A connection lost *during* COMMIT
    /// is rethrown: the outcome is unknown. Let ``DatabaseError``s propagate out of the body for
    /// this to work. After a deadlock or a lost connection, further statements in the same run
    /// of the body throw that error again, and the run is never committed, even if the body
    /// swallowed the error.
    ///
    /// On a Galera node, a duplicate-key error (1062) that escapes the body is retried too: there
    /// it is how a conflict with a write committed on another node can surface before
    /// certification notices it (that write's rows were applied here while this transaction ran,
    /// e.g. the same per-user version taken on two nodes). A genuine duplicate fails the same way
    /// on every run and is thrown after the last one.
    ///
    /// With `readOnly`, the transaction is `START TRANSACTION READ ONLY` (a write in the body
    /// fails with 1792), and a connection lost during its COMMIT is not an unknown outcome: the
    /// body's reads all came from one consistent snapshot and there was nothing to apply, so the
    /// value is returned (the next statement opens a new connection).
    ///
    /// The body must have no side effects outside the database, and must not call
    /// `inTransaction` again (precondition); use ``inSavepoint(_:)`` for nesting.
    @discardableResult
    public func inTransaction<T>(maxAttempts: Int? = nil, readOnly: Bool = false,
                                 _ body: () throws -> T) throws -> T {
        let maxAttempts = maxAttempts ?? configuration.transactionAttempts
        assertConfined()
        guard case .inactive = transaction else {
            preconditionFailure("inTransaction cannot be nested; use inSavepoint inside a transaction")
        }
        var attempt = 0
        while true {
            attempt += 1
            try beginTransaction(readOnly: readOnly)
            lastLossWasSlow = false
            let value: T
            do {
                value = try body()
                if case .doomed(let error) = transaction { throw error }
            } catch {
                let onGalera = isGaleraSession
                abandonTransaction()
                if let error = error as? DatabaseError,
                    error.isRetryableTransactionError
                        || (error.isConnectionError && !error.isConnectFailure && !lastLossWasSlow)
                        || (onGalera && error.isDuplicateKey)
                {
                    let retry = attempt < maxAttempts
                    TransactionRetryStatistics.record(error, atCommit: false, retried: retry)
                    if retry {
                        Self.backOff(attempt: attempt)
                        continue
                    }
                }
                throw error
            }
            do {
                try runControlStatement("COMMIT")
                transaction = .inactive
                savepointDepth = 0
                return value
            } catch {
                // Connection errors: the COMMIT may or may not have been applied; never retry.
                // A deadlock at COMMIT is how Galera reports a failed certification: nothing
                // was applied anywhere, so the whole body runs again.
                abandonTransaction()
                if readOnly, error.isConnectionError { return value }
                if error.isConnectionError, !error.isOutsidePrimaryComponent {
                    // (A Galera node outside the primary component replicated nothing: that
                    // COMMIT certainly failed, like a 1047.)
                    var unknown = error
                    unknown.isCommitOutcomeUnknown = true
                    throw unknown
                }
                if !error.isConnectionError, error.isRetryableTransactionError {
                    let retry = attempt < maxAttempts
                    TransactionRetryStatistics.record(error, atCommit: true, retried: retry)
                    if retry {
                        Self.backOff(attempt: attempt)
                        continue
                    }
                }
                throw error
            }
        }
    }

    /// Runs `body` inside a savepoint of the current transaction: SAVEPOINT, then RELEASE
    /// SAVEPOINT when it returns, or ROLLBACK TO SAVEPOINT when it throws, undoing only the
    /// body's changes: the transaction continues and the error is rethrown. Nested savepoints
    /// get distinct names.
    ///
    /// Outside a transaction it behaves like ``inTransaction(maxAttempts:_:)``.
    @discardableResult
    public func inSavepoint<T>(_ body: () throws -> T) throws -> T {
        assertConfined()
        switch transaction {
        case .inactive:
            return try inTransaction(body)
        case .doomed(let error):
            throw error
        case .active:
            break
        }
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        let name = "s\(savepointDepth)"
        try runControlStatement("SAVEPOINT \(name)", keepsTransaction: true)
        let value: T
        do {
            value = try body()
        } catch {
            if case .active = transaction {
                // A failure here dooms the transaction if the connection dropped; the body's
                // error is the one to report either way.
                try? runControlStatement("ROLLBACK TO SAVEPOINT \(name)", keepsTransaction: true)
            }
            throw error
        }
        if case .doomed(let error) = transaction { throw error }
        try runControlStatement("RELEASE SAVEPOINT \(name)", keepsTransaction: true)
        return value
    }

    /// START TRANSACTION, on a new connection if needed; retried once if the connection
    /// turns out to be dead (nothing can have been applied).
    private func beginTransaction(readOnly: Bool) throws(DatabaseError) {
        var attempt = 0
        while true {
            attempt += 1
            try ensureConnected()
            do {
                try runControlStatement(readOnly ? "START TRANSACTION READ ONLY" : "START TRANSACTION")
                transaction = .active
                savepointDepth = 0
                return
            } catch {
                if error.isConnectionError && attempt == 1 && !lastLossWasSlow { continue }
                throw error
            }
        }
    }

    /// Ends a failed run: ROLLBACK when the connection is still there. If ROLLBACK fails the
    /// session is in an unknown state and is dropped.
    private func abandonTransaction() {
        transaction = .inactive
        savepointDepth = 0
        guard handle != nil else { return }
        do {
            try runControlStatement("ROLLBACK")
        } catch {
            closeHandle()
        }
    }

    /// Sleeps 2–20 ms × attempt.
    static func backOff(attempt: Int) {
        let milliseconds = Int.random(in: 2...20) * attempt
        usleep(UInt32(milliseconds * 1000))
    }
}
