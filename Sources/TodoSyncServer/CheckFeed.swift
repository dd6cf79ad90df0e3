import ArgumentParser
import Logging
import MariaDB
import TodoSyncStore

/// `todosync check-feed`: the change feed must equal the tables, record for record.
struct CheckFeed: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-feed",
        abstract: "Verify that the sync change feed equals the tables (exit status 1 if not).")

    @OptionGroup var scope: UserScope

    @Option(help: "Print at most this many differences.")
    var show: Int = 20

    func run() throws {
        let run = try MaintenanceRun(user: scope.user)
        let (logger, store, users) = (run.logger, run.store, run.users)
        var problems = 0
        for userID in users {
            for problem in try store.checkFeed(userID: userID) {
                if problems < show { print("user \(problem.userID): \(problem)") }
                problems += 1
            }
        }
        logger.info("feed checked", metadata: ["users": "\(users.count)", "differences": "\(problems)"])
        print("check-feed: \(users.count) users, \(problems) differences")
        if problems > 0 { throw ExitCode(1) }
    }
}

/// `todosync rebuild-feed`: render the feed afresh from the tables (after loading data by SQL).
struct RebuildFeed: PerUserMaintenance {
    static let configuration = CommandConfiguration(commandName: "rebuild-feed", abstract: "Render the sync change feed afresh from the tables (after a bulk load by SQL).")
    static let logged = (message: "feed rebuilt", counted: "rows")
    @OptionGroup var scope: UserScope
    static func count(_ store: Store, userID: Int64) throws -> Int { try store.rebuildFeed(userID: userID) }
}

/// `todosync store-days`: store again the day lists that writes of many dates left not stored
/// (every minute, from todosync-store-days.timer).
struct StoreDays: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "store-days",
        abstract: "Store again the day lists (GET /todos?date=) that writes of many dates left not stored.")

    func run() throws {
        let run = try MaintenanceRun(user: nil, listingUsers: false)
        let report = try run.store.storeUnstoredDays()
        run.logger.info("day lists stored", metadata: [
            "rebuilt": "\(report.rebuilt)", "skipped": "\(report.skipped)", "unstored": "\(report.unstored)",
        ])
        print(report)
    }
}
