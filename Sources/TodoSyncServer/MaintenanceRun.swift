import ArgumentParser
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

/// `--user`: the one account a maintenance command works on (default: every account).
struct UserScope: ParsableArguments {
    @Option(help: "Only this user (default: every user).")
    var user: Int64?
}

/// A maintenance command that runs one store operation per user and logs the total of what it
/// counts (`rebuild-feed`: feed rows, `recompute-stats`: dates).
protocol PerUserMaintenance: ParsableCommand {
    var scope: UserScope { get }
    /// The log line, and the name of what `count` counts.
    static var logged: (message: String, counted: String) { get }
    static func count(_ store: Store, userID: Int64) throws -> Int
}

extension PerUserMaintenance {
    func run() throws {
        let run = try MaintenanceRun(user: scope.user)
        var total = 0
        for userID in run.users { total += try Self.count(run.store, userID: userID) }
        run.logger.info("\(Self.logged.message)",
                        metadata: ["users": "\(run.users.count)", Self.logged.counted: "\(total)"])
    }
}
