import Foundation
import TodoSyncConfig
import ArgumentParser
import FastCGI
import Logging
import MariaDB
import TodoSyncAPI
import TodoSyncCore
import TodoSyncStore

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the FastCGI responder until SIGTERM/SIGINT.")

    @Option(help: "Unix socket to listen on (default: $TODOSYNC_SOCKET or /tmp/todosync.sock).")
    var socket: String?

    @Option(help: ArgumentHelp(
        "Listen on TCP instead: IP:PORT or [IPV6]:PORT (default: $TODOSYNC_LISTEN). Combine with --allow.",
        valueName: "address"))
    var listen: String?

    @Option(help: ArgumentHelp(
        "Serve an inherited listening socket: 0 as spawn-fcgi passes it, 3 from systemd. Without any listen option, systemd's LISTEN_FDS and a listening socket on descriptor 0 are detected.",
        valueName: "fd"))
    var listenFd: Int32?

    @Option(help: ArgumentHelp(
        "Peers allowed to connect over TCP, comma-separated addresses or CIDR ranges (default: $TODOSYNC_ALLOW, else everyone).",
        valueName: "list"))
    var allow: String?

    @Option(help: "Worker threads, each with its own database connection (default: $TODOSYNC_WORKERS or 4 per online CPU core, 8 to 64; per responder process).")
    var workers: Int?

    @Option(help: "Group given to the socket file (default: $TODOSYNC_SOCKET_GROUP, else the process's); the socket is 0660.")
    var socketGroup: String?

    @Flag(help: "Enable test-only hooks (GET /healthz?delay_ms=N): the todosync-test build only; the shipping binary has none and refuses the flag.")
    var enableTestHooks = false

    /// A configuration problem found before serving (a bad value, a password file that cannot
    /// be read, a socket group that does not exist) ends the process with 78 (EX_CONFIG), which
    /// the unit does not restart (`RestartPreventExitStatus=78`); a database that refuses the
    /// account ends it with 77 or 78 once listening (``DatabaseReadiness``). Started by its
    /// socket, the responder answers 503 for a few seconds first (``FaultHold``).
    /// The hooks `--enable-test-hooks` asks for: those `todosync-test` linked in; the shipping
    /// binary has none, and the flag is a configuration error there (78).
    private func testHooks(injecting inject: String?) throws -> (any ApplicationTestHooks)? {
        // Bugs on purpose (`StoreFaults`) exist only in the test build with its hooks on: anywhere
        // else the variable is a mistake that must not pass for a working injection.
        if let inject, !enableTestHooks || TodoSyncCommand.testHooks == nil {
            throw ValidationError("TODOSYNC_TEST_INJECT=\(inject): injected bugs need the test build (todosync-test) with --enable-test-hooks; refusing to start")
        }
        guard enableTestHooks else { return nil }
        guard let hooks = TodoSyncCommand.testHooks else {
            throw ValidationError("--enable-test-hooks: this build has no test hooks (they are in todosync-test)")
        }
        return hooks
    }

    func run() throws {
        // Its stderr is the JSON log: a fatal message is a line of it too (TODOSYNC_LOG_FORMAT).
        ExitStatus.reportsAsJSON = ProcessInfo.processInfo.environment["TODOSYNC_LOG_FORMAT"] != "text"
        FaultHold.socketActivated = (listenFd == nil || listenFd == 3) && listen == nil && socket == nil
            && FastCGIListenAddress.systemdSocket(unsetEnvironment: false) != nil
        MallocTuning.apply(environment: ProcessInfo.processInfo.environment)
        let environment = Environment(onConfigurationError: FaultHold.exitForConfiguration)
        let logger = bootstrapLogging(environment)
        do {
            try serve(environment, logger: logger)
        } catch let error as ConfigurationError {
            FaultHold.exitForConfiguration("\(error)")
        } catch let error as ValidationError {
            FaultHold.exitForConfiguration("\(error)")
        }
    }

    private func serve(_ environment: Environment, logger: Logger) throws {
        let database = try environment.database
        let inject = environment.optionalString("TODOSYNC_TEST_INJECT")
        let hooks = try testHooks(injecting: inject)
        var configured = try environment.store
        do {
            configured.faults = try hooks?.storeFaults(inject ?? "", logger: logger) ?? StoreFaults()
        } catch {
            throw ValidationError("\(error)")
        }
        let storeConfiguration = configured
        let accountInFlight = try environment.int("TODOSYNC_ACCOUNT_IN_FLIGHT")
        guard accountInFlight >= 1 else {
            throw ConfigurationError(name: "TODOSYNC_ACCOUNT_IN_FLIGHT", value: "\(accountInFlight)")
        }
        let observability = try Observability(environment, logger: logger)
        // After Observability: its counters register with the metrics system it bootstraps.
        let livePublisher = try environment.optionalString("TODOSYNC_LIVE_PUBLISHER").map {
            LivePublisher(socketPath: $0, timeoutMilliseconds: try environment.int("TODOSYNC_LIVE_PUBLISH_TIMEOUT_MS"),
                          logger: logger)
        }
        // 0: no share (each account limited by its requests in flight only).
        let cpuShareMilliseconds = try environment.int("TODOSYNC_ACCOUNT_CPU_SHARE_MS")
        guard cpuShareMilliseconds >= 0 else {
            throw ConfigurationError(name: "TODOSYNC_ACCOUNT_CPU_SHARE_MS", value: "\(cpuShareMilliseconds)")
        }
        let share = cpuShareMilliseconds == 0 ? nil : AccountInFlight.Share(coreSeconds: Double(cpuShareMilliseconds) / 1000)
        let options = ApplicationOptions(
            testHooks: hooks, accountInFlight: AccountInFlight(limit: accountInFlight, share: share),
            livePublisher: livePublisher)
        var configuration = FastCGIServerConfiguration(
            socketPath: socket ?? environment.string("TODOSYNC_SOCKET"))
        configuration.listenAddress = try listenAddress(environment)
        let allowList = allow ?? environment.string("TODOSYNC_ALLOW")
        guard let allowedPeers = PeerAllowList(list: allowList) else {
            throw ValidationError("--allow / TODOSYNC_ALLOW: \(allowList) is not a list of IP addresses or CIDR ranges")
        }
        configuration.allowedPeers = allowedPeers
        configuration.workerCount = try workers ?? environment.int("TODOSYNC_WORKERS")
        // The socket is 0660: nginx reaches it as its owner or through this group.
        if let group = socketGroup ?? environment.optionalString("TODOSYNC_SOCKET_GROUP") {
            guard let entry = getgrnam(group) else {
                throw ValidationError("socket group '\(group)' does not exist")
            }
            configuration.socketGroupID = entry.pointee.gr_gid
        }
        configuration.readTimeoutSeconds = Double(
            try environment.int("TODOSYNC_FASTCGI_READ_TIMEOUT"))
        configuration.readDeadlineSeconds = Double(
            try environment.int("TODOSYNC_FASTCGI_READ_DEADLINE"))
        configuration.dispatchesConnections = environment.string("TODOSYNC_FASTCGI_DISPATCH") == "1"

        MariaDBLibrary.initialize()
        Store.prepareDecoyHash()
        logger.info("starting", metadata: [
            "listen": "\(configuration.effectiveListenAddress)", "workers": "\(configuration.workerCount)",
            "database": "\(database)",
        ])
        let server = FastCGIServer(configuration: configuration, logger: logger)
        let retryLog = Self.logTransactionRetries(
            every: max(try environment.int("TODOSYNC_RETRY_LOG_SECONDS"), 1), logger: logger)
        defer {
            retryLog.cancel()
            let counts = TransactionRetryStatistics.current
            if !counts.isZero { logger.notice("transaction retries since start: \(counts)") }
        }
        let startedWith = environment.configuration
        let readiness = DatabaseReadiness(configuration: database, logger: logger)
        defer {
            readiness.stop()
            if let fatal = readiness.fatal { ExitStatus.fail(fatal.status, fatal.message) }
        }
        try server.run(onReload: { Self.reload(runningWith: startedWith, logger: logger) },
                       onListening: { readiness.start(stopping: server) }) { workerIndex in
            var workerLogger = logger
            workerLogger[metadataKey: "worker"] = "\(workerIndex)"
            let store = Store(connection: Connection(configuration: database), configuration: storeConfiguration)
            let application = Application(store: store, logger: workerLogger, options: options)
            let observer = observability.observer(for: application, logger: workerLogger)
            let encoder = application.encoder
            return { request in
                let response = encoder.encode(
                    observer.handle(HTTPRequest(request), requestID: request.header("X-Request-Id")),
                    acceptEncoding: request.header("Accept-Encoding"))
                return FastCGIResponse(response)
            }
        }
        logger.info("stopped")
    }

    /// Logs the transaction retry counters (deadlocks, Galera certification failures, …) every
    /// `seconds` when they changed.
    /// SIGHUP (`systemctl reload`, `sv hup`): reads the configuration again (file and
    /// environment) and applies what can change while requests are served, the log level; it names
    /// every other changed setting as needing a restart. An invalid configuration changes nothing.
    /// Requests in flight are not touched. (Logs need no reopening: the runners and logrotate
    /// append to or copy-truncate the files the process writes through stderr.)
    static func reload(runningWith running: LayeredConfiguration, logger: Logger) {
        let fresh = Environment(validating: false).configuration
        let problems = fresh.problems()
        guard problems.isEmpty else {
            logger.error("reload refused: invalid configuration, nothing changed", metadata: ["problems": "\(problems)"])
            return
        }
        let level = Logger.Level(rawValue: fresh.value("TODOSYNC_LOG_LEVEL") ?? "info") ?? .info
        let previous = LogLevelControl.level
        LogLevelControl.level = level
        let needRestart = fresh.entries().filter { entry in
            entry.isKnown && entry.name != "TODOSYNC_LOG_LEVEL"
                && running.lookup(entry.name).value != fresh.lookup(entry.name).value
        }.map(\.name)
        logger.notice("reloaded", metadata: [
            "log_level": "\(previous) -> \(level)",
            "restart_needed_for": "\(needRestart.joined(separator: ","))",
        ])
    }

    private static func logTransactionRetries(every seconds: Int, logger: Logger) -> DispatchSourceTimer {
        let timer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "todosync.retry-log"))
        nonisolated(unsafe) var last = TransactionRetryStatistics.Counts()
        timer.schedule(deadline: .now() + .seconds(seconds), repeating: .seconds(seconds))
        timer.setEventHandler {
            let counts = TransactionRetryStatistics.current
            if counts != last {
                logger.notice("transaction retries since start: \(counts)")
                last = counts
            }
        }
        timer.resume()
        return timer
    }

    /// The listener, first match wins: `--listen-fd`, `--listen`, `--socket`, systemd socket
    /// activation, a listening socket on descriptor 0 (spawn-fcgi), `$TODOSYNC_LISTEN`; nil means
    /// the unix socket (`$TODOSYNC_SOCKET` or the default path).
    private func listenAddress(_ environment: Environment) throws -> FastCGIListenAddress? {
        if let listenFd { return .inherited(fd: listenFd) }
        if let listen { return try Self.parseListen(listen, source: "--listen") }
        if socket != nil { return nil }
        if let systemd = FastCGIListenAddress.systemdSocket() { return systemd }
        if let spawned = FastCGIListenAddress.inheritedStandardInput() { return spawned }
        let configured = environment.string("TODOSYNC_LISTEN")
        if !configured.isEmpty { return try Self.parseListen(configured, source: "TODOSYNC_LISTEN") }
        return nil
    }

    private static func parseListen(_ text: String, source: String) throws -> FastCGIListenAddress {
        guard let address = FastCGIListenAddress.parseTCP(text) else {
            throw ValidationError("\(source): \(text) is not IP:PORT or [IPV6]:PORT")
        }
        return address
    }
}

