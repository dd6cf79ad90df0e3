#if canImport(Network)
import Foundation
import Network

/// The network's state from `NWPathMonitor`, for `SyncEngine(reachability:)` on Apple platforms:
/// `true` while the path is satisfied. The engine ignores repeats, syncs when it turns true and
/// waits while false. UNTESTED: this machine has no Apple SDK, so this file has never been
/// compiled (docs/CLIENT.md, "Live sync"); elsewhere the engine's probe with backoff is the
/// reachability.
public enum NetworkReachability {
    /// A new monitor's updates; the monitor stops when the stream's consumer goes away (the
    /// engine stops).
    public static func updates(queue: DispatchQueue = DispatchQueue(label: "TodoSync.NetworkReachability"))
        -> AsyncStream<Bool> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { path in continuation.yield(path.status == .satisfied) }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: queue)
        }
    }
}
#endif
