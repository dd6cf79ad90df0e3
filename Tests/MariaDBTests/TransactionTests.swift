import Foundation
import MariaDB
import XCTest

/// inTransaction / inSavepoint, including a real deadlock between two threads.
final class TransactionTests: XCTestCase {
    private var db: Connection!

    override func setUpWithError() throws {
        db = Connection(configuration: try TestDatabase.configuration())
        try db.execute("DROP TABLE IF EXISTS tx_accounts")
        try db.execute("CREATE TABLE tx_accounts (id INT PRIMARY KEY, balance INT NOT NULL) ENGINE=InnoDB")
        try db.execute("INSERT INTO tx_accounts VALUES (1, 100), (2, 100)")
    }

    override func tearDownWithError() throws {
        try db?.execute("DROP TABLE IF EXISTS tx_accounts")
        db = nil
    }

    private func balances(_ connection: Connection? = nil) throws -> [Int] {
        try (connection ?? db).query("SELECT balance FROM tx_accounts ORDER BY id").compactMap { $0.int(0) }
    }

    struct Boom: Error {}

    func testCommitOnReturn() throws {
        let result = try db.inTransaction { () -> Int in
            XCTAssertTrue(db.isInTransaction)
            try db.execute("UPDATE tx_accounts SET balance = balance - 30 WHERE id = 1")
            try db.execute("UPDATE tx_accounts SET balance = balance + 30 WHERE id = 2")
            return 42
        }
        XCTAssertEqual(result, 42)
        XCTAssertFalse(db.isInTransaction)
        // Visible from another session: committed.
        let other = Connection(configuration: try TestDatabase.configuration())
        XCTAssertEqual(try balances(other), [70, 130])
    }

    func testRollbackOnThrow() throws {
        XCTAssertThrowsError(
            try db.inTransaction {
                try db.execute("UPDATE tx_accounts SET balance = 0 WHERE id = 1")
                throw Boom()
            }
        ) { error in XCTAssertTrue(error is Boom) }
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(try balances(), [100, 100])
        // A database error in the body also rolls back, and is not retried.
        var runs = 0
        let error = assertDatabaseError(
            try db.inTransaction {
                runs += 1
                try db.execute("UPDATE tx_accounts SET balance = 1 WHERE id = 1")
                try db.execute("INSERT INTO tx_accounts VALUES (2, 5)")
            })
        XCTAssertEqual(error?.code, 1062)
        XCTAssertEqual(runs, 1)
        XCTAssertEqual(try balances(), [100, 100])
    }

    func testSavepointRollbackKeepsTheOuterTransaction() throws {
        try db.inTransaction {
            try db.execute("UPDATE tx_accounts SET balance = 50 WHERE id = 1")
            XCTAssertThrowsError(
                try db.inSavepoint {
                    try db.execute("UPDATE tx_accounts SET balance = 0 WHERE id = 2")
                    throw Boom()
                })
            // Nested savepoints with distinct names; the inner one is rolled back only.
            try db.inSavepoint {
                try db.execute("UPDATE tx_accounts SET balance = balance + 1 WHERE id = 2")
                XCTAssertThrowsError(
                    try db.inSavepoint {
                        try db.execute("UPDATE tx_accounts SET balance = balance + 1000 WHERE id = 2")
                        try db.inSavepoint {
                            try db.execute("UPDATE tx_accounts SET balance = balance + 1000 WHERE id = 1")
                        }
                        throw Boom()
                    })
                try db.execute("UPDATE tx_accounts SET balance = balance + 1 WHERE id = 2")
            }
            XCTAssertEqual(try balances(), [50, 102])
        }
        XCTAssertEqual(try balances(), [50, 102])
    }

    func testSavepointOutsideTransactionActsAsTransaction() throws {
        XCTAssertThrowsError(
            try db.inSavepoint {
                try db.execute("UPDATE tx_accounts SET balance = 0")
                throw Boom()
            })
        XCTAssertEqual(try balances(), [100, 100])
        try db.inSavepoint { try db.execute("UPDATE tx_accounts SET balance = 1 WHERE id = 1") }
        XCTAssertEqual(try balances(), [1, 100])
    }

    /// A transaction that the server ends on its own between two statements (a Galera node's
    /// brute-force abort of a local transaction, which MariaDB 10.11 does not always report to
    /// the next prepared statement) must not go on as autocommit statements: the statements
    /// after the loss would be applied one by one, outside the transaction and its locks, and
    /// COMMIT would "succeed". Simulated here by a ROLLBACK the Connection does not know about:
    /// the whole body must run again, and its effects land together, exactly once.
    func testTransactionEndedByTheServerIsRunAgainAsAWhole() throws {
        var runs = 0
        try db.inTransaction {
            runs += 1
            try db.execute("UPDATE tx_accounts SET balance = balance - 30 WHERE id = 1")
            if runs == 1 { try db.execute("ROLLBACK") }  // the server ends the transaction
            try db.execute("UPDATE tx_accounts SET balance = balance + 30 WHERE id = 2")
        }
        XCTAssertEqual(runs, 2)
        XCTAssertEqual(try balances(), [70, 130])  // without the check: [100, 130]
    }

