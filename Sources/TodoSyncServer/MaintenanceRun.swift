import Logging
import MariaDB
import TodoSyncStore

/// What every maintenance command of the feed (`check-feed`, `rebuild-feed`, `recompute-stats`,
/// `store-days`) starts with: configuration, logging, one store connection, and the users to work on.
struct MaintenanceRun {
    let logger: Logger
    let store: Store
    let users: [Int64]

    /// `user` limits the run to one account; nil means every account (none when not
    /// `listingUsers`: a command that finds its own work).
    init(user: Int64?, listingUsers: Bool = true) throws {
        let environment = Environment()
        logger = bootstrapLogging(environment)
        MariaDBLibrary.initialize()
        store = try environment.connectedStore()
        users = try user.map { [$0] } ?? (listingUsers ? store.allUserIDs() : [])
    }
}
