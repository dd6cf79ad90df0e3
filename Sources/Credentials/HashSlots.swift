import Synchronization

/// Caps the password hashes (Argon2id, ~20 ms of one core and 19 MiB each) running at once in
/// this process. A login or register that finds every slot taken is turned away at once
/// (`withSlot` returns nil) instead of queueing: queued hashes would hold worker threads, and
/// with all workers parked behind hashes every other request waits (the hostile review measured
/// a 50× slowdown for other users from one address doing 16 concurrent logins).
public final class HashSlots: Sendable {
    /// Hashes allowed at once.
    public let limit: Int
    private let inUse = Atomic<Int>(0)

    public init(limit: Int) {
        precondition(limit >= 1, "HashSlots needs at least one slot")
        self.limit = limit
    }

    /// Runs `body` holding a slot; nil without running it when all `limit` slots are taken.
    public func withSlot<T>(_ body: () throws -> T) rethrows -> T? {
        var current = inUse.load(ordering: .relaxed)
        while true {
            guard current < limit else { return nil }
            let (exchanged, original) = inUse.compareExchange(
                expected: current, desired: current + 1, ordering: .acquiring)
            if exchanged { break }
            current = original
        }
        defer { inUse.subtract(1, ordering: .releasing) }
        return try body()
    }
}
