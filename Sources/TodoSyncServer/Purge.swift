import ArgumentParser
import Logging
import MariaDB
import TodoSyncStore

struct Purge: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Remove tombstones and push results older than the retention horizon, expired tokens and old Idempotency-Keys; erase deleted accounts.")

    @Option(help: "Retention in days (default: $TODOSYNC_TOMBSTONE_RETENTION_DAYS or 90).")
    var retentionDays: Int?

    @Option(help: "Retention in seconds; overrides --retention-days (for tests).")
    var retentionSeconds: Int64?

    func run() throws {
        let environment = Environment()
        let logger = bootstrapLogging(environment)
        MariaDBLibrary.initialize()
        let days = try retentionDays ?? environment.int("TODOSYNC_TOMBSTONE_RETENTION_DAYS")
        let store = try environment.connectedStore(withStoreConfiguration: true)
        let report = try store.purge(retentionSeconds: retentionSeconds ?? Int64(days) * 86400)
        logger.info("purged", metadata: [
            "tombstones": "\(report.tombstones)", "operations": "\(report.operations)", "tokens": "\(report.tokens)",
            "idempotencyKeys": "\(report.idempotencyKeys)", "accountsErased": "\(report.accountsErased)",
            "accountRowsErased": "\(report.accountRowsErased)",
        ])
        print(report)
    }
}
