#if canImport(Glibc)
import Glibc
#endif
import Logging
import Synchronization

/// The signals the server handles, and the mask that routes them to one thread.
///
/// libfcgi's `FCGX_Init` installs a SIGTERM handler that only sets a private "shutdown pending"
/// flag. Blocking SIGTERM and SIGINT in every thread and `sigwait`ing for them on a dedicated
/// thread means that handler never runs and the signal reaches ``FastCGIServer/requestShutdown()``.
/// SIGHUP (what `systemctl reload` and `sv hup` send) asks for a reload
/// (``FastCGIServer/run(onReload:makeHandler:)``); SIGUSR1 and SIGUSR2 are logged and ignored.
/// Their default action is to end the process, which killed a responder mid-request.
enum ShutdownSignals {
    static let numbers: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2]

    /// Whether `number` asks the server to stop (the others do not).
    static func isShutdown(_ number: Int32) -> Bool { number == SIGTERM || number == SIGINT }

    static var set: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for number in numbers { sigaddset(&set, number) }
        return set
    }

    /// Blocks the shutdown signals in the calling thread (threads it creates inherit this) and
    /// returns the previous mask.
    @discardableResult
    static func blockInCurrentThread() -> sigset_t {
        var set = Self.set
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &set, &previous)
        return previous
    }

    /// Restores a mask returned by ``blockInCurrentThread()``.
    static func restore(_ mask: sigset_t) {
        var mask = mask
        pthread_sigmask(SIG_SETMASK, &mask, nil)
    }

    static func name(of number: Int32) -> String {
        switch number {
        case SIGTERM: return "SIGTERM"
        case SIGINT: return "SIGINT"
        case SIGHUP: return "SIGHUP"
        case SIGUSR1: return "SIGUSR1"
        case SIGUSR2: return "SIGUSR2"
        default: return "signal \(number)"
        }
    }
}

/// A thread that `sigwait`s for the shutdown signals and reports each one.
///
/// Must be started from a thread that already blocks ``ShutdownSignals``. ``stop()`` wakes it with
/// a thread-directed SIGTERM, which only that thread can receive because it blocks the signal too.
final class SignalWatcher: Sendable {
    private let thread: PosixThread
    private let state: State

    private final class State: Sendable {
        let stopped = Atomic<Bool>(false)
    }

    private init(thread: PosixThread, state: State) {
        self.thread = thread
        self.state = state
    }

    static func start(
        logger: Logger, onSignal: @escaping @Sendable (Int32) -> Void
    ) throws(FastCGIServerError) -> SignalWatcher {
        let state = State()
        let thread = try PosixThread.spawn {
            var set = ShutdownSignals.set
            while true {
                var number: Int32 = 0
                let result = sigwait(&set, &number)
                if state.stopped.load(ordering: .acquiring) { return }
                guard result == 0 else {
                    logger.error("sigwait failed", metadata: ["errno": "\(result)"])
                    continue
                }
                if ShutdownSignals.isShutdown(number) {
                    logger.notice("received shutdown signal", metadata: ["signal": "\(ShutdownSignals.name(of: number))"])
                } else {
                    logger.notice("received signal", metadata: ["signal": "\(ShutdownSignals.name(of: number))"])
                }
                onSignal(number)
            }
        }
        return SignalWatcher(thread: thread, state: state)
    }

    /// Stops and joins the watcher thread.
    func stop() {
        state.stopped.store(true, ordering: .releasing)
        thread.send(signal: SIGTERM)
        thread.join()
    }
}
