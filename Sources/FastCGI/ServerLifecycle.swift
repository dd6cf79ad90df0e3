#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Synchronization

/// Shared, thread-safe state of one server run: the single shutdown path used by the signal
/// thread, tests and workers, plus the notifications `run` waits on.
final class ServerLifecycle: Sendable {
    private struct State {
        var started = false
        var shutdownRequested = false
        var listener: Listener?
        var wakeWriteFD: Int32 = -1
    }

    private let state = Mutex(State())
    private let stopping = Atomic<Bool>(false)
    private let shutdownRequested = DispatchSemaphore(value: 0)
    private let workerExited = DispatchSemaphore(value: 0)

    /// True once shutdown has begun; workers then close kept connections after each response.
    var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// Marks the server as started; false if it already was.
    func markStarted() -> Bool {
        state.withLock { state in
            if state.started { return false }
            state.started = true
            return true
        }
    }

    /// Makes the listener and wake pipe reachable from ``requestShutdown()``. If shutdown was
    /// requested earlier, applies it now.
    func attach(listener: Listener, wakeWriteFD: Int32) {
        state.withLock { state in
            state.listener = listener
            state.wakeWriteFD = wakeWriteFD
            if state.shutdownRequested { Self.interrupt(listener: listener, wakeWriteFD: wakeWriteFD) }
        }
    }

    /// Forgets the descriptors (before they are closed) so a late request cannot touch them.
    func detach() {
        state.withLock { state in
            state.listener = nil
            state.wakeWriteFD = -1
        }
    }

    /// Starts a graceful shutdown once; later calls do nothing. Returns whether this call started it.
    @discardableResult
    func requestShutdown() -> Bool {
        let first = state.withLock { state in
            if state.shutdownRequested { return false }
            state.shutdownRequested = true
            stopping.store(true, ordering: .releasing)
            if let listener = state.listener { Self.interrupt(listener: listener, wakeWriteFD: state.wakeWriteFD) }
            return true
        }
        if first { shutdownRequested.signal() }
        return first
    }

    /// Blocks until ``requestShutdown()`` has been called.
    func waitForShutdownRequest() {
        shutdownRequested.wait()
    }

    /// Called by each worker thread as its last action.
    func workerDidExit() {
        workerExited.signal()
    }

    /// Waits until `count` workers have exited or `deadline` passes; returns how many exited.
    func waitForWorkers(count: Int, deadline: DispatchTime) -> Int {
        var exited = 0
        while exited < count, workerExited.wait(timeout: deadline) == .success { exited += 1 }
        return exited
    }

    /// Makes accept fail once the queue is empty (see ``Listener``) and wakes workers idle on kept
    /// connections (wake pipe). Workers blocked in accept on TCP are woken by `run`.
    private static func interrupt(listener: Listener, wakeWriteFD: Int32) {
        listener.stopAccepting()
        if wakeWriteFD >= 0 {
            var byte: UInt8 = 1
            _ = write(wakeWriteFD, &byte, 1)
        }
    }
}

/// A pipe that becomes readable, for every poller at once, when shutdown begins. It is written
/// once and never drained.
struct WakePipe: Sendable {
    let readFD: Int32
    let writeFD: Int32

    init() throws(FastCGIServerError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw .systemCallFailed(operation: "pipe", errno: errno) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        readFD = fds[0]
        writeFD = fds[1]
    }

    func close() {
        _ = Glibc.close(readFD)
        _ = Glibc.close(writeFD)
    }
}
