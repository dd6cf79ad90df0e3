import Foundation
import Logging
import MariaDB
import XCTest

/// What the database layer tells operators through swift-log (DatabaseDiagnostics): reconnects,
/// lost connections, retried and abandoned transactions, slow statements with their text but
/// never their values.
final class DiagnosticsTests: XCTestCase {
    private var db: Connection!
    private var admin: Connection!
    private let entries = Locked<[CapturedLogLine]>([])

    override func setUpWithError() throws {
        let configuration = try TestDatabase.configuration()
        db = Connection(configuration: configuration)
        admin = Connection(configuration: configuration)
        let entries = self.entries
        DatabaseDiagnostics.configure(
            logger: Logger(label: "diagnostics-test") { _ in CapturingLogHandler(entries) }, slowStatementMilliseconds: 250)
    }

    override func tearDown() {
        DatabaseDiagnostics.configure(logger: Logger(label: "off") { _ in SwiftLogNoOpLogHandler() }, slowStatementMilliseconds: 0)
        db = nil
        admin = nil
    }

    private func lines(_ message: String) -> [CapturedLogLine] {
        entries.withValue { $0.filter { $0.message == message } }
    }

    func testSlowStatementsAreLoggedWithTheirTextButNotTheirValues() throws {
        XCTAssertEqual(try db.queryOne("SELECT ?", [.text("quick secret")])?.string(0), "quick secret")
        XCTAssertTrue(lines("slow statement").isEmpty, "a quick statement is not logged")
        _ = try db.queryOne("SELECT SLEEP(?), ?", [.double(0.4), .text("slow secret")])
        let slow = lines("slow statement")
        XCTAssertEqual(slow.count, 1, "\(slow)")
        XCTAssertEqual(slow.first?.level, .warning)
        XCTAssertEqual(slow.first?.metadata["db.sql"], "SELECT SLEEP(?), ?")
        XCTAssertGreaterThanOrEqual(Int(slow.first?.metadata["db.duration_ms"] ?? "") ?? 0, 350)
        XCTAssertFalse(entries.withValue { $0.contains { "\($0)".contains("secret") } }, "bound values never logged")
    }

    func testAKilledSessionIsLoggedAsLostThenReconnected() throws {
        XCTAssertEqual(try db.queryOne("SELECT 1")?.int(0), 1)
        XCTAssertTrue(lines("database reconnected").isEmpty, "the first session is no reconnect")
        try TestDatabase.kill(db, from: admin)
        XCTAssertEqual(try db.queryOne("SELECT 2")?.int(0), 2)
        XCTAssertEqual(lines("database connection lost").count, 1, "\(entries.withValue { $0 })")
        XCTAssertEqual(lines("database reconnected").count, 1, "\(entries.withValue { $0 })")
    }

    /// Round 3, item 9: a wrong password gave 503s logged only as `unavailable`. The server's
    /// error (code and text, never the password) is logged, at most once per 10 s.
    func testAFailedConnectIsLoggedWithTheServersErrorButNotThePassword() throws {
        var configuration = try TestDatabase.configuration()
        configuration.password = "wrong-secret-\(UInt32.random(in: 0...UInt32.max))"
        configuration.user = "todosync_nobody"
        let denied = Connection(configuration: configuration)
        for _ in 0..<3 {
            XCTAssertThrowsError(try denied.queryOne("SELECT 1")) {
                XCTAssertEqual(($0 as? DatabaseError)?.code, 1045, "\($0)")
            }
        }
        let failed = lines("database connect failed")
        XCTAssertEqual(failed.count, 1, "logged once, then rate-limited: \(failed)")
        XCTAssertEqual(failed.first?.level, .error)
        XCTAssertEqual(failed.first?.metadata["db.error"], "1045")
        XCTAssertTrue(failed.first?.metadata["db.message"]?.contains("Access denied") == true, "\(failed)")
        XCTAssertFalse(entries.withValue { $0.contains { "\($0)".contains("wrong-secret") } }, "never the password")
    }

    func testRetriedAndAbandonedTransactionsAreLoggedWithTheirCause() throws {
        var runs = 0
        try db.inTransaction(maxAttempts: 2) {
            runs += 1
            if runs == 1 { throw DatabaseError(code: 1213, message: "Deadlock found") }
        }
        XCTAssertEqual(lines("transaction retried").map { $0.metadata["db.cause"] }, ["deadlock"])
        XCTAssertThrowsError(try db.inTransaction(maxAttempts: 1) { throw DatabaseError(code: 1205, message: "Lock wait timeout") })
        let abandoned = lines("transaction given up after its last attempt")
        XCTAssertEqual(abandoned.map { $0.metadata["db.cause"] }, ["lock_wait_timeout"])
        XCTAssertEqual(abandoned.first?.level, .warning)
    }
}

struct CapturedLogLine: CustomStringConvertible {
    let level: Logger.Level
    let message: String
    let metadata: [String: String]
    var description: String { "\(level) \(message) \(metadata)" }
}

/// Collects log lines (metadata as strings) for assertions.
struct CapturingLogHandler: LogHandler {
    let entries: Locked<[CapturedLogLine]>
    var logLevel: Logger.Level = .trace
    var metadata: Logger.Metadata = [:]

    init(_ entries: Locked<[CapturedLogLine]>) { self.entries = entries }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { _, call in call }
        let line = CapturedLogLine(level: event.level, message: event.message.description,
                                   metadata: all.mapValues { "\($0)" })
        entries.withValue { $0.append(line) }
    }
}
