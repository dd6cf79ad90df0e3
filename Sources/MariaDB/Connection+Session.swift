import CMariaDB

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Opening, validating and dropping the session.
extension Connection {
    /// Opens a session unless one is open. A session idle for longer than
    /// `validateAfterIdleSeconds` is pinged first (outside transactions) and replaced if dead.
    func ensureConnected() throws(DatabaseError) {
        if let handle {
            let idleLimit = UInt64(configuration.validateAfterIdleSeconds) * 1_000_000_000
            guard idleLimit > 0, case .inactive = transaction, Self.now() &- lastActivity > idleLimit else {
                return
            }
            if mysql_ping(handle) == 0 {
                touch()
                return
            }
            closeHandle()
        }
        try openConnection()
    }

    /// Drops the session after a connection error; an active transaction is doomed.
    /// `startedAt`: when the failed operation began. A loss noticed only after
    /// ``quickFailureNanoseconds`` (a read timeout: the server hangs rather than being gone)
    /// sets ``lastLossWasSlow``, which disables retries: reconnecting would add the connect
    /// timeout to the time already spent.
    func connectionLost(_ error: DatabaseError, startedAt: UInt64? = nil) {
        DatabaseDiagnostics.connectionLost(error)
        lastLossWasSlow = startedAt.map { Self.now() &- $0 >= Self.quickFailureNanoseconds } ?? false
        closeHandle()
        if case .active = transaction { transaction = .doomed(error) }
    }

    /// Closes the MYSQL handle, then frees the cached statements (mysql_close detached them, so
    /// freeing sends nothing to the server).
    func closeHandle() {
        if let handle {
            self.handle = nil
            mysql_close(handle)
        }
        statements.removeAll()
    }

    /// Connects with the configured options and sets the session up. Every failure is
    /// flagged as a connect failure (``DatabaseError/isConnectionError``).
    ///
    /// Over TCP, tries `host` first, then each of ``ConnectionConfiguration/failoverEndpoints`` in
    /// order, and skips a server that is a Galera node not synced with its cluster (joining,
    /// donating, or cut off from the primary component), unless no server is synced: then the
    /// first one that accepted the session is used. The last failure is thrown if none answers.
    /// Notes whether the session is on a Galera node (``isGaleraSession``).
    func openConnection() throws(DatabaseError) {
        closeHandle()
        isGaleraSession = false
        if configuration.unixSocket != nil {
            handle = try connect(host: configuration.host, port: configuration.port)
            sessionOpened(host: configuration.unixSocket ?? configuration.host)
            return
        }
        var lastError: DatabaseError?
        var fallback: (handle: MySQLHandle, galera: Bool)?
        for (host, port) in [(configuration.host, configuration.port)] + configuration.failoverEndpoints {
            do {
                let mysql = try connect(host: host, port: port)
                let state = Self.clusterState(of: mysql)
                if state.synced {
                    if let fallback { mysql_close(fallback.handle) }
                    handle = mysql
                    isGaleraSession = state.galera
                    sessionOpened(host: "\(host):\(port)")
                    return
                }
                if fallback == nil { fallback = (mysql, state.galera) } else { mysql_close(mysql) }
            } catch {
                lastError = error
            }
        }
        if let fallback {
            handle = fallback.handle
            isGaleraSession = fallback.galera
            sessionOpened(host: "\(configuration.host)")
            return
        }
        throw lastError ?? DatabaseError(
            code: UInt32(CR_CONN_HOST_ERROR), sqlState: "HY000", message: "no database server configured", sql: nil,
            isConnectFailure: true)
    }

    /// Marks the new session as in use and reports it (a reconnect when there was one before).
    private func sessionOpened(host: String) {
        touch()
        DatabaseDiagnostics.sessionOpened(reconnect: hasOpenedSession, host: host)
        hasOpenedSession = true
    }