    /// The same loss noticed at a savepoint statement (RELEASE SAVEPOINT answers 1305 "does not
    /// exist" once the transaction is gone) is a retried deadlock too, not a failure.
    func testTransactionEndedByTheServerInsideASavepointIsRunAgain() throws {
        var runs = 0
        try db.inTransaction {
            runs += 1
            try db.inSavepoint {
                try db.execute("UPDATE tx_accounts SET balance = balance - 30 WHERE id = 1")
                if runs == 1 { try db.execute("ROLLBACK") }  // the server ends the transaction
            }
            try db.execute("UPDATE tx_accounts SET balance = balance + 30 WHERE id = 2")
        }
        XCTAssertEqual(runs, 2)
        XCTAssertEqual(try balances(), [70, 130])
    }

    /// A connection lost during COMMIT leaves the outcome unknown: the body is not run again (it
    /// might have been applied) and the error says so, for the API's 504 `outcome_unknown`.
    /// Simulated by killing the session as the body's last step, so COMMIT is what meets it.
    func testConnectionLostAtCommitIsAnUnknownOutcomeAndNotRetried() throws {
        let admin = Connection(configuration: try TestDatabase.configuration())
        var runs = 0
        XCTAssertThrowsError(
            try db.inTransaction {
                runs += 1
                try db.execute("UPDATE tx_accounts SET balance = balance - 30 WHERE id = 1")
                try TestDatabase.kill(db, from: admin)
            }
        ) { error in
            let error = error as? DatabaseError
            XCTAssertEqual(error?.isConnectionError, true, "\(String(describing: error))")
            XCTAssertEqual(error?.isCommitOutcomeUnknown, true, "\(String(describing: error))")
        }
        XCTAssertEqual(runs, 1, "never run again: the first COMMIT may have been applied")
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(try balances(), [100, 100], "the killed session's transaction was rolled back")
    }

    /// A read-only transaction has nothing whose outcome could be unknown: when its COMMIT meets
    /// a lost connection, what the body read (one consistent snapshot) is returned, not an
    /// unknown outcome (that became a 504 `outcome_unknown` for a GET of sync/pull when MariaDB
    /// stopped as its COMMIT was sent), and the next statement opens a new connection.
    func testConnectionLostAtCommitOfAReadOnlyTransactionReturnsWhatWasRead() throws {
        let admin = Connection(configuration: try TestDatabase.configuration())
        var runs = 0
        let read = try db.inTransaction(readOnly: true) { () throws -> Int64? in
            runs += 1
            let balance = try db.queryOne("SELECT balance FROM tx_accounts WHERE id = 1")?.int64(0)
            try TestDatabase.kill(db, from: admin)
            return balance
        }
        XCTAssertEqual(read, 100)
        XCTAssertEqual(runs, 1)
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(try balances(), [100, 100], "a new connection serves the next statement")
    }

    /// A write inside a read-only transaction is refused by the server (1792), so `readOnly`
    /// cannot hide a write's unknown outcome.
    func testReadOnlyTransactionRefusesWrites() throws {
        XCTAssertThrowsError(
            try db.inTransaction(readOnly: true) {
                try db.execute("UPDATE tx_accounts SET balance = balance - 30 WHERE id = 1")
            }
        ) { error in
            XCTAssertEqual((error as? DatabaseError)?.code, 1792, "\(error)")
        }
        XCTAssertEqual(try balances(), [100, 100])
    }

    /// A connection lost before COMMIT is a plain lost connection: nothing was applied, and the
    /// body runs again on a new connection.
    func testConnectionLostBeforeCommitIsRetriedAsAWhole() throws {
        let admin = Connection(configuration: try TestDatabase.configuration())
        var runs = 0
        try db.inTransaction {
            runs += 1
            try db.execute("UPDATE tx_accounts SET balance = balance - 30 WHERE id = 1")
            if runs == 1 { try TestDatabase.kill(db, from: admin) }
            try db.execute("UPDATE tx_accounts SET balance = balance + 30 WHERE id = 2")
        }
        XCTAssertEqual(runs, 2)
        XCTAssertEqual(try balances(), [70, 130])
    }

