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
/// Retry-After). A freed slot goes to the waiting clients in turn, one request of each client (the
/// caller's key: the client's address) before a second of any, so a client that sends many logins
/// waits behind its own, not in front of everyone else's. When the queue is full, a newcomer takes
/// the place of the newest waiter of the client with the most waiters, if that client has more
/// than the newcomer's own: a flood from a few addresses cannot keep a single login out.
public final class HashSlots: @unchecked Sendable {
    /// Hashes allowed at once.
    public let limit: Int
    /// Requests allowed to wait for a slot at once; more are turned away at once.
    public let queueLimit: Int
    /// Longest wait for a slot, in seconds.
    public let maximumWait: Double

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

    public init(limit: Int, queueLimit: Int = 0, maximumWait: Double = 2) {
        precondition(limit >= 1, "HashSlots needs at least one slot")
        self.limit = limit
        self.queueLimit = max(queueLimit, 0)
        self.maximumWait = maximumWait
        pthread_mutex_init(&mutex, nil)
    }

    deinit { pthread_mutex_destroy(&mutex) }

    /// Runs `body` holding a slot; nil without running it when no slot came free in time (or the
    /// queue was full). `client` names who asks (an address), for the fair turn.
    public func withSlot<T>(client: String = "", _ body: () throws -> T) rethrows -> T? {
        guard acquire(client: client) else { return nil }
        defer { release() }
        return try body()
    }

    /// Slots in use and requests waiting now (for tests and metrics).
    public var state: (inUse: Int, waiting: Int) {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        return (inUse, waiting)
    }

    private func acquire(client: String) -> Bool {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        if inUse < limit && waiting == 0 {
            inUse += 1
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
        return true  // the releaser handed its slot over: inUse already counts it
    }

    private func release() {
        pthread_mutex_lock(&mutex)
        defer { pthread_mutex_unlock(&mutex) }
        guard !turns.isEmpty else {
            inUse -= 1
            return
        }
        let client = turns.removeFirst()
        let waiter = queues[client]!.removeFirst()
        if queues[client]!.isEmpty { queues[client] = nil } else { turns.append(client) }
        waiting -= 1
        waiter.granted = true
        pthread_cond_signal(&waiter.condition)
    }

    /// Makes room for one request of `client` by pushing out the newest waiter of the client with
    /// the most waiters, when that one has more than `client` itself. Called with `mutex` held.
    private func evictFromTheLargestQueue(toAdmit client: String) -> Bool {
        let own = queues[client]?.count ?? 0
        guard let (largest, waiters) = queues.max(by: { $0.value.count < $1.value.count }),
              waiters.count > own + 1, let victim = waiters.last else { return false }
        remove(victim, of: largest)
        victim.evicted = true
        pthread_cond_signal(&victim.condition)
        return true
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
