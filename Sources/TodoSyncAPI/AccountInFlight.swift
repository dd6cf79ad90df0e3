#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Requests in flight per account in this responder process (contract, Errors: 429 "too many
/// requests in flight for one account, counted per account, whatever token or spelling of the
/// `Authorization` header carries them"), and each account's share of the process's CPU time.
/// Shared by every worker of the process.
///
/// Counted where the account is known: after the token is resolved to its user, so twenty logins
/// (twenty tokens), other spellings of `Bearer` and over-long headers all count against the one
/// account. nginx's per-token `limit_conn` stays in front as the cheap first filter.
///
/// The count alone is not fair: two requests in flight are two cores when each is a year-long
/// list (issue 34, item 6: a bystander's p99 went from 9 to 97 ms under one account's 16
/// connections of them). So with a `share`, each account's CPU time in this process is kept as a
/// sum that halves every `Share.halfLife` seconds. An account whose sum is over what
/// `Share.coreSeconds` per second keeps it at, while other accounts used the process lately, is
/// over its share: its next request waits until the sum has decayed back (at most
/// `Share.maximumWait`, holding its place in flight), or is answered 429 with the `Retry-After`
/// that would take. Work-conserving: an account alone on the process is never slowed.
///
/// Cheap on the fast path: every counted request's wall-clock time in its worker (two
/// `CLOCK_MONOTONIC` reads, vDSO: ~30 ns each) goes into a second sum per account, and into one
/// for the process (which says whether others are active). A thread never uses more CPU than
/// wall-clock time, so an account whose wall-clock sum is within the ceiling cannot be over its
/// share, and its requests' CPU time is not measured; only the requests of an account past it
/// (the suspects) pay for `CLOCK_THREAD_CPUTIME_ID` (a system call, ~0.5 µs each, twice), and only
/// their CPU time is charged to the CPU sum. So a bystander, whose requests cost a fraction of a
/// millisecond, is never measured and never held back, whatever the load does to its latency.
///
/// Per process, not per service: responders share no state, so the limit of an account across a
/// host is `limit` × the responder processes on it (and × hosts for the service), and its CPU
/// share `coreSeconds` × the processes it reaches. This bounds what one account can take of each
/// process (`TODOSYNC_ACCOUNT_IN_FLIGHT` of its `TODOSYNC_WORKERS`, `TODOSYNC_ACCOUNT_CPU_SHARE_MS`
/// of its cores), which is what keeps a bystander's requests fast.
public final class AccountInFlight: Sendable {
    /// Requests one account may have in flight in this process.
    public let limit: Int
    /// Each account's share of the process's CPU time while others use it (nil: not limited).
    public let share: Share?

    /// An account's share of CPU time.
    public struct Share: Sendable {
        /// CPU seconds per second (cores) one account may use while other accounts are active.
        public var coreSeconds: Double
        /// Half-life of an account's sums, in seconds: the window the share is measured over.
        public var halfLife: Double
        /// The longest a request over its account's share waits for it; beyond, 429 at once.
        public var maximumWait: Double
        /// Other accounts' wall-clock sum (seconds) above which they count as active: a few
        /// requests in the last couple of seconds.
        public var othersActive: Double

        public init(coreSeconds: Double, halfLife: Double = 1, maximumWait: Double = 0.25, othersActive: Double = 0.002) {
            precondition(coreSeconds > 0 && halfLife > 0 && maximumWait >= 0)
            self.coreSeconds = coreSeconds
            self.halfLife = halfLife
            self.maximumWait = maximumWait
            self.othersActive = othersActive
        }

        /// The sum that using `coreSeconds` per second without a pause settles at.
        var ceiling: Double { coreSeconds * halfLife / M_LN2 }
    }

    /// What `admit` decided.
    public enum Admission: Equatable, Sendable {
        /// Counted; run it. `measuringCPU`: the account is past the ceiling in wall-clock time,
        /// so the request's CPU time is to be measured and passed to `leave`.
        case admitted(measuringCPU: Bool)
        /// Counted; run it after waiting this many seconds (over its share), measuring its CPU.
        case admittedAfter(seconds: Double)
        /// Not counted: the account has `limit` requests in flight.
        case tooMany
        /// Not counted: the account is over its share for longer than `Share.maximumWait`.
        case overShare(retryAfterSeconds: Int64)

        /// Whether the request's CPU time is to be measured.
        public var measuringCPU: Bool {
            switch self {
            case .admitted(let measuring): measuring
            case .admittedAfter: true
            case .tooMany, .overShare: false
            }
        }
    }

    /// A sum that halves every `halfLife` seconds: `value` as of `at` (monotonic seconds).
    struct Decaying {
        var value = 0.0
        var at = 0.0
        func now(_ now: Double, halfLife: Double) -> Double {
            value == 0 ? 0 : value * exp2(-(now - at) / halfLife)
        }
        mutating func add(_ amount: Double, now: Double, halfLife: Double) {
            value = self.now(now, halfLife: halfLife) + amount
            at = now
        }
    }

    /// An account's sums: wall-clock time of all its counted requests, CPU time of the measured.
    struct Sums {
        var wall = Decaying()
        var cpu = Decaying()
    }

    private struct State {
        var counts: [Int64: Int] = [:]
        var used: [Int64: Sums] = [:]
        /// Every account's wall-clock time.
        var totalWall = Decaying()
    }
    private let state = Mutex(State())