    func testLockWaitTimeoutIsRetried() throws {
        let configuration = try TestDatabase.configuration(lockWaitTimeoutSeconds: 1)
        let holder = Connection(configuration: configuration)
        let waiter = Connection(configuration: configuration)
        // The holder keeps row 1 locked through the waiter's first attempt only.
        try holder.execute("START TRANSACTION")  // deliberately outside inTransaction
        try holder.execute("UPDATE tx_accounts SET balance = balance + 1 WHERE id = 1")
        var runs = 0
        let start = ContinuousClock.now
        try waiter.inTransaction {
            runs += 1
            if runs == 2 { XCTAssertNoThrow(try holder.execute("COMMIT")) }
            if runs > 1 { try waiter.execute("UPDATE tx_accounts SET balance = balance + 10 WHERE id = 1") }
            else {
                let error = assertDatabaseError(try waiter.execute("UPDATE tx_accounts SET balance = balance + 10 WHERE id = 1"))
                XCTAssertEqual(error?.code, 1205)
                XCTAssertEqual(error?.isRetryableTransactionError, true)
                throw try XCTUnwrap(error)
            }
        }
        XCTAssertEqual(runs, 2)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(5))
        XCTAssertEqual(try balances(), [111, 100])
    }

    /// Two connections on two threads lock rows 1 and 2 in opposite orders: InnoDB kills one
    /// transaction with 1213; inTransaction rolls it back and runs the body again.
    func testDeadlockIsRetried() throws {
        let configuration = try TestDatabase.configuration()
        let runs = Locked([0, 0])
        let failures = Locked([String]())
        let firstLocked = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]

        func transfer(worker: Int, first: Int, second: Int) -> @Sendable () -> Void {
            return {
                let connection = Connection(configuration: configuration)  // created on this thread
                do {
                    try connection.inTransaction {
                        let run = runs.withValue { runs -> Int in
                            runs[worker] += 1
                            return runs[worker]
                        }
                        try connection.execute("UPDATE tx_accounts SET balance = balance - 1 WHERE id = ?", [.int(Int64(first))])
                        if run == 1 {
                            // Both transactions hold their first row before either asks for its second.
                            firstLocked[worker].signal()
                            _ = firstLocked[1 - worker].wait(timeout: .now() + 5)
                        }
                        try connection.execute("UPDATE tx_accounts SET balance = balance + 1 WHERE id = ?", [.int(Int64(second))])
                    }
                } catch {
                    failures.withValue { $0.append("worker \(worker): \(error)") }
                }
            }
        }
        let joinA = startThread(transfer(worker: 0, first: 1, second: 2))
        let joinB = startThread(transfer(worker: 1, first: 2, second: 1))
        joinA()
        joinB()
        XCTAssertEqual(failures.current, [])
        let counts = runs.current
        XCTAssertEqual(counts.sorted(), [1, 2], "exactly one body ran twice: \(counts)")
        XCTAssertEqual(try balances(), [100, 100], "both transfers applied exactly once")
        let other = Connection(configuration: configuration)
        XCTAssertEqual(try other.queryOne("SELECT SUM(balance) FROM tx_accounts")?.int(0), 200)
    }

    func testDeadlockExhaustingAttemptsIsThrown() throws {
        // maxAttempts: 1 means no retry: the 1213 reaches the caller.
        let configuration = try TestDatabase.configuration()
        let outcomes = Locked([String]())
        let locked = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
        func worker(_ index: Int) -> @Sendable () -> Void {
            return {
                let connection = Connection(configuration: configuration)
                do {
                    try connection.inTransaction(maxAttempts: 1) {
                        try connection.execute("UPDATE tx_accounts SET balance = balance + 1 WHERE id = ?", [.int(Int64(index + 1))])
                        locked[index].signal()
                        _ = locked[1 - index].wait(timeout: .now() + 5)
                        try connection.execute("UPDATE tx_accounts SET balance = balance + 1 WHERE id = ?", [.int(Int64(2 - index))])
                    }
                    outcomes.withValue { $0.append("ok") }
                } catch let error as DatabaseError {
                    outcomes.withValue { $0.append("\(error.code)") }
                    // The connection is usable afterwards, outside any transaction.
                    if (try? connection.queryOne("SELECT @@in_transaction")?.int(0)) != 0 {
                        outcomes.withValue { $0.append("still in transaction") }
                    }
                } catch {
                    outcomes.withValue { $0.append("\(error)") }
                }
            }
        }
        let a = startThread(worker(0))
        let b = startThread(worker(1))
        a()
        b()
        XCTAssertEqual(outcomes.current.sorted(), ["1213", "ok"])
        XCTAssertEqual(try db.queryOne("SELECT SUM(balance) FROM tx_accounts")?.int(0), 202)
    }
}
