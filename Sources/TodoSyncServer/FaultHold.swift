import FastCGI
import Foundation
import Logging

/// How long a responder started by its systemd socket holds a fault that no restart can fix
/// (exit 77 or 78) before it exits. Exiting at once is not enough even with the unit's
/// `RestartPreventExitStatus=77 78`: the next connection nginx makes to the socket starts the
/// responder again, and 5 starts in 10 s hit systemd's start limit, which fails the socket too
/// (`service-start-limit-hit`: the socket file is removed and must be started again by hand).
/// Drilled under systemd 252 with 20 clients: without the hold the socket failed within 15 s;
/// a start that lasts at least 2.5 s cannot reach 5 in 10 s, so the socket keeps listening.
/// Meanwhile requests are answered 503 `unavailable` (nothing applied, retry later), and
/// `systemctl restart` reports the failure once the hold ends.
enum FaultHold {
    static let seconds: Double = 5

    /// Whether the process was started by its socket (systemd's `LISTEN_FDS`): set by ``Serve``
    /// first thing, before it takes the socket and clears the variables.
    nonisolated(unsafe) static var socketActivated = false

    /// A configuration error found before the responder could start (exit 78): printed on
    /// stderr at once; started by its socket, the responder then answers every request on that
    /// socket 503 for ``seconds`` before it exits.
    static func exitForConfiguration(_ message: String) -> Never {
        ExitStatus.report(message, code: .configuration)
        if socketActivated {
            SystemdNotify.send("STATUS=configuration error, exiting 78 in \(Int(seconds)) s (answering 503): \(message.prefix(200))")
            answerUnavailable(on: .inherited(fd: 3), for: seconds)
        }
        exit(ExitStatus.configuration.rawValue)
    }

    /// Serves 503 `unavailable` on `listen` for `seconds` with two workers, then returns.
    private static func answerUnavailable(on listen: FastCGIListenAddress, for seconds: Double) {
        var configuration = FastCGIServerConfiguration(socketPath: "")
        configuration.listenAddress = listen
        configuration.workerCount = 2
        configuration.shutdownGraceSeconds = 1
        let server = FastCGIServer(configuration: configuration, logger: Logger(label: "todosync.fault-hold"))
        let body = Array(#"{"error":{"code":"unavailable","message":"The service is not configured correctly; retry later."}}"#.utf8)
        try? server.run(onListening: {
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { server.requestShutdown() }
        }) { _ in
            { _ in
                FastCGIResponse(status: 503, headers: [("Content-Type", "application/json"), ("Retry-After", "\(Int(seconds))")],
                                body: body)
            }
        }
    }
}