    public init(limit: Int, share: Share? = nil) {
        precondition(limit >= 1, "AccountInFlight needs a limit of at least 1")
        self.limit = limit
        self.share = share
    }

    /// Counts one more request of `userID` unless it has `limit` already or is over its share
    /// for longer than the share's longest wait. `now`: monotonic seconds (for tests).
    func admit(_ userID: Int64, now: Double = AccountInFlight.monotonicNow()) -> Admission {
        state.withLock { state in
            let current = state.counts[userID, default: 0]
            guard current < limit else { return .tooMany }
            var admission = Admission.admitted(measuringCPU: false)
            if let share, let sums = state.used[userID] {
                let ceiling = share.ceiling
                let wall = sums.wall.now(now, halfLife: share.halfLife)
                if wall > ceiling {
                    admission = .admitted(measuringCPU: true)
                    let cpu = sums.cpu.now(now, halfLife: share.halfLife)
                    if cpu > ceiling && state.totalWall.now(now, halfLife: share.halfLife) - wall > share.othersActive {
                        let wait = share.halfLife * log2(cpu / ceiling)
                        if wait > share.maximumWait {
                            return .overShare(retryAfterSeconds: Int64(min(wait.rounded(.up), 60)))
                        }
                        admission = .admittedAfter(seconds: wait)
                    }
                }
            }
            state.counts[userID] = current + 1
            return admission
        }
    }

    /// Counts one more request of `userID`; false (nothing counted) when it has `limit` already or
    /// is over its share (a request that would wait is counted: true).
    func enter(_ userID: Int64) -> Bool {
        switch admit(userID) {
        case .admitted, .admittedAfter: true
        case .tooMany, .overShare: false
        }
    }

    /// Ends a request that `admit` counted, charging its account the wall-clock seconds it held
    /// its worker and, when measured, the CPU seconds it used.
    func leave(_ userID: Int64, wallSeconds: Double = 0, cpuSeconds: Double? = nil,
               now: Double = AccountInFlight.monotonicNow()) {
        state.withLock { state in
            let current = state.counts[userID, default: 0]
            if current <= 1 { state.counts.removeValue(forKey: userID) } else { state.counts[userID] = current - 1 }
            if let share { Self.charge(&state, userID, wallSeconds, cpuSeconds, now: now, share: share) }
        }
    }

    /// Charges `userID` for work after its request left (a streamed body).
    func charge(_ userID: Int64, wallSeconds: Double, cpuSeconds: Double?, now: Double = AccountInFlight.monotonicNow()) {
        guard let share else { return }
        state.withLock { Self.charge(&$0, userID, wallSeconds, cpuSeconds, now: now, share: share) }
    }

    private static func charge(_ state: inout State, _ userID: Int64, _ wall: Double, _ cpu: Double?, now: Double,
                               share: Share) {
        guard wall > 0 || (cpu ?? 0) > 0 else { return }
        state.used[userID, default: Sums()].wall.add(wall, now: now, halfLife: share.halfLife)
        if let cpu { state.used[userID]!.cpu.add(cpu, now: now, halfLife: share.halfLife) }
        state.totalWall.add(wall, now: now, halfLife: share.halfLife)
        // Bounded memory: forget the accounts whose sums have decayed to nothing.
        if state.used.count > 4096 {
            state.used = state.used.filter { $0.value.wall.now(now, halfLife: share.halfLife) >= 1e-5 }
        }
    }

    /// Requests of `userID` in flight now (for tests).
    func inFlight(_ userID: Int64) -> Int {
        state.withLock { $0.counts[userID, default: 0] }
    }

    /// The CPU sum of `userID` now, in seconds (for tests).
    func cpuSum(_ userID: Int64, now: Double = AccountInFlight.monotonicNow()) -> Double {
        state.withLock { $0.used[userID]?.cpu.now(now, halfLife: share?.halfLife ?? 1) ?? 0 }
    }

    /// Monotonic seconds (vDSO: no system call).
    static func monotonicNow() -> Double {
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        return Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
    }

    /// CPU seconds the calling thread has used (a system call: only for suspects).
    static func threadCPUSeconds() -> Double {
        var clock = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &clock)
        return Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
    }
}

/// Which per-account limit a route's requests count against.
public enum AccountLimit: Sendable {
    /// Requests in flight (`AccountInFlight`): every route that needs a bearer token.
    case requestsInFlight
    /// None: routes without an account (register, login, health, benchmark).
    case notCounted
    /// None, on purpose: the routes that take an account back from whoever holds one of its
    /// tokens (`POST /auth/logout`, `DELETE /account/sessions/:id`, `POST /account/delete`). Counted,
    /// a thief keeping the account's requests in flight with a stolen token kept its owner from
    /// revoking that token (429 until the thief paused; issue 34). They must always get through:
    /// nginx gives them a location without the per-token `limit_conn` too (the `location ~
    /// ^/api/v1/account/(delete|sessions/...)$` after `location /api/`; logout is under
    /// `/api/v1/auth/`, which has none). Each is cheap (one statement), or bounded elsewhere (the
    /// delete's password check: the hash slots and the account's failed-login lockout).
    case takesTheAccountBack
    /// Open live-sync streams (`GET /api/v1/sync/live`), never requests in flight (contract, "Sync:
    /// live"): the responder only authenticates the stream and hands it to nginx, whose nchan
    /// subscriber location holds it and counts the account's open streams (`limit_conn
    /// todosync_streams`, TODOSYNC_LIVE_STREAMS in nginx/limits.env).
    case openStreams
}