    /// Whether the server is a Galera node (`wsrep_ready` exists), and whether it can serve:
    /// not a Galera node, or one whose `wsrep_ready` is ON and whose state is `Synced`.
    static func clusterState(of mysql: MySQLHandle) -> (synced: Bool, galera: Bool) {
        let sql = "SHOW STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_local_state_comment')"
        let length = UInt(sql.utf8.count)
        guard sql.withCString({ mysql_real_query(mysql, $0, length) }) == 0,
            let result = mysql_store_result(mysql)
        else { return (false, false) }
        defer { mysql_free_result(result) }
        var synced = true
        var galera = false
        while let row = mysql_fetch_row(result) {
            guard let name = row[0].map({ String(cString: $0) }), let value = row[1].map({ String(cString: $0) }) else {
                continue
            }
            if name == "wsrep_ready" {
                galera = true
                if value != "ON" { synced = false }
            }
            if name == "wsrep_local_state_comment" && value != "Synced" { synced = false }
        }
        return (synced, galera)
    }

    /// One `mysql_real_connect` plus the session setup; the handle on success.
    private func connect(host: String, port: Int) throws(DatabaseError) -> MySQLHandle {
        guard let mysql = mysql_init(nil) else {
            throw DatabaseError(
                code: UInt32(CR_OUT_OF_MEMORY), sqlState: "HY000", message: "mysql_init failed", sql: nil,
                isConnectFailure: true)
        }
        var connectTimeout = configuration.connectTimeoutSeconds
        var readTimeout = configuration.readTimeoutSeconds
        var writeTimeout = configuration.writeTimeoutSeconds
        var reconnect: my_bool = 0
        var localInfile: UInt32 = 0
        mysql_options(mysql, MYSQL_SET_CHARSET_NAME, "utf8mb4")
        mysql_options(mysql, MYSQL_OPT_CONNECT_TIMEOUT, &connectTimeout)
        mysql_options(mysql, MYSQL_OPT_READ_TIMEOUT, &readTimeout)
        mysql_options(mysql, MYSQL_OPT_WRITE_TIMEOUT, &writeTimeout)
        mysql_options(mysql, MYSQL_OPT_RECONNECT, &reconnect)
        mysql_options(mysql, MYSQL_OPT_LOCAL_INFILE, &localInfile)

        var flags: UInt = 0
        if configuration.foundRows { flags |= UInt(CLIENT_FOUND_ROWS) }
        let socket = configuration.unixSocket
        // With a socket, host must be nil ("localhost"), or Connector/C would use TCP.
        let connectHost: String? = socket == nil ? host : nil
        let connected = mysql_real_connect(
            mysql, connectHost, configuration.user, configuration.password, configuration.database,
            UInt32(clamping: port), socket, flags)
        if connected == nil {
            let error = DatabaseError.lastError(of: mysql, sql: nil, isConnectFailure: true)
            mysql_close(mysql)
            DatabaseDiagnostics.connectFailed(error, host: socket ?? "\(host):\(port)")
            throw error
        }
        do {
            try Self.runText(sessionSetupSQL, on: mysql)
        } catch {
            mysql_close(mysql)
            throw DatabaseError(
                code: error.code, sqlState: error.sqlState, message: error.message, sql: error.sql,
                isConnectFailure: true)
        }
        return mysql
    }

    /// The session's `group_concat_max_len`, set whatever the server's global value: a
    /// `GROUP_CONCAT` longer than this fails in strict mode (error 1260, a warning under
    /// `INSERT IGNORE`), so statements that concatenate rely on exactly this bound.
    public static let groupConcatMaxLength = 262_144

    /// One SET for the session: UTC, strict SQL mode, `GROUP_CONCAT` bound, lock wait timeout.
    var sessionSetupSQL: String {
        var sql =
            "SET time_zone = '+00:00', sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,"
            + "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', group_concat_max_len = \(Self.groupConcatMaxLength)"
        if configuration.lockWaitTimeoutSeconds > 0 {
            sql += ", innodb_lock_wait_timeout = \(configuration.lockWaitTimeoutSeconds)"
        }
        return sql
    }

    /// `mysql_real_query` for fixed statements without parameters; discards any result.
    static func runText(_ sql: String, on mysql: MySQLHandle) throws(DatabaseError) {
        let length = UInt(sql.utf8.count)
        let status = sql.withCString { mysql_real_query(mysql, $0, length) }
        if status != 0 { throw .lastError(of: mysql, sql: sql) }
        if mysql_field_count(mysql) > 0, let result = mysql_store_result(mysql) {
            mysql_free_result(result)
        }
    }

    /// Records a successful exchange (for the idle check).
    func touch() {
        lastActivity = Self.now()
    }

    /// Monotonic clock in nanoseconds.
    static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
