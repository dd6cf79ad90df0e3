import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One URLSession task awaited by one Swift task, and the one way this library stops waiting
/// for a request (`URLSessionTransport.send`, `FileDownload`).
///
/// The platform bugs (FoundationNetworking, swift-corelibs-foundation on Linux, Swift 6.3.1):
/// - **A deadlock** (upstream issue #5412, fixed by PR #5417, not in 6.3.1):
///   `URLSessionTask.cancel()` waits synchronously for the task's work queue. A Swift task's
///   cancellation handler runs while that Swift task's status lock is held; if the work queue is
///   at that moment finishing the transfer and resumes the same Swift task, it needs that lock:
///   each thread waits for the other and the process hangs for good. `URLSession.data(for:)`
///   cancels from such a handler, so cancelling a Swift task suspended in it (a timeout race, a
///   failed `async let` sibling, `SyncEngine.stop()`) hangs; seen in the friends stack test.
/// - **A crash**, once the cancel is moved off the handler: a cancel that lands while the
///   transfer completes queues a failure for a task the session has already dropped, and
///   FoundationNetworking stops the process ("Trying to access a behaviour for a task that in not
///   in the registry", `URLSessionCancelTests` hit it within seconds).
///
/// So on Linux a request is never cancelled: `abandon()` resumes the waiting Swift task at once
/// with `CancellationError`, and the URLSession task runs to its end by itself (bounded by the
/// request's `timeoutInterval`), its answer dropped. This is the friends code's first
/// workaround (let both reads finish) made the rule for every request. Where URLSession is
/// Apple's, `abandon()` also cancels the task. A live stream cannot be left to end by itself:
/// `cancelLater` (see `URLSessionLiveStream`; Linux's default stream is libcurl's).
final class URLSessionCall<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, Error>?
    private var task: URLSessionTask?
    private var abandoned = false
    private var finished = false

    /// Call inside `withCheckedThrowingContinuation`: starts `task`, whose end must call
    /// `finish`. Abandoned already: the task is cancelled before it ever ran (nothing can be
    /// completing it) and the caller hears `CancellationError`.
    func start(_ task: URLSessionTask, _ continuation: CheckedContinuation<Value, Error>) {
        let abandoned = lock.withLock {
            self.task = task
            if !self.abandoned { self.continuation = continuation }
            return self.abandoned
        }
        if abandoned {
            task.cancel()
            continuation.resume(throwing: CancellationError())
        } else {
            task.resume()
        }
    }

    /// The task's end: resumes the caller, unless it stopped waiting.
    func finish(_ result: Result<Value, Error>) {
        let continuation = lock.withLock {
            finished = true
            defer { self.continuation = nil }
            return self.continuation
        }
        continuation?.resume(with: result)
    }

    /// The caller stops waiting (from a cancellation handler: safe under any lock): it hears
    /// `CancellationError` now; the task runs to its end (Linux) or is cancelled (Apple).
    func abandon() {
        let (continuation, task) = lock.withLock {
            abandoned = true
            defer { self.continuation = nil }
            return (self.continuation, finished ? nil : self.task)
        }
        continuation?.resume(throwing: CancellationError())
        #if !canImport(FoundationNetworking)
        task?.cancel()
        #else
        _ = task
        #endif
    }

    /// Whether the caller stopped waiting (a download then stops writing).
    var isAbandoned: Bool { lock.withLock { abandoned } }
}

/// The cancels that cannot be avoided (a live stream's end), off the caller's thread: called
/// from a cancellation handler or a stream's `onTermination`, `URLSessionTask.cancel()` would
/// wait for URLSession's work queue under the Swift task's lock (the deadlock above).
enum URLSessionCancel {
    private static let queue = DispatchQueue(label: "TodoSyncClient.URLSessionCancel")

    static func cancelLater(_ task: URLSessionTask) {
        queue.async { task.cancel() }
    }

    static func invalidateLater(_ session: URLSession) {
        queue.async { session.invalidateAndCancel() }
    }
}
