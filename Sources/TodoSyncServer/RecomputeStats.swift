import ArgumentParser
import Logging
import MariaDB
import TodoSyncStore

struct RecomputeStats: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recompute-stats",
        abstract: "Recompute daily statistics (after a bulk load or a change of the formulas).")

    @Option(help: "Only this user (default: every user).")
    var user: Int64?

    func run() throws {
        let run = try MaintenanceRun(user: user)
        let (logger, store, users) = (run.logger, run.store, run.users)
        var days = 0
        for userID in users { days += try store.recomputeDailyStats(userID: userID) }
        logger.info("daily stats recomputed", metadata: ["users": "\(users.count)", "dates": "\(days)"])
    }
}
