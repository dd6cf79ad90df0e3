import Foundation
import GRDB

/// Keeps one store in sync by itself (docs/CLIENT.md "Live sync"): after local writes
/// (debounced), when the live stream opens or pokes, when the network returns, when the app
/// becomes active, and on a timer while connected, since pokes can be lost. One sync at a time:
/// triggers that arrive during a sync coalesce into one follow-up. A failed sync is retried by
/// itself after a jittered exponential backoff (honouring `Retry-After`); the live stream
/// reconnects with its own jittered backoff, so devices do not all return in the same second
/// after a server restart. The engine stops for good on 426 (`upgradeRequired`) and when the
/// login is refused (401 with no new token from `tokenRefresh`), keeping every local change.
public actor SyncEngine {
    /// How often and how soon (docs/CLIENT-SETTINGS.md "Live sync"). Seconds.
    public struct Settings: Sendable, Equatable {
        /// A burst of local writes (each within `quiet` of the last) syncs at most this long
        /// after its first write, however long it goes on.
        public var debounce: Double
        /// A local write syncs once no other has come for this long: a lone write on an idle
        /// engine goes out at once (`quiet` later), and a burst coalesces into one push. Writes
        /// during a sync go out in one follow-up right after it (issue 39, item 6).
        public var quiet: Double
        /// A pull this long after the last successful sync, whether or not a poke came.
        public var interval: Double
        /// The backoff of failed syncs: waits of up to `initialBackoff · 2^(n-1)` (full jitter),
        /// at most `maxBackoff`, at least `initialBackoff` and at least the server's `Retry-After`.
        public var initialBackoff: Double
        public var maxBackoff: Double
        /// Whether to hold a live stream open for pokes.
        public var live: Bool
        /// The live stream's reconnect backoff: up to `liveInitialBackoff · 2^(n-1)`, full
        /// jitter, at most `liveMaxBackoff`. A stream that stayed open `liveMaxBackoff`
        /// seconds starts the sequence again.
        public var liveInitialBackoff: Double
        public var liveMaxBackoff: Double
        /// When set, the engine looks for changes queued by other processes on the store file
        /// (`PRAGMA data_version`); one found syncs as a local write does. How it wakes to look:
        /// `storeWake`; this is the poll's period. Nil: only `localWrite()` says so.
        public var storeCheckInterval: Double?
        /// How the engine wakes to look at the store file (with `storeCheckInterval` set).
        public var storeWake: StoreWake

        public init(debounce: Double = 0.3, interval: Double = 60, initialBackoff: Double = 1, maxBackoff: Double = 300,
                    live: Bool = true, liveInitialBackoff: Double = 5, liveMaxBackoff: Double = 120,
                    storeCheckInterval: Double? = nil, quiet: Double = 0.02, storeWake: StoreWake = .onChange) {
            self.storeCheckInterval = storeCheckInterval
            self.storeWake = storeWake
            self.quiet = quiet
            self.debounce = debounce
            self.interval = interval
            self.initialBackoff = initialBackoff
            self.maxBackoff = maxBackoff
            self.live = live
            self.liveInitialBackoff = liveInitialBackoff
            self.liveMaxBackoff = liveMaxBackoff
        }
    }

    /// How the engine notices other processes' writes to the store file.
    public enum StoreWake: String, Sendable, Equatable {
        /// When the file changes, where the platform tells (Linux: inotify on the store's
        /// directory); where it does not, or its watch cannot start, a poll every
        /// `storeCheckInterval`.
        case onChange = "change"
        /// A poll every `storeCheckInterval`, always.
        case poll
    }

    /// Why a sync started.
    public enum Trigger: String, Sendable {
        case start, localWrite = "local-write", poke, streamOpened = "stream-opened", networkRegained = "network-regained"
        case appActive = "app-active", timer, retry
    }

    /// Why the engine stopped.
    public enum StopReason: Sendable, Equatable {
        /// `stop()` was called.
        case requested
        /// 426: the app must be upgraded before it syncs again.
        case upgradeRequired(UpgradeRequired)
        /// Signed out (`SyncError.unauthorized`: the server refused the token, e.g. after a
        /// password change or a revoke on another device; or no token): log in again, then
        /// start a new engine. Every queued change is kept and sent after the login.
        case loginRequired
    }

    /// Where the engine stands (`status`), for a status line.
    public enum Status: Sendable, Equatable {
        case starting
        /// In sync as of `lastSyncedAt`.
        case idle(lastSyncedAt: Date)
        case syncing(Trigger)
        /// The last sync failed; the next attempt comes by itself at `nextAttemptAt`.
        case offline(nextAttemptAt: Date, reason: String)
        /// Synced, but the user has to look: conflicts wait in the inbox, or the server rejected
        /// changes (`LocalStore.conflicts()`, `rejectedOperations()`).
        case needsAttention(conflicts: Int, rejected: Int)
        /// Stopped: `.loginRequired` and `.upgradeRequired` need the user too.
        case stopped(StopReason)
    }

    /// What the engine does, in order (`events`).
    public enum Event: Sendable, Equatable {
        case syncing(Trigger)
        case synced(SyncReport, Trigger)
        /// A sync failed; the next attempt comes by itself in `retryIn` seconds.
        case failed(String, offline: Bool, retryIn: Double)
        /// The live stream opened.
        case connected
        /// The live stream ended or could not open; it reopens in `retryIn` seconds.
        case disconnected(String, retryIn: Double)
        /// A poke from another device (or a REST write: `deviceID` nil).
        case poke(version: Int64, deviceID: String?)
        /// A friend's month changed (`friendID`), or the friends list or requests did (nil):
        /// only while something watches friends (`friendSignals()`).
        case friend(friendID: Int64?)
        /// The app said the network went away (false) or came back (true).
        case reachability(Bool)
        case stopped(StopReason)
    }

    public let client: TodoSyncClient
    public let settings: Settings
    /// Every event, as it happens; finishes when the engine stops.
    public nonisolated let events: AsyncStream<Event>
    /// The current state (every change of it is also an `events` element).
    public private(set) var status = Status.starting
    private let emit: AsyncStream<Event>.Continuation
    private let clock: any SyncClock
    private let live: (any LiveStream)?
    private let reachability: AsyncStream<Bool>?
    private let random: @Sendable (ClosedRange<Double>) -> Double

    private var pending: (at: Double, trigger: Trigger)?
    /// When the first local write not yet taken by a sync came (the burst's start).
    private var burstStartedAt: Double?
    private var retryAt: Double?
    private var failures = 0
    private var nextTimer: Double = .infinity
    private var reachable = true
    private var stopped = false
    private var syncing = false
    private var sleeper: Task<Void, Never>?
    /// Set once the sleeper has handed its wait to the clock.
    private var sleepBegun = false
    private var tasks: [Task<Void, Never>] = []
    private var loop: Task<Void, Never>?
    /// The live stream's task: replaced when friends events are turned on or off.
    private var liveTask: Task<Void, Never>?
    /// Who watches friends (`friendSignals()`): while any does, the stream asks for `friends=1`.
    private var friendWatchers: [Int: AsyncStream<FriendSignal>.Continuation] = [:]
    private var nextWatcher = 0
    /// The store file's `PRAGMA data_version` on a connection of its own, and its last value.
    private var storeVersion: DataVersion?
    private var lastStoreVersion: Int?
    /// The store file changed while a sync ran: look again once it is over.
    private var storeChangedDuringSync = false
    /// How the engine is watching the store file now (nil: not, or not yet).
    private(set) var storeWatch: StoreWake?
    /// A second look shortly after a wake (see `watchStore`).
    private var lookAgain: Task<Void, Never>?

    /// - Parameters:
    ///   - live: the source of pokes (default: SSE over URLSession at the client's server).
    ///   - reachability: the app's network state (true: reachable). On Apple platforms feed it
    ///     from `NWPathMonitor`; when absent the network counts as always reachable.
    ///   - clock: the clock of the debounce, the timer and every backoff (tests pass a fake one).
    ///   - random: a value in the range (the jitter); tests pass a fixed one.
    public init(client: TodoSyncClient, settings: Settings = Settings(), live: (any LiveStream)? = nil,
                reachability: AsyncStream<Bool>? = nil, clock: any SyncClock = SystemSyncClock(),
                random: @escaping @Sendable (ClosedRange<Double>) -> Double = { Double.random(in: $0) }) {
        self.client = client
        self.settings = settings
        self.live = settings.live ? (live ?? defaultLiveStream(baseURL: client.api.baseURL)) : nil
        self.reachability = reachability
        self.clock = clock
        self.random = random
        (events, emit) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(1000))
    }

    // MARK: Control

    /// Syncs at once, then keeps syncing until `stop()` or a stop reason.
    public func start() {
        guard loop == nil, !stopped else { return }
        request(.start, after: 0)
        loop = Task { await self.run() }
        restartLive()
        if let interval = settings.storeCheckInterval {
            tasks.append(Task { await self.watchStore(every: interval) })
        }
        if let reachability {
            tasks.append(Task {
                for await up in reachability { await self.setReachable(up) }
            })
        }
    }

    /// Stops the engine and waits until no sync runs. A sync in flight is cancelled; every
    /// local write is atomic, so nothing is half-written and the outbox keeps what was not sent.
    public func stop() async {
        finish(.requested)
        await loop?.value
        await liveTask?.value
        for task in tasks { await task.value }
    }

    /// Call after each local write (`addTodo`, `updateTodo`, …): syncs `quiet` seconds later
    /// unless another write comes meanwhile, and at most `debounce` after the burst's first.
    public func localWrite() {
        guard !stopped else { return }
        let now = clock.now
        let first = burstStartedAt ?? now
        burstStartedAt = first
        let at = min(now + settings.quiet, first + settings.debounce)
        // An earlier sync for another reason takes this write along.
        if let pending, pending.trigger != .localWrite, pending.at <= at { return }
        pending = (at, .localWrite)  // a later write moves its own sync later (up to the cap)
        sleeper?.cancel()
        sleeper = nil
    }

    /// Call when the app comes to the front: syncs now, even during a backoff.
    public func appDidBecomeActive() {
        retryAt = nil
        request(.appActive, after: 0)
    }

    /// The network went away (no sync is tried until it returns) or came back (a sync now).
    public func setReachable(_ up: Bool) {
        guard up != reachable else { return }
        reachable = up
        emit.yield(.reachability(up))
        if up {
            retryAt = nil
            request(.networkRegained, after: 0)
        } else {
            sleeper?.cancel()
        }
    }

    /// Whether the engine has stopped.
    public var isStopped: Bool { stopped }

    // MARK: The sync loop

    private func request(_ trigger: Trigger, after delay: Double) {
        guard !stopped else { return }
        let at = clock.now + delay
        // Not pushed back by later triggers: a stream of writes still syncs `debounce` after the first.
        if pending == nil || at < pending!.at { pending = (at, trigger) }
        sleeper?.cancel()
        sleeper = nil
    }

    /// Whether the loop waits for a trigger or a time, with no sync running (for tests).
    var isWaiting: Bool { sleepBegun && !syncing }

    /// When the next sync is due, and why.
    private func due() -> (at: Double, trigger: Trigger) {
        guard reachable else { return (.infinity, .networkRegained) }
        var next = (at: nextTimer, trigger: Trigger.timer)
        if let pending, pending.at <= next.at { next = pending }
        if let retryAt, retryAt > next.at { next.at = retryAt }
        return next
    }

    private func run() async {
        while !stopped && !Task.isCancelled {
            if storeChangedDuringSync {
                storeChangedDuringSync = false
                storeMayHaveChanged()
            }
            let (at, trigger) = due()
            let now = clock.now
            if at > now + 1e-9 {
                let wait = at == .infinity ? 365 * 86400 : at - now
                let clock = self.clock
                // The task runs on this actor: `sleepBegun` and the clock's registration of the
                // wait happen in one step, so `isWaiting` never says "waiting" before the clock
                // knows the wait (tests move a manual clock right after).
                let sleep = Task {
                    self.sleepBegun = true
                    _ = try? await clock.sleep(seconds: wait)
                }
                sleeper = sleep
                await sleep.value
                sleeper = nil
                sleepBegun = false
                continue
            }
            pending = nil
            burstStartedAt = nil  // writes from now on go in the next sync
            status = .syncing(trigger)
            emit.yield(.syncing(trigger))
            syncing = true
            defer { syncing = false }
            do {
                let report = try await client.sync()
                guard !stopped else { return }
                failures = 0
                retryAt = nil
                nextTimer = clock.now + settings.interval
                let facts = try? client.store.status()
                if let facts, facts.conflicts + facts.rejected > 0 {
                    status = .needsAttention(conflicts: facts.conflicts, rejected: facts.rejected)
                } else {
                    status = .idle(lastSyncedAt: Date())
                }
                emit.yield(.synced(report, trigger))
            } catch SyncError.upgradeRequired(let required) {
                finish(.upgradeRequired(required))
            } catch SyncError.unauthorized, SyncError.notLoggedIn {
                finish(.loginRequired)
            } catch {
                guard !stopped, !Task.isCancelled else { return }
                failures += 1
                var retryAfter: Double?
                if case .unavailable(_, let after) = error as? SyncError { retryAfter = after }
                let delay = backoff(failures, initial: settings.initialBackoff, max: settings.maxBackoff,
                                    floor: max(settings.initialBackoff, retryAfter ?? 0))
                retryAt = clock.now + delay
                // Whatever came meanwhile waits for the backoff: the next attempt is the retry.
                pending = (retryAt!, .retry)
                status = .offline(nextAttemptAt: Date().addingTimeInterval(delay), reason: String(describing: error))
                emit.yield(.failed(String(describing: error), offline: (error as? SyncError)?.isOffline ?? true, retryIn: delay))
            }
        }
    }

    /// Full jitter: a wait in `0…min(max, initial·2^(n-1))` for attempt n, at least `floor`
    /// (for syncs: `initialBackoff`, so no storm of instant retries, and the server's `Retry-After`).
    private func backoff(_ attempt: Int, initial: Double, max maximum: Double, floor: Double) -> Double {
        let ceiling = min(maximum, initial * pow(2, Double(min(attempt, 60) - 1)))
        return max(random(0...max(ceiling, 0)), floor)
    }

    private func finish(_ reason: StopReason) {
        guard !stopped else { return }
        stopped = true
        pending = nil
        sleeper?.cancel()
        loop?.cancel()
        liveTask?.cancel()
        lookAgain?.cancel()
        for task in tasks { task.cancel() }
        for watcher in friendWatchers.values { watcher.finish() }
        friendWatchers = [:]
        status = .stopped(reason)
        emit.yield(.stopped(reason))
        emit.finish()
    }

    /// Wakes on each change of the store file (`StoreFileWatch`: inotify on Linux) or, where
    /// that is not to be had or `storeWake` is `.poll`, every `interval`; then looks
    /// (`storeMayHaveChanged`). A wake is only a hint: what decides is the file's data version.
    private func watchStore(every interval: Double) async {
        guard let version = try? DataVersion(path: client.store.path) else { return }
        storeVersion = version
        lastStoreVersion = try? version.current()
        if settings.storeWake == .onChange, let watch = StoreFileWatch.open(storePath: client.store.path) {
            storeWatch = .onChange
            // Ends when the task is cancelled (the engine stops); the watch closes with it.
            for await _ in watch.changes {
                guard !stopped, !Task.isCancelled else { break }
                storeMayHaveChanged()
                // The last write of another process's commit to the -wal file comes just before
                // SQLite makes it visible (the index in -shm, mapped memory: no event), so a look
                // at once may find nothing new: look again 10 ms later.
                if lookAgain == nil {
                    lookAgain = Task {
                        try? await Task.sleep(nanoseconds: 10_000_000)
                        self.lookAgain = nil
                        self.storeMayHaveChanged()
                    }
                }
            }
            watch.cancel()
            return
        }
        storeWatch = .poll
        while !stopped && !Task.isCancelled {
            do {
                try await clock.sleep(seconds: interval)
            } catch {
                return
            }
            storeMayHaveChanged()
        }
    }

    /// Syncs (as a local write does) when the file's `PRAGMA data_version` moved (another
    /// connection committed) and the outbox holds changes: writes of other processes on the
    /// same file. Our own syncs change it too but leave nothing pending, so they trigger nothing;
    /// during one, the look waits until it is over (a write may come in the middle).
    private func storeMayHaveChanged() {
        guard !stopped, let storeVersion else { return }
        guard !syncing else {
            storeChangedDuringSync = true
            return
        }
        let now = try? storeVersion.current()
        guard now != lastStoreVersion else { return }
        lastStoreVersion = now
        if let queued = try? client.store.pendingCount(), queued > 0 { localWrite() }
    }

    // MARK: The live stream

    /// Friends events for a social tab (API.md "Friends", live): while at least one such stream
    /// is being read the live stream is opened with `friends=1` (it reopens when the first
    /// watcher comes and after the last one goes; without watchers no friends event is asked
    /// for). Each stream gets `.streamOpened` whenever a stream with friends events opens (events
    /// may have been missed while it was closed: refresh), then `.friend` per event. It
    /// finishes when the engine stops; stop reading it (cancel its task) to stop watching.
    public func friendSignals() -> AsyncStream<FriendSignal> {
        let (stream, continuation) = AsyncStream.makeStream(of: FriendSignal.self, bufferingPolicy: .bufferingNewest(100))
        guard !stopped else {
            continuation.finish()
            return stream
        }
        nextWatcher += 1
        let id = nextWatcher
        friendWatchers[id] = continuation
        continuation.onTermination = { _ in Task { await self.removeFriendWatcher(id) } }
        if friendWatchers.count == 1 { restartLive() }
        return stream
    }

    /// Whether the live stream asks for friends events now.
    public var watchesFriends: Bool { !friendWatchers.isEmpty }

    private func removeFriendWatcher(_ id: Int) {
        guard friendWatchers.removeValue(forKey: id) != nil else { return }
        if friendWatchers.isEmpty { restartLive() }
    }

    private func signalFriends(_ signal: FriendSignal) {
        for watcher in friendWatchers.values { watcher.yield(signal) }
    }

    /// (Re)opens the live stream, with friends events while anyone watches them. Before
    /// `start()` and after a stop it does nothing.
    private func restartLive() {
        guard let live, loop != nil, !stopped else { return }
        liveTask?.cancel()
        let friends = !friendWatchers.isEmpty
        liveTask = Task { await self.runLive(live, friends: friends) }
    }

    private func runLive(_ live: any LiveStream, friends: Bool) async {
        var attempt = 0
        while !stopped && !Task.isCancelled {
            var reason = "closed by the server"
            var floor: Double?
            var openedAt: Double?
            if let token = try? client.store.token() {
                do {
                    for try await event in live.open(token: token, schemaVersion: client.schemaVersion, friends: friends) {
                        guard !stopped, !Task.isCancelled else { return }
                        switch event {
                        case .opened:
                            openedAt = clock.now
                            emit.yield(.connected)
                            request(.streamOpened, after: 0)
                            if friends { signalFriends(.streamOpened) }
                        case .friend(let friendID):
                            emit.yield(.friend(friendID: friendID))
                            signalFriends(friendID.map(FriendSignal.friend) ?? .friendsChanged)
                        case .poke(let version, let from):
                            // Read now: a first sync from a snapshot gives the store a new deviceId.
                            if from != nil && from == (try? client.store.deviceID) { continue }
                            emit.yield(.poke(version: version, deviceID: from))
                            request(.poke, after: 0)
                        }
                    }
                } catch LiveStreamError.refused(let status, let retryAfter, _) {
                    reason = "HTTP \(status)"
                    floor = retryAfter
                    // 401 and 426 are the sync's to report (it refreshes the token or stops).
                    if status == 401 || status == 426 { request(.retry, after: 0) }
                } catch LiveStreamError.ended(let why) {
                    reason = why
                } catch {
                    reason = String(describing: error)
                }
            } else {
                reason = "not logged in"
            }
            guard !stopped, !Task.isCancelled else { return }
            if let openedAt, clock.now - openedAt >= settings.liveMaxBackoff { attempt = 0 }
            attempt += 1
            let delay = backoff(attempt, initial: settings.liveInitialBackoff, max: settings.liveMaxBackoff, floor: floor ?? 0)
            emit.yield(.disconnected(reason, retryIn: delay))
            do {
                try await clock.sleep(seconds: delay)
            } catch {
                return
            }
        }
    }
}

/// `PRAGMA data_version` of one store file, read on a connection of its own (the number is per
/// connection: it changes when any other connection commits).
private struct DataVersion: Sendable {
    let queue: DatabaseQueue

    init(path: String) throws {
        var configuration = Configuration()
        configuration.readonly = true
        queue = try DatabaseQueue(path: path, configuration: configuration)
    }

    func current() throws -> Int {
        try queue.read { try Int.fetchOne($0, sql: "PRAGMA data_version") ?? 0 }
    }
}

/// What a watcher of friends hears from the engine (`SyncEngine.friendSignals()`).
public enum FriendSignal: Sendable, Equatable {
    /// A stream with friends events opened: anything may have changed while none was open.
    case streamOpened
    /// What this friend's routes return changed (their month).
    case friend(Int64)
    /// The friends list or the requests changed (a friend's nickname included).
    case friendsChanged
}
