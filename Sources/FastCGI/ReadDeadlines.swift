#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Dispatch
import Logging
import Synchronization

/// The total read deadline of each request (issue 19, item 8): from its first byte until its
/// params and body are in, however the bytes trickle in.
///
/// libfcgi reads a request with many `read(2)` calls, and `SO_RCVTIMEO`
/// (``FastCGIServerConfiguration/readTimeoutSeconds``) bounds each of them alone: a peer that
/// sends one byte just before each read times out held a worker for as long as it liked. Here a
/// worker arms its deadline when a request starts, and a watchdog thread shuts down the socket
/// of any request still being read when its deadline passes; libfcgi's next read then fails and
/// the worker drops the request (nothing was handled yet). The watchdog works on its own
/// duplicate of the descriptor, so it can never shut down a descriptor number that libfcgi has
/// closed and a new connection reuses.
final class ReadDeadlines: Sendable {
    private struct Armed {
        var fd: Int32
        var deadline: DispatchTime
    }

    private let seconds: Double
    private let armed: Mutex<[Int: Armed]>
    private let stopped = Atomic<Bool>(false)
    private let logger: Logger
    /// Connections closed because their request did not arrive in time.
    static let expired = Counter(label: "todosync_fastcgi_read_deadline_expired_total")

    init(seconds: Double, logger: Logger) {
        self.seconds = seconds
        self.logger = logger
        armed = Mutex([:])
    }

    /// Worker `worker` starts reading a request on `fd`.
    func arm(worker: Int, fd: Int32) {
        let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)  // dup(2) and FD_CLOEXEC in one call
        guard copy >= 0 else { return }  // out of descriptors: the per-read timeout still applies
        let previous = armed.withLock { $0.updateValue(Armed(fd: copy, deadline: .now() + seconds), forKey: worker) }
        if let previous { _ = close(previous.fd) }
    }

    /// Worker `worker` has its whole request (or gave up on it).
    func disarm(worker: Int) {
        if let entry = armed.withLock({ $0.removeValue(forKey: worker) }) { _ = close(entry.fd) }
    }

    /// Shuts down every connection whose request is past its deadline; returns how many.
    @discardableResult
    func expire(now: DispatchTime = .now()) -> Int {
        let late = armed.withLock { armed -> [Armed] in
            let late = armed.filter { $0.value.deadline <= now }
            for worker in late.keys { armed.removeValue(forKey: worker) }
            return Array(late.values)
        }
        for entry in late {
            _ = shutdown(entry.fd, Int32(SHUT_RDWR))
            _ = close(entry.fd)
        }
        if !late.isEmpty {
            Self.expired.increment(by: late.count)
            logger.warning(
                "FastCGI request not received within its total read deadline; connection closed",
                metadata: ["connections": "\(late.count)", "deadline_seconds": "\(seconds)"])
        }
        return late.count
    }

    /// Runs the watchdog until ``stop()``: checks four times per deadline, at least every 250 ms.
    func startWatchdog() throws(FastCGIServerError) -> PosixThread {
        let interval = useconds_t(min(max(seconds / 4, 0.01), 0.25) * 1_000_000)
        return try PosixThread.spawn { [self] in
            while !stopped.load(ordering: .acquiring) {
                usleep(interval)
                expire()
            }
            armed.withLock { armed in
                for entry in armed.values { _ = close(entry.fd) }
                armed.removeAll()
            }
        }
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
    }
}
