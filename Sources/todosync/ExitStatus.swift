import Foundation
import MariaDB

/// The exit codes of every `todosync` command: the one place they are defined (docs/OPERATIONS.md,
/// "Exit codes", lists them). They tell a supervisor or script whether to retry later or to stop
/// and fix something.
enum ExitStatus: Int32 {
    /// Done.
    case success = 0
    /// Broken in a way a retry will not fix: a bug, bad data, a failed check.
    case failure = 1
    /// The database could not be reached or was busy (EX_TEMPFAIL): retry later.
    case temporary = 75
    /// The configuration is invalid (EX_CONFIG): fix it, then start again.
    case configuration = 78

    /// The status for a database that could not be reached: `configuration` when the server
    /// refused the account, password or database name (a retry cannot help), else `temporary`.
    static func forConnectFailure(_ error: DatabaseError) -> ExitStatus {
        // 1044/1045/1698: access denied; 1049: unknown database.
        [1044, 1045, 1049, 1698].contains(error.code) ? .configuration : .temporary
    }

    /// Prints `todosync: message` on stderr and exits with `code`.
    static func fail(_ code: ExitStatus, _ message: String) -> Never {
        FileHandle.standardError.write(Data("todosync: \(message)\n".utf8))
        exit(code.rawValue)
    }
}
