#if canImport(Glibc)
import Glibc
#endif
import CFastCGI
import Dispatch
import Logging

/// A FastCGI responder on a unix socket, a TCP socket or an inherited listening socket, served by a fixed pool of worker threads (libfcgi).
///
/// Each worker owns its `FCGX_Request` and the handler made for it, so handlers may hold
/// thread-confined resources such as a database connection. Workers accept concurrently on the
/// shared socket, without an accept mutex.
public final class FastCGIServer: Sendable {
    /// The configuration the server was created with.
    public let configuration: FastCGIServerConfiguration
    private let logger: Logger
    private let lifecycle = ServerLifecycle()

    /// Creates a server; nothing happens until ``run(makeHandler:)``.
    public init(configuration: FastCGIServerConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
    }

    /// Blocks until SIGTERM/SIGINT, then stops accepting, lets in-flight requests finish (up to the
    /// grace period), removes the socket file and returns. `makeHandler` runs once on each worker
    /// thread; the handler it returns is only ever called on that thread. SIGHUP calls `onReload`
    /// on the signal thread while the workers go on serving; SIGUSR1/SIGUSR2 are logged only.
    ///
    /// The shutdown signals are blocked in the calling thread (restored on return) and in every
    /// thread started here, and received by a dedicated `sigwait` thread. Threads created *before*
    /// `run` do not inherit that mask: call ``blockShutdownSignals()`` first thing in `main`, or
    /// call `run` before starting other threads, so a signal cannot land on them instead.
    ///
    /// Throws ``FastCGIServerError`` if the server cannot start (for example when another live
    /// process serves the socket path, or a worker thread cannot be created).
    ///
    /// `onListening` runs once every worker accepts. Without it the server tells systemd
    /// `READY=1` itself at that moment; with it, readiness is the caller's to send
    /// (``SystemdNotify``), e.g. only once a database session works, so that `systemctl
    /// restart` does not report success for a responder that can only answer 503.
    public func run(
        onReload: @escaping @Sendable () -> Void = {},
        onListening: (@Sendable () -> Void)? = nil,
        makeHandler: @escaping @Sendable (_ workerIndex: Int) -> (FastCGIRequest) -> FastCGIResponse
    ) throws {
        try configuration.validate()
        guard lifecycle.markStarted() else { throw FastCGIServerError.alreadyStarted }

        let initResult = FCGX_Init()
        guard initResult == 0 else { throw FastCGIServerError.libraryInitializationFailed(code: initResult) }

        let listener = try Listener.open(
            configuration.effectiveListenAddress, mode: configuration.socketMode, group: configuration.socketGroupID,
            backlog: configuration.backlog)
        let wakePipe: WakePipe
        do { wakePipe = try WakePipe() } catch {
            listener.close()
            throw error
        }

        let previousMask = ShutdownSignals.blockInCurrentThread()
        defer { ShutdownSignals.restore(previousMask) }

        let watcher: SignalWatcher
        do {
            watcher = try SignalWatcher.start(logger: logger) { [lifecycle] number in
                if ShutdownSignals.isShutdown(number) {
                    lifecycle.requestShutdown()
                } else if number == SIGHUP {
                    onReload()
                }
            }
        } catch {
            wakePipe.close()
            listener.close()
            throw error
        }
        defer { watcher.stop() }
        lifecycle.attach(listener: listener, wakeWriteFD: wakePipe.writeFD)

        let readDeadlines = ReadDeadlines(seconds: configuration.readDeadlineSeconds, logger: logger)
        let watchdog: PosixThread
        do { watchdog = try readDeadlines.startWatchdog() } catch {
            wakePipe.close()
            listener.close()
            throw error
        }
        defer {
            readDeadlines.stop()
            watchdog.join()
        }

        var dispatcher: ConnectionDispatcher?
        var dispatcherThread: PosixThread?
        if configuration.dispatchesConnections {
            do {
                let made = try ConnectionDispatcher(
                    listener: listener, wakeFD: wakePipe.readFD, configuration: configuration, lifecycle: lifecycle,
                    logger: logger)
                dispatcherThread = try PosixThread.spawn { [workerCount = configuration.workerCount] in
                    made.run(workerCount: workerCount)
                }
                dispatcher = made
            } catch {
                readDeadlines.stop()
                wakePipe.close()
                listener.close()
                throw error
            }
        }

        var workers: [PosixThread] = []
        var spawnError: FastCGIServerError?
        workers.reserveCapacity(configuration.workerCount)
        for index in 0..<configuration.workerCount {
            var worker = Worker(
                index: index, listenFD: listener.fd, setsNoDelay: listener.acceptsTCP, wakeFD: wakePipe.readFD,
                maxBodyBytes: configuration.maxBodyBytes, allowedPeers: configuration.allowedPeers,
                readTimeoutSeconds: configuration.readTimeoutSeconds,
                writeTimeoutSeconds: configuration.writeTimeoutSeconds, readDeadlines: readDeadlines,
                idleMilliseconds: Int32(min(configuration.readDeadlineSeconds * 1000, Double(Int32.max))),
                lifecycle: lifecycle, logger: workerLogger(index))
            worker.dispatcher = dispatcher
            do {
                workers.append(try PosixThread.spawn { [lifecycle, worker] in
                    worker.run(makeHandler: makeHandler)
                    lifecycle.workerDidExit()
                })
            } catch {
                logger.critical("could not start FastCGI worker thread", metadata: ["error": "\(error)"])
                spawnError = error
                lifecycle.requestShutdown()
                break
            }
        }

        WorkerMetrics.total.set(workers.count)
        logger.info(
            "FastCGI server listening",
            metadata: [
                "listen": "\(listener.address)", "workers": "\(workers.count)",
                "socket_mode": "\(String(configuration.socketMode, radix: 8))",
                "allowed_peers": "\(configuration.allowedPeers)",
                "kept_connections": "\(dispatcher == nil ? "bound to workers" : "dispatched")",
            ])
        // Under systemd (Type=notify), a start or restart completes only now that workers accept
        // (or later, when the caller decides readiness).
        if spawnError == nil {
            if let onListening { onListening() } else { SystemdNotify.send("READY=1") }
        }

        lifecycle.waitForShutdownRequest()
        SystemdNotify.send("STOPPING=1")
        logger.info(
            "FastCGI server stopping: no longer accepting, finishing in-flight requests",
            metadata: ["grace_seconds": "\(configuration.shutdownGraceSeconds)"])

        let deadline = DispatchTime.now() + configuration.shutdownGraceSeconds
        let exited = dispatcher == nil
            ? waitForWorkers(workers.count, listener: listener, deadline: deadline)
            : lifecycle.waitForWorkers(count: workers.count, deadline: deadline)  // the dispatcher releases them
        if exited == workers.count {
            // A worker exits only once the dispatcher has stopped using the listener.
            dispatcherThread?.join()
            for worker in workers { worker.join() }
            lifecycle.detach()
            wakePipe.close()
            listener.close()
            logger.info("FastCGI server stopped")
        } else {
            // Stragglers still run a handler; they exit on their own and must keep their
            // descriptors valid, so only the socket file is removed.
            for worker in workers { worker.detach() }
            dispatcherThread?.detach()
            lifecycle.detach()
            listener.unlinkOnly()
            logger.warning(
                "FastCGI server stopped with requests still in flight after the grace period",
                metadata: ["busy_workers": "\(workers.count - exited)"])
        }
        if let spawnError { throw spawnError }
    }

