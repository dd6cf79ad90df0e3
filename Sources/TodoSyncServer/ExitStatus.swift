import Foundation
import Logging
import MariaDB

/// The exit codes of every `todosync` command: the one place they are defined (docs/OPERATIONS.md,
/// "Exit codes", lists them; Tests/integration/test_config_cli.py reads them from here). They
/// tell a supervisor or script what went wrong: one code per cause, sysexits(3) style, so that
/// `todosync config --check` before a restart, and systemd after one, can tell a wrong password
/// from a database that is down. `systemctl status` shows them as `(code=exited, status=78)`.
enum ExitStatus: Int32, CaseIterable {
    /// Done.
    case success = 0
    /// Broken in a way a retry will not fix: a bug, bad data, a failed check.
    case failure = 1
    /// An unknown option or subcommand (swift-argument-parser's own code, EX_USAGE; listed so
    /// that no other cause takes it).
    case usage = 64
    /// The database's migration state does not match the migration files (EX_DATAERR): a
    /// migration is pending (run `todosync migrate`), or one already applied was edited since
    /// (restore the file). `config --check`, `migrate` and `migrate --status`.
    case migrations = 65
    /// The database could not be reached or was busy (EX_TEMPFAIL): server down, socket
    /// missing, host unreachable. Retry later; systemd's `Restart=` does.
    case temporary = 75
    /// The database refused the account or its password (EX_NOPERM: MariaDB errors 1044,
    /// 1045, 1698). Fix the password (or the grant), then start again.
    case permission = 77
    /// The configuration is invalid (EX_CONFIG): a bad value, file or line, a `TODOSYNC_*` name
    /// no setting reads (`config --check`), a password file that cannot be read, a database
    /// name the server does not know. Fix it, then start again; the responder's unit does not
    /// restart on it (`RestartPreventExitStatus=`).
    case configuration = 78

    /// The status for a database session that could not be opened: the server refused the
    /// account or password (`permission`), named no such database (`configuration`), or could
    /// not be reached (`temporary`, the only one a retry can cure).
    static func forConnectFailure(_ error: DatabaseError) -> ExitStatus {
        switch error.code {
        case 1044, 1045, 1698: .permission  // access denied (to the database, for the user, by unix_socket)
        case 1049: .configuration           // unknown database
        default: .temporary
        }
    }

    /// Whether a fatal message is one JSON line (`serve`, whose stderr is the JSON log: issue 34,
    /// item 10) rather than `todosync: message` for a person at a terminal (the other commands).
    nonisolated(unsafe) static var reportsAsJSON = false

    /// Prints `todosync: message` on stderr and exits with `code`.
    static func fail(_ code: ExitStatus, _ message: String) -> Never {
        report(message, code: code)
        exit(code.rawValue)
    }

    /// Writes a fatal message on stderr, as a JSON log line (level critical, `exit_code`) when
    /// ``reportsAsJSON``, else as `todosync: message`.
    static func report(_ message: String, code: ExitStatus) {
        guard reportsAsJSON else {
            FileHandle.standardError.write(Data("todosync: \(message)\n".utf8))
            return
        }
        let logger = Logger(label: "todosync") { label in JSONLogHandler(label: label, level: .trace) }
        logger.critical("\(message)", metadata: ["exit_code": .stringConvertible(code.rawValue)])
    }
}
