import ArgumentParser
import Logging
import MariaDB
import TodoSyncStore

struct RecomputeStats: PerUserMaintenance {
    static let configuration = CommandConfiguration(commandName: "recompute-stats", abstract: "Recompute daily statistics (after a bulk load or a change of the formulas).")
    static let logged = (message: "daily stats recomputed", counted: "dates")
    @OptionGroup var scope: UserScope
    static func count(_ store: Store, userID: Int64) throws -> Int { try store.recomputeDailyStats(userID: userID) }
}
