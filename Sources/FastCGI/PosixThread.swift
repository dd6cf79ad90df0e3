#if canImport(Glibc)
import Glibc
#endif

/// A joinable pthread running a Swift closure (Foundation's `Thread` cannot be joined).
struct PosixThread: Sendable {
    let handle: pthread_t

    /// Starts `body` on a new thread, which inherits the caller's signal mask.
    static func spawn(_ body: @escaping @Sendable () -> Void) throws(FastCGIServerError) -> PosixThread {
        let context = Unmanaged.passRetained(ThreadContext(body: body)).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { rawContext in
            let context = Unmanaged<ThreadContext>.fromOpaque(rawContext!).takeRetainedValue()
            context.body()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<ThreadContext>.fromOpaque(context).release()
            throw .systemCallFailed(operation: "pthread_create", errno: result)
        }
        return PosixThread(handle: handle)
    }

    /// Waits for the thread to finish.
    func join() {
        _ = pthread_join(handle, nil)
    }

    /// Lets the thread finish on its own; it must not be joined afterwards.
    func detach() {
        _ = pthread_detach(handle)
    }

    /// Delivers `signal` to this thread (which must not have finished being joined).
    func send(signal: Int32) {
        _ = pthread_kill(handle, signal)
    }
}

private final class ThreadContext {
    let body: @Sendable () -> Void

    init(body: @escaping @Sendable () -> Void) {
        self.body = body
    }
}
