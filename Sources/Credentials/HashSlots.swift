#if canImport(Glibc)
import Glibc
#endif

/// Caps the password hashes (Argon2id, ~20 ms of one core and 19 MiB each) running at once in
/// this process, with a short fair queue in front.
///
/// History: with no queue, a login that found the one slot of a 2-core responder taken was turned
/// away at once, so 10 addresses × 5 logins/s kept the slot busy and denied logins to everyone.
/// With an unbounded queue, hashes would park every worker thread and stall all other requests
/// (the first hostile review measured a 50× slowdown from 16 concurrent logins of one address).
///
/// So: a request that finds every slot taken waits, at most `maximumWait` seconds, in a queue of
/// at most `queueLimit` (`withSlot` returns nil when it gets no slot: answered 429 with
/// Retry-After). Fair share by client (the caller's key: the client's address): each client's
/// recent use is counted (hashes granted, decaying with a half-life of `usageHalfLife` seconds),
/// a freed slot goes to the waiting client that used the fewest lately, and when the queue is full
/// a newcomer takes the place of the newest waiter of the client with the highest claim (recent
/// use plus requests waiting), if that claim is above the newcomer's own by more than one. So
/// a flood from many addresses, each at a modest rate, cannot keep an occasional login out.
///
/// Failed logins weigh more (`recordFailure`): each counts `failureWeight` hashes in the client's
/// claim, decaying with a half-life of `failureHalfLife` seconds. By use alone a user logging in
/// at 2/s from their own address was a heavier client than each of ten addresses guessing at
/// 5/s once a loaded box hashed only ~10/s (about 1/s each): the fair share turned away 5 of 19
/// of their logins (issue 34, item 7). The guessers fail every time, so their claim now grows
/// ~9× as fast as their use, and a client without recent failures goes first and is never the
/// one pushed out of a full queue by them.
///
/// With `perClientLimit`, a client that already holds (or waits for) that many slots is turned
/// away at once, whatever is free: its share. The snapshot builds and the account export use it
/// with the account as the client (issue 34: two accounts rebuilding snapshots in a loop held both
/// builds of every responder, and everyone else got 503 on 80 of 121 requests; one account's
/// exports back to back got the one export slot 57 times of 59). An account then builds one file
/// at a time per process, and another account's request waits in the fair queue for the next
/// free slot instead of being refused.
public final class HashSlots: @unchecked Sendable {
    /// Hashes allowed at once.
    public let limit: Int
    /// Requests allowed to wait for a slot at once; more are turned away at once.
    public let queueLimit: Int
    /// Longest wait for a slot, in seconds.
    public let maximumWait: Double
    /// Slots one client may hold and wait for at once (nil: no share, only `limit`).
    public let perClientLimit: Int?

    /// One waiting request. Guarded by `mutex`.
    private final class Waiter {
        var granted = false
        /// Pushed out of a full queue by another client's request (see the type's comment).
        var evicted = false
        var condition = pthread_cond_t()
        init() {
            var attributes = pthread_condattr_t()
            pthread_condattr_init(&attributes)
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
            pthread_cond_init(&condition, &attributes)
            pthread_condattr_destroy(&attributes)
        }
        deinit { pthread_cond_destroy(&condition) }
    }

    private var mutex = pthread_mutex_t()
    private var inUse = 0
    private var waiting = 0
    /// Waiters by client, each in arrival order; `turns` is the round-robin order of clients.
    private var queues: [String: [Waiter]] = [:]
    private var turns: [String] = []
    /// Each client's recent use: (decayed count, when it was last decayed), monotonic seconds.
    private var usage: [String: (count: Double, at: Double)] = [:]
    /// Slots each client holds now (kept only with `perClientLimit`).
    private var held: [String: Int] = [:]
    /// Half-life of a client's recent use, in seconds.
    public let usageHalfLife = 10.0
    /// Each client's recent failures (`recordFailure`), decayed like `usage`.
    private var failures: [String: (count: Double, at: Double)] = [:]
    /// Hashes one recent failure counts in a client's claim, and its half-life in seconds.
    public let failureWeight = 8.0
    public let failureHalfLife = 30.0

