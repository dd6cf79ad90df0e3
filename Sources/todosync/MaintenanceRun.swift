import Logging
import MariaDB
import TodoSyncStore

/// What every per-user maintenance command (`check-feed`, `rebuild-feed`, `recompute-stats`)
/// starts with: configuration, logging, one store connection, and the users to work on.
struct MaintenanceRun {
    let logger: Logger
    let store: Store
    let users: [Int64]

    /// `user` limits the run to one account; nil means every account.
    init(user: Int64?) throws {
        let environment = Environment()
        logger = bootstrapLogging(environment)
        MariaDBLibrary.initialize()
        store = try environment.connectedStore()
        users = try user.map { [$0] } ?? store.allUserIDs()
    }
}
