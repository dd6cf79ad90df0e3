import Foundation

/// Time as the sync's waits see it: retry backoff and the sync's overall bound. Tests pass a
/// clock that jumps instead of sleeping. (A request's own timeout is real time: it bounds a real
/// network wait.)
public protocol SyncClock: Sendable {
    /// Seconds on a monotonic scale (only differences mean anything).
    var now: Double { get }
    /// Waits `seconds`; throws `CancellationError` when the task is cancelled.
    func sleep(seconds: Double) async throws
}

/// The system's monotonic clock.
public struct SystemSyncClock: SyncClock {
    public init() {}

    public var now: Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    public func sleep(seconds: Double) async throws {
        guard seconds > 0 else { return }
        try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
    }
}

/// How long the client waits for the server (docs/CLIENT-SETTINGS.md).
public struct SyncTimeouts: Sendable, Equatable {
    /// Seconds one request may take, from sending it to the last byte of the answer. A request
    /// that times out is not resent: the call ends with `SyncError.timedOut`, and the outbox
    /// keeps every change for the next sync.
    public var request: Double
    /// Seconds one `sync()` (or account call) may take in all, retries and backoff included.
    public var sync: Double

    public init(request: Double = 30, sync: Double = 300) {
        self.request = request
        self.sync = sync
    }
}

/// When a call must be over (on `SyncClock`'s scale), and the bound it came from.
struct SyncDeadline: Sendable {
    var at: Double
    var seconds: Double

    init(clock: any SyncClock, seconds: Double) {
        at = clock.now + seconds
        self.seconds = seconds
    }
}

/// One sync at a time per store file in this process: a `sync()` called while another is in
/// flight does not start a second push of the same operations. It joins the one follow-up sync
/// queued to run when the current one ends (all callers that arrive meanwhile share it and its
/// report); callers with other settings (policy, page size) wait for that follow-up to end and
/// then queue their own. A sync is cancelled when every caller waiting for it is.
actor SyncRunner {
    struct Settings: Hashable, Sendable {
        var policy: ConflictStrategy
        var pageSize: Int
    }

    typealias Progress = @Sendable (SyncProgress) -> Void
    typealias Body = @Sendable (@escaping Progress) async throws -> SyncReport

    /// One sync run, shared by the callers that joined it.
    final class Flight: @unchecked Sendable {
        let settings: Settings
        var task: Task<SyncReport, Error>!
        private let lock = NSLock()
        private var listeners: [Progress] = []
        private var joined = 0
        private var waiting = 0

        /// Callers waiting for this flight (the one that started it included).
        var callers: Int {
            lock.lock()
            defer { lock.unlock() }
            return joined
        }

        init(_ settings: Settings) { self.settings = settings }

        func join(_ listener: Progress?) {
            lock.lock()
            joined += 1
            waiting += 1
            if let listener { listeners.append(listener) }
            lock.unlock()
        }

        /// The flight's report. A cancelled caller stops waiting for it only when it was the
        /// last one waiting: then the sync itself is cancelled (and ends at once).
        func outcome() async throws -> SyncReport {
            try await withTaskCancellationHandler {
                try await task.value
            } onCancel: {
                lock.lock()
                waiting -= 1
                let last = waiting == 0
                lock.unlock()
                if last { task.cancel() }
            }
        }

        func report(_ progress: SyncProgress) {
            lock.lock()
            let current = listeners
            lock.unlock()
            for listener in current { listener(progress) }
        }
    }

    private var current: Flight?
    private var next: Flight?

    func run(_ settings: Settings, progress: Progress?, body: @escaping Body) async throws -> SyncReport {
        while true {
            try Task.checkCancellation()
            if let next {
                guard next.settings == settings else {
                    _ = await next.task.result
                    continue
                }
                next.join(progress)
                return try await next.outcome()
            }
            let flight = Flight(settings)
            flight.join(progress)
            let previous = current?.task
            // Isolated to this actor like `run` (only `body` runs outside it), so it starts once
            // `run` has recorded the flight below and awaits it.
            flight.task = Task {
                if let previous { _ = await previous.result }
                begin(flight)
                defer { end(flight) }
                try Task.checkCancellation()
                return try await body(flight.report)
            }
            if current == nil { current = flight } else { next = flight }
            return try await flight.outcome()
        }
    }

    /// How many callers wait for the queued follow-up sync (for tests).
    var followUpCallers: Int { next?.callers ?? 0 }

    private func begin(_ flight: Flight) {
        current = flight
        if next === flight { next = nil }
    }

    private func end(_ flight: Flight) {
        if current === flight { current = nil }
    }

    // MARK: One runner per store file

    private static let registryLock = NSLock()
    nonisolated(unsafe) private static var registry: [String: SyncRunner] = [:]

    /// The runner of the store file at `path` (the same for every `LocalStore` opened on it).
    static func forStore(atPath path: String) -> SyncRunner {
        let key = URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
        registryLock.lock()
        defer { registryLock.unlock() }
        if let runner = registry[key] { return runner }
        let runner = SyncRunner()
        registry[key] = runner
        return runner
    }
}

/// One sync at a time per store file across processes: an exclusive `flock(2)` on
/// `<store>.sync-lock`, taken without waiting when a sync starts and held until it ends. The
/// kernel drops it when the process dies, so a killed sync leaves nothing to clean up.
struct SyncFileLock {
    private let descriptor: Int32

    /// Takes the lock, or throws `SyncError.alreadyRunning` when another process holds it.
    init(storePath: String) throws {
        let descriptor = open(storePath + ".sync-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let error = errno
            close(descriptor)
            if error == EWOULDBLOCK { throw SyncError.alreadyRunning(store: storePath) }
            throw POSIXError(POSIXErrorCode(rawValue: error) ?? .EIO)
        }
        self.descriptor = descriptor
    }

    func release() { close(descriptor) }
}
