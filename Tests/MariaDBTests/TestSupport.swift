import Foundation
import MariaDB
import XCTest

/// Access to the MariaDB server the tests run against (env `TODOSYNC_TEST_DB_*`).
enum TestDatabase {
    /// Configuration for the test schema; skips the test when no server is configured.
    /// Creates the schema if it is missing.
    static func configuration(
        lockWaitTimeoutSeconds: UInt32 = 5,
        statementCacheCapacity: Int = 256,
        validateAfterIdleSeconds: UInt32 = 10
    ) throws -> ConnectionConfiguration {
        let environment = ProcessInfo.processInfo.environment
        guard let socket = environment["TODOSYNC_TEST_DB_SOCKET"], !socket.isEmpty else {
            throw XCTSkip("TODOSYNC_TEST_DB_SOCKET is not set: no MariaDB to test against")
        }
        let user = environment["TODOSYNC_TEST_DB_USER"] ?? "root"
        let password = environment["TODOSYNC_TEST_DB_PASSWORD"] ?? ""
        let name = environment["TODOSYNC_TEST_DB_NAME"] ?? "todosync_test"
        guard !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            XCTFail("TODOSYNC_TEST_DB_NAME must be [A-Za-z0-9_]+")
            throw XCTSkip("invalid database name")
        }
        try createDatabaseIfNeeded(socket: socket, user: user, password: password, name: name)
        return ConnectionConfiguration(
            unixSocket: socket, user: user, password: password, database: name,
            lockWaitTimeoutSeconds: lockWaitTimeoutSeconds, statementCacheCapacity: statementCacheCapacity,
            validateAfterIdleSeconds: validateAfterIdleSeconds)
    }

    /// Kills `connection`'s session from `admin` and waits until the server has dropped it.
    static func kill(_ connection: Connection, from admin: Connection) throws {
        let id = try XCTUnwrap(connection.connectionID)
        try admin.execute("KILL \(id)")  // KILL takes no placeholder; the id is ours
        for _ in 0..<100 {
            let alive = try admin.queryOne("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", [.int(Int64(id))])
            if alive?.int(0) == 0 { return }
            usleep(10_000)
        }
        XCTFail("connection \(id) was not killed")
    }

    private static func createDatabaseIfNeeded(socket: String, user: String, password: String, name: String) throws {
        let bootstrap = Connection(
            configuration: ConnectionConfiguration(unixSocket: socket, user: user, password: password, database: "mysql"))
        defer { bootstrap.close() }
        try bootstrap.execute(
            "CREATE DATABASE IF NOT EXISTS `\(name)` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
    }
}

/// A value shared between test threads.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withValue<R>(_ body: (inout Value) -> R) -> R {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }

    var current: Value { withValue { $0 } }
}

/// Runs `body` on a new thread; the returned function waits for it to finish.
func startThread(_ body: @escaping @Sendable () -> Void) -> @Sendable () -> Void {
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        body()
        done.signal()
    }
    thread.start()
    return { done.wait() }
}

/// Asserts that `body` throws a ``DatabaseError`` and returns it.
func assertDatabaseError<T>(
    _ body: @autoclosure () throws -> T, file: StaticString = #filePath, line: UInt = #line
) -> DatabaseError? {
    do {
        _ = try body()
        XCTFail("expected a DatabaseError", file: file, line: line)
        return nil
    } catch let error as DatabaseError {
        return error
    } catch {
        XCTFail("expected a DatabaseError, got \(error)", file: file, line: line)
        return nil
    }
}
