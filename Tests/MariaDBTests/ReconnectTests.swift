import Foundation
import MariaDB
import XCTest

/// Lost connections: KILL from another session, unreachable servers.
final class ReconnectTests: XCTestCase {
    private var db: Connection!
    private var admin: Connection!

    override func setUpWithError() throws {
        let configuration = try TestDatabase.configuration()
        db = Connection(configuration: configuration)
        admin = Connection(configuration: configuration)
        try db.execute("DROP TABLE IF EXISTS rc_items")
        try db.execute("CREATE TABLE rc_items (id INT PRIMARY KEY AUTO_INCREMENT, label VARCHAR(50) NOT NULL) ENGINE=InnoDB")
    }

    override func tearDownWithError() throws {
        try admin?.execute("DROP TABLE IF EXISTS rc_items")
        db = nil
        admin = nil
    }

    private func kill(_ connection: Connection) throws {
        try TestDatabase.kill(connection, from: admin)
    }

    func testQueryReconnectsAfterKillAndRepreparesStatements() throws {
        try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text("one")])
        let select = "SELECT label FROM rc_items WHERE id = ?"
        XCTAssertEqual(try db.queryOne(select, [.int(1)])?.string(0), "one")
        let before = try XCTUnwrap(db.connectionID)
        XCTAssertGreaterThanOrEqual(db.cachedStatementCount, 2, "INSERT and SELECT (plus setUp's DDL)")

        try kill(db)
        // The cached statement belongs to the dead session: the read is retried on a new one.
        XCTAssertEqual(try db.queryOne(select, [.int(1)])?.string(0), "one")
        let after = try XCTUnwrap(db.connectionID)
        XCTAssertNotEqual(before, after)
        XCTAssertEqual(db.cachedStatementCount, 1, "old statements dropped, the query re-prepared")
        XCTAssertEqual(try db.queryOne("SELECT @@session.time_zone")?.string(0), "+00:00", "session set up again")

        // Writes: a request that never reached the server (2006 on send) is retried too.
        try kill(db)
        XCTAssertEqual(try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text("two")]).affectedRows, 1)
        XCTAssertEqual(try db.query("SELECT label FROM rc_items ORDER BY id").compactMap { $0.string(0) }, ["one", "two"])
    }

    func testForEachRowIsRetriedWhenTheConnectionWasLostBeforeAnyRow() throws {
        for label in ["a", "b", "c"] { try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text(label)]) }
        let select = "SELECT label FROM rc_items ORDER BY id"
        XCTAssertEqual(try db.forEachRow(select) { _ throws(DatabaseError) in }, 3)
        try kill(db)
        var labels: [String] = []
        let count = try db.forEachRow(select) { row throws(DatabaseError) in
            if case .text(let label) = try row.value(0) { labels.append(label) }
        }
        XCTAssertEqual(count, 3)
        XCTAssertEqual(labels, ["a", "b", "c"], "each row once, on the new connection")
    }

    /// A result far bigger than the socket buffers, so that killing the session after the first
    /// row leaves the client mid-stream.
    private let bigResult = "SELECT seq, REPEAT('x', 1000) FROM seq_1_to_20000"

    func testForEachRowIsNotRepeatedOnceRowsWereHandedOut() throws {
        let id = try XCTUnwrap(db.connectionID)
        var firstRows = 0, rows = 0
        XCTAssertThrowsError(
            try db.forEachRow(bigResult) { row throws(DatabaseError) in
                if try row.int64(0) == 1 {
                    firstRows += 1
                    _ = try? admin.execute("KILL \(id)")
                }
                rows += 1
            }
        ) { error in
            XCTAssertTrue((error as? DatabaseError)?.isConnectionError == true, "\(error)")
        }
        XCTAssertEqual(firstRows, 1, "the rows were not handed out a second time")
        XCTAssertLessThan(rows, 20_000, "the kill cut the result short")
        XCTAssertEqual(try db.queryOne("SELECT 1")?.int64(0), 1, "the connection recovers for the next statement")
    }

    func testForEachRowWithRestartStartsOverOnANewConnection() throws {
        var killed = false, restarts = 0, rows = 0
        let count = try db.forEachRow(bigResult, restart: { restarts += 1; rows = 0 }) { row throws(DatabaseError) in
            if !killed, try row.int64(0) == 1, let id = db.connectionID {
                killed = true
                _ = try? admin.execute("KILL \(id)")
            }
            rows += 1
        }
        XCTAssertTrue(killed)
        XCTAssertEqual(restarts, 1)
        XCTAssertEqual(count, 20_000)
        XCTAssertEqual(rows, 20_000, "after the restart every row arrived exactly once")
    }

    func testIdleConnectionIsValidatedBeforeAWrite() throws {
        let configuration = try TestDatabase.configuration(validateAfterIdleSeconds: 1)
        let db = Connection(configuration: configuration)
        try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text("a")])
        let before = db.connectionID
        try kill(db)
        usleep(1_100_000)
        try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text("b")])
        XCTAssertNotEqual(db.connectionID, before)
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM rc_items")?.int(0), 2)
    }

    func testTransactionIsRetriedWhenTheConnectionDropsBeforeCommit() throws {
        var runs = 0
        try db.inTransaction {
            runs += 1
            try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text("tx")])
            if runs == 1 { try kill(db) }
            try db.execute("INSERT INTO rc_items (label) VALUES (?)", [.text("tx2")])
        }
        XCTAssertEqual(runs, 2)
        XCTAssertEqual(try db.query("SELECT label FROM rc_items ORDER BY id").compactMap { $0.string(0) }, ["tx", "tx2"])
    }

    func testSwallowedConnectionErrorDoomsTheTransaction() throws {
        var runs = 0
        let error = assertDatabaseError(
            try db.inTransaction(maxAttempts: 1) {
                runs += 1
                try db.execute("INSERT INTO rc_items (label) VALUES ('first')")
                try kill(db)
                // The body ignores the failure and carries on: nothing may run outside the
                // transaction, and nothing is committed.
                _ = try? db.execute("INSERT INTO rc_items (label) VALUES ('lost')")
                _ = try? db.execute("INSERT INTO rc_items (label) VALUES ('autocommit?')")
            })
        XCTAssertEqual(runs, 1)
        XCTAssertEqual(error?.isConnectionError, true)
        XCTAssertFalse(db.isInTransaction)
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*) FROM rc_items")?.int(0), 0)
    }

    func testUnreachableServerFailsFastWithAConnectionError() throws {
        let configuration = try TestDatabase.configuration()
        var missing = configuration
        missing.unixSocket = "/tmp/todosync-no-such-socket-\(getpid())"
        let db = Connection(configuration: missing)
        let start = ContinuousClock.now
        let error = assertDatabaseError(try db.query("SELECT 1"))
        XCTAssertEqual(error?.isConnectionError, true)
        XCTAssertEqual(error?.code, 2002)
        XCTAssertFalse(db.ping())
        let txError = assertDatabaseError(try db.inTransaction { try db.execute("SELECT 1") })
        XCTAssertEqual(txError?.isConnectionError, true)
        XCTAssertLessThan(ContinuousClock.now - start, .seconds(2))

        var badPassword = configuration
        badPassword.password = "definitely-wrong-\(getpid())"
        badPassword.user = "todosync_no_such_user"
        let denied = assertDatabaseError(try Connection(configuration: badPassword).connect())
        XCTAssertEqual(denied?.isConnectionError, true, "any failure to connect maps to 503")
        XCTAssertFalse(denied?.description.contains("definitely-wrong") ?? true)

        // TCP to a port nobody listens on: refused at once, within the connect timeout anyway.
        let tcp = Connection(
            configuration: ConnectionConfiguration(
                host: "127.0.0.1", port: 9, user: "x", password: "y", database: "z", connectTimeoutSeconds: 1))
        XCTAssertEqual(assertDatabaseError(try tcp.connect())?.isConnectionError, true)
    }
}