    /// Waits for the workers to exit; on TCP and inherited sockets, wakes those blocked in accept
    /// with empty connections every 100 ms (see ``Listener``). Returns how many exited.
    private func waitForWorkers(_ count: Int, listener: Listener, deadline: DispatchTime) -> Int {
        guard listener.needsWakeConnections else {
            return lifecycle.waitForWorkers(count: count, deadline: deadline)
        }
        var exited = 0
        while exited < count {
            listener.wake(count: count - exited)
            let step = min(deadline, DispatchTime.now() + 0.1)
            exited += lifecycle.waitForWorkers(count: count - exited, deadline: step)
            if DispatchTime.now() >= deadline { break }
        }
        return exited
    }

    /// Starts a graceful shutdown, exactly as SIGTERM does: stop accepting (connections already
    /// queued are still served), finish in-flight requests, then ``run(makeHandler:)`` returns.
    /// Safe to call from any thread, any number of times. If called before `run`, `run` returns
    /// as soon as it has started.
    public func requestShutdown() {
        if lifecycle.requestShutdown() {
            logger.info("FastCGI server shutdown requested")
        }
    }

    /// Blocks SIGTERM and SIGINT in the calling thread, so that threads it creates later inherit
    /// the mask and the signals reach ``run(makeHandler:)``'s signal thread. Call it at the top of
    /// the serve path, before anything (a database pool, Dispatch) starts threads. Only use it in a
    /// process that then calls `run`: otherwise SIGTERM and Ctrl-C stay blocked.
    public static func blockShutdownSignals() {
        ShutdownSignals.blockInCurrentThread()
    }

    private func workerLogger(_ index: Int) -> Logger {
        var logger = logger
        logger[metadataKey: "fastcgi.worker"] = "\(index)"
        return logger
    }
}