    public init(limit: Int, queueLimit: Int = 0, maximumWait: Double = 2, perClientLimit: Int? = nil) {
        precondition(limit >= 1, "HashSlots needs at least one slot")
        precondition(perClientLimit.map { $0 >= 1 } ?? true, "a client's share is at least one slot")
        self.limit = limit
        self.queueLimit = max(queueLimit, 0)
        self.maximumWait = maximumWait
        self.perClientLimit = perClientLimit
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    /// Runs `body` holding a slot; nil without running it when no slot came free in time (or the
    /// queue was full). `client` names who asks (an address), for the fair turn.
    public func withSlot<T>(client: String = "", _ body: () throws -> T) rethrows -> T? {
        guard acquire(client: client) else { return nil }
        defer { release(client: client) }
        return try body()
    }

    /// Slots in use and requests waiting now (for tests and metrics).
    public var state: (inUse: Int, waiting: Int) {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return (inUse, waiting)
    }

    /// Counts a failed attempt of `client` (a wrong password, an unknown email, a locked-out
    /// account): it weighs `failureWeight` hashes in the client's claim to the next free slot.
    public func recordFailure(client: String) {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        let now = Self.now()
        failures[client] = (Self.decayed(failures[client], now: now, halfLife: failureHalfLife) + 1, now)
        if failures.count > 4096 {
            failures = failures.filter { Self.decayed($0.value, now: now, halfLife: failureHalfLife) >= 0.05 }
        }
    }

    /// Slots `client` holds now (for tests).
    public func held(by client: String) -> Int {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return held[client, default: 0]
    }

    private func acquire(client: String) -> Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        if let share = perClientLimit, held[client, default: 0] + (queues[client]?.count ?? 0) >= share {
            return false
        }
        if inUse < limit && waiting == 0 {
            inUse += 1
            recordUse(of: client)
            if perClientLimit != nil { held[client, default: 0] += 1 }
            return true
        }
        if waiting >= queueLimit {
            guard queueLimit > 0, evictFromTheLargestQueue(toAdmit: client) else { return false }
        }
        let waiter = Waiter()
        if queues[client, default: []].isEmpty { turns.append(client) }
        queues[client, default: []].append(waiter)
        waiting += 1
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int(maximumWait * 1e9)
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        while !waiter.granted {
            if waiter.evicted { return false }
            if pthread_cond_timedwait(&waiter.condition, &mutex, &deadline) == ETIMEDOUT, !waiter.granted {
                remove(waiter, of: client)
                return false
            }
        }
        return true  // the releaser handed its slot over: inUse (and held) already count it
    }

    private func release(client releasing: String) {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        if perClientLimit != nil {
            let count = held[releasing, default: 0]
            if count <= 1 { held[releasing] = nil } else { held[releasing] = count - 1 }
        }
        guard !turns.isEmpty else {
            inUse -= 1
            return
        }
        // The waiting client with the smallest claim (hashes used and failures, lately; the
        // earliest in line on a tie).
        let now = Self.now()
        var chosen = 0
        var least = standing(of: turns[0], now: now)
        for index in turns.indices.dropFirst() {
            let claim = standing(of: turns[index], now: now)
            if claim < least { (chosen, least) = (index, claim) }
        }
        let client = turns.remove(at: chosen)
        let waiter = queues[client]!.removeFirst()
        if queues[client]!.isEmpty { queues[client] = nil } else { turns.append(client) }
        recordUse(of: client)
        if perClientLimit != nil { held[client, default: 0] += 1 }
        waiting -= 1
        waiter.granted = true
        pthread_cond_signal(&waiter.condition)
    }

    /// Makes room for one request of `client` by pushing out the newest waiter of the client with
    /// the highest claim (recent use plus waiting requests), when that claim is above `client`'s
    /// own by more than one. Called with `mutex` held.
    private func evictFromTheLargestQueue(toAdmit client: String) -> Bool {
        let now = Self.now()
        func claim(_ name: String) -> Double { standing(of: name, now: now) + Double(queues[name]?.count ?? 0) }
        guard let largest = queues.keys.max(by: { claim($0) < claim($1) }), largest != client,
              claim(largest) > claim(client) + 1, let victim = queues[largest]?.last else { return false }
        remove(victim, of: largest)
        victim.evicted = true
        pthread_cond_signal(&victim.condition)
        return true
    }

    private static func now() -> Double {
        var clock = timespec()
        clock_gettime(CLOCK_MONOTONIC, &clock)
        return Double(clock.tv_sec) + Double(clock.tv_nsec) / 1e9
    }

    private func recentUse(of client: String, now: Double) -> Double {
        Self.decayed(usage[client], now: now, halfLife: usageHalfLife)
    }

    /// A client's claim on the slots: its recent use plus its recent failures, weighted.
    private func standing(of client: String, now: Double) -> Double {
        recentUse(of: client, now: now)
            + failureWeight * Self.decayed(failures[client], now: now, halfLife: failureHalfLife)
    }

    private static func decayed(_ entry: (count: Double, at: Double)?, now: Double, halfLife: Double) -> Double {
        guard let entry else { return 0 }
        return entry.count * pow(0.5, (now - entry.at) / halfLife)
    }

    /// Counts one hash for `client`; forgets clients whose use has decayed away (bounded memory).
    private func recordUse(of client: String) {
        let now = Self.now()
        usage[client] = (recentUse(of: client, now: now) + 1, now)
        if usage.count > 4096 {
            usage = usage.filter { recentUse(of: $0.key, now: now) >= 0.05 }
        }
    }

    private func remove(_ waiter: Waiter, of client: String) {
        queues[client]?.removeAll { $0 === waiter }
        if queues[client]?.isEmpty == true {
            queues[client] = nil
            turns.removeAll { $0 == client }
        }
        waiting -= 1
    }
}
