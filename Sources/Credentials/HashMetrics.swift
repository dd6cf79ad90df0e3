import CoreMetrics
import Dispatch

/// Argon2 work, as metrics: `todosync_argon2_hashes_total{op="hash"|"verify"}` and the time
/// each took (`todosync_argon2_duration_seconds`). Hashing is the most expensive thing a
/// responder does (about 19 MiB and tens of milliseconds per call), so operators watch it.
enum HashMetrics {
    private static let hashes = Counter(label: "todosync_argon2_hashes_total", dimensions: [("op", "hash")])
    private static let verifies = Counter(label: "todosync_argon2_hashes_total", dimensions: [("op", "verify")])
    private static let hashTime = Timer(label: "todosync_argon2_duration_seconds", dimensions: [("op", "hash")])
    private static let verifyTime = Timer(label: "todosync_argon2_duration_seconds", dimensions: [("op", "verify")])

    static func measure<T>(verify: Bool, _ work: () throws -> T) rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer {
            let elapsed = DispatchTime.now().uptimeNanoseconds &- start
            if verify {
                verifies.increment()
                verifyTime.recordNanoseconds(Int64(elapsed))
            } else {
                hashes.increment()
                hashTime.recordNanoseconds(Int64(elapsed))
            }
        }
        return try work()
    }
}
