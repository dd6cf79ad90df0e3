import FastCGI
import Foundation
import Logging
import MariaDB
import Synchronization

/// When `todosync serve` tells systemd `READY=1`: only once a database session with the
/// configured account has opened, so that `systemctl start`/`restart` (Type=notify) returns 0
/// only for a responder that can do more than answer 503 (issue 34, item 8: a wrong password
/// used to pass, and every instance then answered 503).
///
/// Started when the workers accept (they answer 503 while the database cannot be reached, as
/// during any outage). Then, with one session of its own:
/// - it opens: `READY=1`, and the session is closed (the workers have their own);
/// - the server cannot be reached (down, socket missing, host unreachable): the responder stays
///   "activating" with `STATUS=waiting for the database: <error>` and tries again (0.5 s, doubling
///   to 5 s), logging the error every 10 s. systemd's `TimeoutStartSec=` ends the wait: the start
///   fails visibly and `Restart=on-failure` tries again later;
/// - the server refuses the account or password, or knows no such database: nothing a retry can
///   cure. The server stops (its workers finish their requests; started by its socket, after
///   answering 503 for ``FaultHold/seconds``) and the process exits 77 or 78
///   (``ExitStatus/forConnectFailure(_:)``), which the unit's `RestartPreventExitStatus=` keeps
///   systemd from restarting in a loop.
final class DatabaseReadiness: Sendable {
    private struct State {
        var stopped = false
        var fatal: (status: ExitStatus, message: String)?
    }

    private let configuration: ConnectionConfiguration
    private let logger: Logger
    private let state = Mutex(State())

    init(configuration: ConnectionConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Starts probing on a thread of its own; `server` is stopped on a fatal refusal.
    func start(stopping server: FastCGIServer) {
        Thread.detachNewThread { [self] in probe(stopping: server) }
    }

    /// No `READY=1` after this (the server is stopping).
    func stop() {
        state.withLock { $0.stopped = true }
    }

    /// The exit status and message when the database refused the configuration, else nil.
    var fatal: (status: ExitStatus, message: String)? {
        state.withLock { $0.fatal }
    }

    private func probe(stopping server: FastCGIServer) {
        var delay = 0.5
        var lastLogged: Date?
        while !state.withLock({ $0.stopped }) {
            let connection = Connection(configuration: configuration)
            do {
                try connection.connect()
                connection.close()
                let ready = state.withLock { state in !state.stopped }
                if ready {
                    SystemdNotify.send("READY=1\nSTATUS=serving")
                    logger.info("ready: a database session opened", metadata: ["database": "\(configuration)"])
                }
                return
            } catch let error as DatabaseError {
                let status = ExitStatus.forConnectFailure(error)
                guard status == .temporary else {
                    let message = "cannot open a database session (\(configuration)): \(error)"
                    state.withLock { $0.fatal = (status, message) }
                    // Started by its socket: answer 503 a few seconds before exiting, so that
                    // nginx's next connections cannot restart it into systemd's start limit.
                    let hold = FaultHold.socketActivated ? FaultHold.seconds : 0
                    SystemdNotify.send("STATUS=not ready, exiting \(status.rawValue) in \(Int(hold)) s (answering 503): \(error)")
                    logger.critical("not ready: the database refused the configuration, stopping",
                                    metadata: ["db.error": "\(error.code)", "db.message": "\(error.message)",
                                               "exit_status": "\(status.rawValue)", "hold_seconds": "\(hold)"])
                    if hold > 0 { Thread.sleep(forTimeInterval: hold) }
                    server.requestShutdown()
                    return
                }
                SystemdNotify.send("STATUS=waiting for the database (answering 503): \(error)")
                if lastLogged.map({ Date().timeIntervalSince($0) >= 10 }) ?? true {
                    logger.error("not ready: waiting for the database",
                                 metadata: ["db.error": "\(error.code)", "db.message": "\(error.message)"])
                    lastLogged = Date()
                }
            } catch {
                SystemdNotify.send("STATUS=waiting for the database (answering 503): \(error)")
                logger.error("not ready: waiting for the database", metadata: ["error": "\(error)"])
            }
            Thread.sleep(forTimeInterval: delay)
            delay = min(delay * 2, 5)
        }
    }
}
