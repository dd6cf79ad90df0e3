import CMariaDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// One session with the server, for one thread.
///
/// - Confinement: a connection may only be used on the thread that created it; any other use
///   stops the process with a precondition failure. Create one per worker thread.
/// - Lazy: nothing happens until ``connect()`` or the first statement.
/// - Session: utf8mb4, `time_zone = '+00:00'`, strict `sql_mode`, connect/read/write timeouts
///   from the ``ConnectionConfiguration``; Connector/C's own auto-reconnect is off.
/// - Statements: every `execute(_:_:)` / `query(_:_:)`
///   runs as a server-side prepared statement, cached per connection by SQL text.
/// - Deadlocks (1213) of a statement outside a transaction (on Galera also a lost certification)
///   roll only that statement back: it is run again, up to `transactionAttempts` runs.
/// - Lost connections (server restart, KILL, network): the connection and its statements are
///   dropped and re-created on the next use. Outside a transaction a statement is retried once on
///   a new connection when that cannot apply it twice: the loss showed while preparing, the
///   request never reached the server (2006, 1243), or the statement is a read (`query(_:_:)`
///   of a SELECT/SHOW/…). A session idle for `validateAfterIdleSeconds` is pinged before use. Inside ``inTransaction(maxAttempts:_:)``
///   the transaction as a whole is retried instead. No retry happens when the loss took a
///   second or more to notice (a read timeout: the server hangs), so a hung server costs one
///   read timeout and a dead one at most one connect timeout. If reconnecting fails, the
///   error's ``DatabaseError/isConnectionError`` is true.
public final class Connection {
    /// How this connection reaches the server.
    public let configuration: ConnectionConfiguration

    let ownerThread: pthread_t
    var handle: MySQLHandle?
    var statements: [String: Statement] = [:]
    var transaction: TransactionState = .inactive
    var savepointDepth = 0
    /// Whether the last connection loss seen by a statement took at least
    /// ``quickFailureNanoseconds`` to detect (then neither the statement nor the transaction is
    /// retried).
    var lastLossWasSlow = false
    static let quickFailureNanoseconds: UInt64 = 1_000_000_000
    /// Statement-cache clock, for least-recently-used eviction.
    var useTick: UInt64 = 0
    /// True while `forEachRow` hands rows to its callback: the connection is mid-result and must
    /// not run anything else.
    var isStreamingRows = false
    /// Monotonic time of the last successful exchange with the server.
    var lastActivity: UInt64 = 0
    /// Whether the open session is on a Galera node (checked at connect for TCP sessions).
    var isGaleraSession = false
    /// Whether this connection has opened a session before (the next one is a reconnect).
    var hasOpenedSession = false

    /// State of ``inTransaction(maxAttempts:_:)``.
    enum TransactionState {
        case inactive
        case active
        /// The transaction is lost (deadlock rolled it back, or the connection dropped): every
        /// further statement of the body fails with this error, and the body is not committed.
        case doomed(DatabaseError)
    }

    /// Creates a connection confined to the calling thread; it connects on first use.
    public init(configuration: ConnectionConfiguration) {
        MariaDBLibrary.initialize()
        self.configuration = configuration
        ownerThread = pthread_self()
    }

    deinit {
        closeHandle()
    }

    /// Connects now if not connected (otherwise the first statement does).
    /// - Throws: ``DatabaseError`` with ``DatabaseError/isConnectionError`` set.
    public func connect() throws {
        assertConfined()
        if handle == nil { try openConnection() }
    }

    /// Closes the session and its prepared statements. The next statement reconnects.
    /// Inside ``inTransaction(maxAttempts:_:)`` this abandons the transaction.
    public func close() {
        assertConfined()
        if case .active = transaction {
            transaction = .doomed(
                .client(UInt32(CR_SERVER_GONE_ERROR), "Connection closed during the transaction", sql: nil))
        }
        closeHandle()
    }

    /// True when the server answers. Connects or reconnects when needed (outside a transaction),
    /// so it is suitable for a health check; never throws.
    public func ping() -> Bool {
        assertConfined()
        if let handle {
            if mysql_ping(handle) == 0 {
                touch()
                return true
            }
            connectionLost(.lastError(of: handle, sql: nil))
        }
        guard case .inactive = transaction else { return false }
        do {
            try openConnection()
            return true
        } catch {
            return false
        }
    }

    /// The server's id of the current session (`CONNECTION_ID()`), nil while disconnected.
    public var connectionID: UInt64? {
        assertConfined()
        return handle.map { UInt64(mysql_thread_id($0)) }
    }

    /// True while a session is open (the server may still have dropped it meanwhile).
    public var isConnected: Bool {
        assertConfined()
        return handle != nil
    }

    /// True inside the body of ``inTransaction(maxAttempts:_:)``.
    public var isInTransaction: Bool {
        assertConfined()
        if case .inactive = transaction { return false }
        return true
    }

    /// Number of prepared statements currently cached.
    public var cachedStatementCount: Int {
        assertConfined()
        return statements.count
    }

    /// Stops the process when called on another thread than the creator's.
    @inline(__always)
    func assertConfined(_ function: StaticString = #function) {
        precondition(
            pthread_equal(ownerThread, pthread_self()) != 0,
            "MariaDB.Connection.\(function) called on a thread other than the one that created the connection")
    }
}
