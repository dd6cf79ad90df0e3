import Synchronization

/// Process-wide counts of transaction runs that ``Connection/inTransaction(maxAttempts:_:)`` had
/// to repeat or give up, by cause, for logs and operators.
///
/// On Galera, a transaction that loses certification to a conflicting write committed on another
/// node fails with a deadlock (1213) *at COMMIT*; an InnoDB deadlock or a replicated write
/// aborting a local one (a "brute force abort") fails with 1213 at an earlier statement.
public enum TransactionRetryStatistics {
    /// A snapshot of the counters.
    public struct Counts: Sendable, Equatable, CustomStringConvertible {
        /// 1213 before COMMIT: InnoDB deadlocks, and on Galera local transactions aborted by a replicated write.
        public var deadlocks: Int = 0
        /// 1213 at COMMIT: on Galera, certification failures (a conflicting write won on another node).
        public var certificationFailures: Int = 0
        /// 1062 escaping a transaction on a Galera node: a row applied from another node collided
        /// with this transaction's write before certification saw the conflict.
        public var duplicateKeyConflicts: Int = 0
        /// 1205: lock wait timeouts.
        public var lockWaitTimeouts: Int = 0
        /// Runs repeated after the connection was lost before COMMIT.
        public var connectionLosses: Int = 0
        /// Transactions the server rolled back without reporting it to the statement that
        /// followed (a Galera brute-force abort while the client was between statements), noticed
        /// by the status flags; each is also counted as a deadlock when its run is repeated.
        public var silentRollbacks: Int = 0
        /// Transactions that still failed after their last attempt with one of the causes above.
        public var givenUp: Int = 0

        public init() {}

        public var isZero: Bool { self == Counts() }

        public var description: String {
            "deadlocks=\(deadlocks) certification_failures=\(certificationFailures) "
                + "duplicate_key_conflicts=\(duplicateKeyConflicts) lock_wait_timeouts=\(lockWaitTimeouts) silent_rollbacks=\(silentRollbacks) connection_losses=\(connectionLosses) given_up=\(givenUp)"
        }
    }

    private static let counts = Mutex(Counts())

    /// The counts since the process started.
    public static var current: Counts { counts.withLock { $0 } }

    static func recordSilentRollback() {
        counts.withLock { $0.silentRollbacks += 1 }
    }

    static func record(_ error: DatabaseError, atCommit: Bool, retried: Bool) {
        let cause = counts.withLock { counts in
            if !retried { counts.givenUp += 1 }
            switch error.code {
            case 1213 where atCommit:
                counts.certificationFailures += 1
                return "certification_failure"
            case 1213:
                counts.deadlocks += 1
                return "deadlock"
            case 1205:
                counts.lockWaitTimeouts += 1
                return "lock_wait_timeout"
            case 1062:
                counts.duplicateKeyConflicts += 1
                return "duplicate_key_conflict"
            default:
                counts.connectionLosses += 1
                return "connection_loss"
            }
        }
        DatabaseDiagnostics.transactionFailed(cause: cause, retried: retried, error: error)
    }
}
