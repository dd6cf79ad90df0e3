import ArgumentParser
import Foundation
import Logging
import MariaDB
import TodoSyncAPI
import TodoSyncStore

/// `todosync`: the TodoSync FastCGI responder and its maintenance commands. A library, so that two
/// executables share it: `todosync` (what ships) and `todosync-test`, the same commands with the
/// test hooks (`TodoSyncTestHooks`) linked in, for the test stack and the benchmarks.
public struct TodoSyncCommand: ParsableCommand {
    public init() {}

    /// The test hooks `serve --enable-test-hooks` installs; nil in the shipping binary, which
    /// links none (`todosync-test` sets it before `main()`, while the process has one thread).
    nonisolated(unsafe) public static var testHooks: (any ApplicationTestHooks)?

    public static let configuration = CommandConfiguration(
        commandName: "todosync",
        abstract: "TodoSync server: FastCGI responder for the TodoSync HTTP API.",
        version: todosyncVersionDescription,
        subcommands: [Serve.self, Config.self, ClientOptions.self, CreateDatabase.self, Migrate.self, Purge.self, RecomputeStats.self, NewEpoch.self,
                      CheckFeed.self, RebuildFeed.self, StoreDays.self],
        defaultSubcommand: Serve.self)
}

/// Bootstraps swift-log once, at the level of `TODOSYNC_LOG_LEVEL` (default info), on stderr, as
/// JSON lines or plain text (`TODOSYNC_LOG_FORMAT`, default json; see JSONLogHandler).
func bootstrapLogging(_ environment: Environment) -> Logger {
    LogLevelControl.level = Logger.Level(rawValue: environment.string("TODOSYNC_LOG_LEVEL")) ?? .info
    let format = environment.string("TODOSYNC_LOG_FORMAT")
    LoggingSystem.bootstrap { label in
        ProcessLevelLogHandler(wrapped: makeLogHandler(label: label, level: .trace, format: format))
    }
    return Logger(label: "todosync")
}

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending SQL migrations from the Sql directory.")

    @Option(help: "Directory of NNN_name.sql migrations (default: $TODOSYNC_SQL_DIR or ./Sql).")
    var sqlDir: String?

    @Option(help: "Seconds to keep retrying while the database is not reachable yet.")
    var waitSeconds: Int = 30

    @Flag(help: "List applied and pending migrations; apply nothing.")
    var status = false

    func run() throws {
        let environment = Environment()
        let logger = bootstrapLogging(environment)
        MariaDBLibrary.initialize()
        let connection = Connection(configuration: environment.databaseOrExit)
        do {
            try connection.connectWaiting(seconds: waitSeconds, logger: logger)
        } catch let error as DatabaseError {
            ExitStatus.fail(.forConnectFailure(error), "cannot open a database session: \(error)")
        }
        let directory = URL(fileURLWithPath: sqlDir ?? environment.string("TODOSYNC_SQL_DIR"))
        let migrator = Migrator(connection: connection, directory: directory)
        if status {
            // The same check, and the same words, as `migrate` itself: an edited migration is
            // listed as `edited`, named on stderr, and the exit status is 65.
            let report = try migrator.status()
            print(report.report, terminator: "")
            if !report.edited.isEmpty {
                ExitStatus.fail(.migrations, report.edited.map(\.description).joined(separator: "\ntodosync: "))
            }
            return
        }
        let applied: [Int]
        do {
            applied = try migrator.run()
        } catch let edit as Migrator.Edit {
            ExitStatus.fail(.migrations, "\(edit)")
        }
        logger.info("migrations done", metadata: ["applied": "\(applied)"])
        // Migration 007 queues every existing user for the change feed's back-fill.
        let backfilled = try Store(connection: connection).backfillQueuedFeeds()
        if backfilled > 0 { logger.info("change feed back-filled", metadata: ["users": "\(backfilled)"]) }
    }
}
