import ArgumentParser
import Logging
import MariaDB
import TodoSyncStore

/// Part of every restore from backup: see docs/OPERATIONS.md "Restore".
struct NewEpoch: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "new-epoch",
        abstract: "Start a new sync history after restoring the database from a backup.",
        discussion: """
            A restore rewinds every user's change sequence, so pull cursors that devices got before \
            it could name positions that new changes reuse. This gives the database a new epoch: \
            every earlier cursor is then answered with 410 cursor_expired and the device pulls \
            again from the start. Run it right after the restore, before the responders serve again.
            """)

    func run() throws {
        let environment = Environment()
        let logger = bootstrapLogging(environment)
        MariaDBLibrary.initialize()
        let store = try environment.connectedStore()
        let previous = try store.epoch()
        let epoch = try store.renewEpoch()
        logger.notice("new sync epoch", metadata: ["previous": "\(String(previous, radix: 16))",
                                                    "epoch": "\(String(epoch, radix: 16))"])
        print(String(epoch, radix: 16))
    }
}
