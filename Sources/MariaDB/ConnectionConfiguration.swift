/// Where and how a ``Connection`` reaches the server.
public struct ConnectionConfiguration: Sendable {
    /// TCP host, used when ``unixSocket`` is nil.
    public var host: String
    /// TCP port, used when ``unixSocket`` is nil.
    public var port: Int
    /// Further servers (`host`, `port`) tried in order when ``host``/``port`` cannot be reached
    /// or is not ready (a Galera node that is not synced with the cluster): each new session
    /// tries ``host`` first, then these. Ignored with ``unixSocket``.
    public var failoverEndpoints: [(host: String, port: Int)] = []
    /// Runs of a transaction body, in all, before a deadlock, lock wait timeout or certification
    /// failure is given up (``Connection/inTransaction(maxAttempts:_:)``). On a Galera cluster,
    /// writes to one hot row from several nodes conflict far more often than on one server
    /// (each conflict is found only at COMMIT), so give it more there.
    public var transactionAttempts: Int = 5
    /// Path of the server's Unix socket; when set it is used instead of ``host``/``port``.
    public var unixSocket: String?
    /// Account name.
    public var user: String
    /// Account password.
    public var password: String
    /// Default schema of the session.
    public var database: String
    /// Upper bound for establishing a connection (TCP connect + handshake), in seconds.
    public var connectTimeoutSeconds: UInt32
    /// Upper bound for one read from the server, in seconds.
    public var readTimeoutSeconds: UInt32
    /// Upper bound for one write to the server, in seconds.
    public var writeTimeoutSeconds: UInt32
    /// Session `innodb_lock_wait_timeout`, in seconds. Keep it below ``readTimeoutSeconds`` so
    /// that a lock wait ends in a retryable error 1205 instead of a client read timeout.
    /// `0` keeps the server default.
    public var lockWaitTimeoutSeconds: UInt32
    /// Maximum number of prepared statements kept per connection; the least recently used one
    /// is closed beyond that (protects the server's `max_prepared_stmt_count`).
    public var statementCacheCapacity: Int
    /// A connection idle for longer than this is pinged before its next statement, so that a
    /// connection the server dropped meanwhile is replaced before a write is sent on it.
    /// `0` disables the check.
    public var validateAfterIdleSeconds: UInt32
    /// When true, ``ExecutionResult/affectedRows`` counts rows *matched* by an UPDATE
    /// (`CLIENT_FOUND_ROWS`); when false (the server default) only rows actually changed.
    public var foundRows: Bool

    /// Creates a configuration. Only the credentials and the schema have no default.
    public init(
        host: String = "127.0.0.1",
        port: Int = 3306,
        unixSocket: String? = nil,
        user: String,
        password: String,
        database: String,
        connectTimeoutSeconds: UInt32 = 3,
        readTimeoutSeconds: UInt32 = 10,
        writeTimeoutSeconds: UInt32 = 10,
        lockWaitTimeoutSeconds: UInt32 = 5,
        statementCacheCapacity: Int = 256,
        validateAfterIdleSeconds: UInt32 = 10,
        foundRows: Bool = false
    ) {
        self.host = host
        self.port = port
        self.unixSocket = unixSocket
        self.user = user
        self.password = password
        self.database = database
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.readTimeoutSeconds = readTimeoutSeconds
        self.writeTimeoutSeconds = writeTimeoutSeconds
        self.lockWaitTimeoutSeconds = lockWaitTimeoutSeconds
        self.statementCacheCapacity = statementCacheCapacity
        self.validateAfterIdleSeconds = validateAfterIdleSeconds
        self.foundRows = foundRows
    }
}

extension ConnectionConfiguration: CustomStringConvertible {
    /// A description safe to log: the password is never included.
    public var description: String {
        let target = unixSocket.map { "socket \($0)" }
            ?? ([(host, port)] + failoverEndpoints).map { "\($0.0):\($0.1)" }.joined(separator: ",")
        return "MariaDB \(user)@\(target)/\(database)"
    }
}