extension FastCGIResponse {
    /// Adapts an application response, a streamed body included.
    init(_ response: HTTPResponse) {
        let headers = response.headers.map { (name: $0.name, value: $0.value) }
        guard let stream = response.stream else {
            self.init(status: response.status, headers: headers, body: response.body)
            return
        }
        self.init(status: response.status, headers: headers, stream: FastCGIBodyStream { write in
            // The application's streams answer their errors themselves (`Application`); a throw
            // that still got here can only cut the body off.
            switch (try? stream.produce(write)) ?? .cutOff {
            case .complete: .complete
            case .cutOff: .cutOff
            case .instead(let other): .instead(FastCGIResponse(other))
            }
        })
    }
}

extension HTTPRequest {
    /// Adapts a FastCGI request: CGI `HTTP_*` params become headers; the path is nginx's
    /// normalised `DOCUMENT_URI` when present.
    init(_ request: FastCGIRequest) {
        var headers: [String: String] = [:]
        for (name, value) in request.parameters {
            if name.hasPrefix("HTTP_") {
                headers[Self.headerName(cgiName: name)] = value
            } else if name == "CONTENT_TYPE", !value.isEmpty {
                headers["content-type"] = value
            } else if name == "CONTENT_LENGTH", !value.isEmpty {
                headers["content-length"] = value
            }
        }
        let path = request.parameters["DOCUMENT_URI"].flatMap { $0.isEmpty ? nil : $0 } ?? request.path
        self.init(method: request.method, path: path, queryString: request.queryString, headers: headers,
                  body: request.body, bodyTooLarge: request.bodyTooLarge,
                  clientAddress: request.parameters["REMOTE_ADDR"] ?? "")
    }

    /// `HTTP_IF_MATCH` -> `if-match`, byte by byte: Foundation's `replacingOccurrences` went through
    /// NSString and cost about 40,000 instructions per request (callgrind, bench/observability_cost.py).
    static func headerName(cgiName name: String) -> String {
        String(decoding: name.utf8.dropFirst(5).map { byte -> UInt8 in
            switch byte {
            case UInt8(ascii: "_"): UInt8(ascii: "-")
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte + 32
            default: byte
            }
        }, as: UTF8.self)
    }
}
