import CoreMetrics
import Glibc
import Logging
import Synchronization

/// What the database layer tells operators: session (re)connects, lost connections, transaction
/// retries and slow statements, as log lines (swift-log) and metrics (swift-metrics; the
/// executable picks the backend, Prometheus in `todosync serve`).
///
/// Process-wide. ``configure(logger:slowStatementMilliseconds:)`` is meant to be called once at
/// startup, before any thread uses a ``Connection``; until then nothing is logged (metrics go to
/// whatever `MetricsSystem` was bootstrapped, the no-op backend by default).
public enum DatabaseDiagnostics {
    nonisolated(unsafe) private static var logger: Logger?
    nonisolated(unsafe) private static var slowStatementNanoseconds: UInt64 = 0

    /// `slowStatementMilliseconds`: statements that take at least this long are logged
    /// (with their SQL text, which holds placeholders, never values); 0 turns that off.
    public static func configure(logger: Logger, slowStatementMilliseconds: Int) {
        self.logger = logger
        slowStatementNanoseconds = UInt64(max(slowStatementMilliseconds, 0)) * 1_000_000
        lastConnectFailureLog.withLock { $0 = -.infinity }
    }

    private static let connects = Counter(label: "todosync_db_connects_total", dimensions: [("kind", "initial")])
    private static let reconnects = Counter(label: "todosync_db_connects_total", dimensions: [("kind", "reconnect")])
    private static let connectionLosses = Counter(label: "todosync_db_connection_losses_total")
    private static let slowStatements = Counter(label: "todosync_db_slow_statements_total")

    /// A session was opened; `reconnect`: this connection had one before (lost or dropped).
    static func sessionOpened(reconnect: Bool, host: String) {
        if reconnect {
            reconnects.increment()
            logger?.notice("database reconnected", metadata: ["db.host": "\(host)"])
        } else {
            connects.increment()
        }
    }

    private static let connectFailures = Counter(label: "todosync_db_connect_failures_total")
    /// When the last connect failure was logged (monotonic seconds): at most one line per
    /// `connectFailureLogInterval`, or a database that is down would log once per request.
    private static let lastConnectFailureLog = Mutex<Double>(-.infinity)
    static let connectFailureLogInterval = 10.0

    /// A session could not be opened: counted always, logged with the server's error (code and
    /// text, which name the account and host but never a value) at most every 10 s per process.
    static func connectFailed(_ error: DatabaseError, host: String) {
        connectFailures.increment()
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        let now = Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
        let due = lastConnectFailureLog.withLock { last in
            guard now - last >= connectFailureLogInterval else { return false }
            last = now
            return true
        }
        guard due else { return }
        logger?.error("database connect failed", metadata: [
            "db.host": "\(host)", "db.error": "\(error.code)", "db.message": "\(error.message)",
        ])
    }

    static func connectionLost(_ error: DatabaseError) {
        connectionLosses.increment()
        logger?.warning("database connection lost", metadata: ["db.error": "\(error.code)", "db.message": "\(error.message)"])
    }

    /// Called after every statement with its duration; logs and counts the slow ones.
    @inline(__always)
    static func statementFinished(_ sql: String, nanoseconds: UInt64) {
        guard slowStatementNanoseconds > 0, nanoseconds >= slowStatementNanoseconds else { return }
        slowStatements.increment()
        logger?.warning("slow statement", metadata: [
            "db.duration_ms": "\(nanoseconds / 1_000_000)",
            "db.sql": "\(sql.count > 300 ? String(sql.prefix(300)) + "…" : sql)",
        ])
    }

    /// One transaction (or autocommit statement) run that failed with a retryable error.
    static func transactionFailed(cause: String, retried: Bool, error: DatabaseError) {
        Counter(label: "todosync_db_transaction_retries_total",
                dimensions: [("cause", cause), ("outcome", retried ? "retried" : "given_up")]).increment()
        if retried {
            logger?.info("transaction retried", metadata: ["db.cause": "\(cause)", "db.error": "\(error.code)"])
        } else {
            logger?.warning("transaction given up after its last attempt",
                            metadata: ["db.cause": "\(cause)", "db.error": "\(error.code)"])
        }
    }
}
