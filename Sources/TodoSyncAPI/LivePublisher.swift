#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Foundation
import Logging
import Synchronization
import TodoSyncCore

/// Publishes live-sync pokes (contract, "Sync: live (pokes)") to nginx's nchan publisher: one
/// HTTP/1.0 `POST <prefix><userID>` with `{"version":N,"deviceId":…}` over a Unix socket that only
/// the responders can reach (the socket's directory is theirs; nginx serves nothing else there).
/// nchan holds the subscribers, so the responders stay stateless.
///
/// Called after the outermost commit of a write (`Application.handle`), never inside a
/// transaction. It never fails the write: a publisher that is down, slow or answers an error is
/// counted (`todosync_live_publishes_total{result="failed"}`) and logged at most once per
/// `logInterval` per process, and the write's answer goes out as usual. Its cost is bounded by
/// `timeoutMilliseconds` for the connect, the send and the answer each (a Unix socket connect
/// fails at once when nobody listens). Shared by every worker of the process.
public final class LivePublisher: Sendable {
    /// The channel a subscriber location serves and the publisher location publishes to, after
    /// this prefix: the user's id. nginx's templates route both on the same numbers.
    public static let publishPathPrefix = "/__live/publish/"
    /// Where `GET /api/v1/sync/live` hands an authenticated stream (`X-Accel-Redirect`): nginx's
    /// internal nchan subscriber location (nginx/todosync.conf.template, todosync-site.conf.template).
    public static let subscribePathPrefix = "/__live/subscribe/"
    /// Where `GET /api/v1/sync/live?friends=1` hands its stream: the user's poke channel and the
    /// user's friends channel (`todosync-friends-<id>`) multiplexed on one subscriber.
    public static let subscribeWithFriendsPathPrefix = "/__live/subscribe-friends/"
    /// Where friend events are published: the channels' names after it, comma-separated
    /// (nchan's multi-channel publish: one request for up to `friendChannelsPerPublish` of them).
    public static let publishFriendsPathPrefix = "/__live/publish-friends/"
    /// nchan splits one channel id into at most 255 channels.
    public static let friendChannelsPerPublish = 255
    /// The friends channel of a user: every stream of theirs opened with `friends=1` subscribes
    /// to it, and every friend of theirs publishes to it.
    public static func friendsChannel(_ userID: Int64) -> String { "todosync-friends-\(userID)" }

    public let socketPath: String
    public let timeoutMilliseconds: Int
    private let logger: Logger
    private let logInterval: Double
    /// When the last failure was logged (uptime seconds) and how many went unlogged since.
    private let failureLog = Mutex<(last: Double?, suppressed: Int)>((nil, 0))
    private let published = Counter(label: "todosync_live_publishes_total", dimensions: [("result", "published")])
    private let failed = Counter(label: "todosync_live_publishes_total", dimensions: [("result", "failed")])

    public init(socketPath: String, timeoutMilliseconds: Int, logger: Logger, logIntervalSeconds: Double = 10) {
        self.socketPath = socketPath
        self.timeoutMilliseconds = max(timeoutMilliseconds, 1)
        self.logger = logger
        self.logInterval = logIntervalSeconds
    }

    /// Publishes one poke for `userID`: its newest `version`, and the pushing device (nil for REST
    /// writes). Returns whether nchan accepted it (for tests; callers ignore it).
    @discardableResult
    public func publish(userID: Int64, version: Int64, deviceID: String?) -> Bool {
        var body = JSONWriter(reservingCapacity: 160)
        body.beginObject()
        body.field("version", version)
        body.field("deviceId", deviceID)
        body.endObject()
        let head = "POST \(Self.publishPathPrefix)\(userID) HTTP/1.0\r\nHost: localhost\r\n"
            + "Content-Type: application/json\r\nContent-Length: \(body.bytes.count)\r\n\r\n"
        return counted(exchange(Array(head.utf8) + body.bytes))
    }

    /// Friend events waiting for `friendQueue`, at most `maximumPendingFriendEvents`.
    private let pendingFriendEvents = Atomic<Int>(0)
    /// Publishes friend events one after another, off the requests' path: a publish to 255
    /// channels answers only once nchan has handed the message to their subscribers (measured:
    /// 65 ms for 500 open streams), which a write must not wait for.
    private let friendQueue = DispatchQueue(label: "todosync.live.friend-events")
    /// Past this many waiting, a friend event is dropped and counted as failed (events are hints).
    public static let maximumPendingFriendEvents = 1024

    /// Queues `publishFriendEvent` and returns at once: what the write path calls
    /// (`Application.announce`), so a write by a user with 500 friends costs it one friend-id
    /// read and a queue append, whoever listens.
    public func queueFriendEvent(friendID: Int64?, to users: [Int64], padding: Int = 0) {
        guard !users.isEmpty || padding > 0 else { return }
        guard pendingFriendEvents.wrappingAdd(1, ordering: .relaxed).newValue <= Self.maximumPendingFriendEvents else {
            pendingFriendEvents.wrappingSubtract(1, ordering: .relaxed)
            _ = counted(.failure("friend events queue full"))
            return
        }
        friendQueue.async { [self] in
            publishFriendEvent(friendID: friendID, to: users, padding: padding)
            pendingFriendEvents.wrappingSubtract(1, ordering: .relaxed)
        }
    }

    /// Publishes one `event: friend` with `{"friendId": friendID}` (null: the friends list or
    /// requests changed) to the friends channel of each of `users`, in requests of up to
    /// `friendChannelsPerPublish` channels: a write by a user with 500 friends costs two
    /// requests, whoever listens. `padding` more channels that no one subscribes to
    /// (`todosync-friends-0`) are named too, so that a friend request to an email without an
    /// account publishes what one to an account does. Returns whether every request was accepted.
    @discardableResult
    public func publishFriendEvent(friendID: Int64?, to users: [Int64], padding: Int = 0) -> Bool {
        var channels = users.map(Self.friendsChannel)
        channels += Array(repeating: Self.friendsChannel(0), count: padding)
        guard !channels.isEmpty else { return true }
        var body = JSONWriter(reservingCapacity: 32)
        body.beginObject()
        body.field("friendId", friendID)
        body.endObject()
        var accepted = true
        var start = 0
        while start < channels.count {
            let end = min(start + Self.friendChannelsPerPublish, channels.count)
            let head = "POST \(Self.publishFriendsPathPrefix)\(channels[start..<end].joined(separator: ",")) HTTP/1.0\r\n"
                + "Host: localhost\r\nContent-Type: application/json\r\nContent-Length: \(body.bytes.count)\r\n\r\n"
            accepted = counted(exchange(Array(head.utf8) + body.bytes)) && accepted
            start = end
        }
        return accepted
    }

    /// Closes every open stream of `userID`: nchan deletes the user's channel and disconnects its
    /// subscribers (a channel with none answers 404, also fine). After a password change, a
    /// session revoke or an account delete: a revoked token's stream must not outlive it, and the
    /// others reconnect (jittered) and are authorized anew. Counted and bounded like a poke.
    @discardableResult
    public func closeStreams(userID: Int64) -> Bool {
        let head = "DELETE \(Self.publishPathPrefix)\(userID) HTTP/1.0\r\nHost: localhost\r\n\r\n"
        return counted(exchange(Array(head.utf8), accepting: ["2", "404"]))
    }

    private func counted(_ outcome: Outcome) -> Bool {
        switch outcome {
        case .success:
            published.increment()
            return true
        case .failure(let reason):
            failed.increment()
            logFailure(reason)
            return false
        }
    }

    private enum Outcome {
        case success
        case failure(String)
    }

    /// One request and the status line of its answer, each step within the timeout.
    private func exchange(_ request: [UInt8], accepting: [String] = ["2"]) -> Outcome {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutMilliseconds / 1000, tv_usec: (timeoutMilliseconds % 1000) * 1000)
        // A Unix stream connect waits (for a full backlog) up to the send timeout.
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array(socketPath.utf8)
        guard path.count < MemoryLayout.size(ofValue: address.sun_path) else { return .failure("socket path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: path)
            raw[path.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else { return .failure("connect \(socketPath): \(String(cString: strerror(errno)))") }
        var sent = 0
        while sent < request.count {
            let n = request[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return .failure("send: \(String(cString: strerror(errno)))") }
            sent += n
        }
        // "HTTP/1.1 201 ": nchan answers 201 (subscribers waiting) or 202 (none); both are fine.
        var answer = [UInt8](repeating: 0, count: 64)
        var received = 0
        while received < 12 {
            let n = answer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + received, $0.count - received, 0) }
            guard n > 0 else {
                return .failure(n == 0 ? "the publisher closed the connection" : "recv: \(String(cString: strerror(errno)))")
            }
            received += n
        }
        let status = String(decoding: answer[9..<12], as: UTF8.self)
        return accepting.contains { status.hasPrefix($0) } ? .success : .failure("the publisher answered \(status)")
    }

    private func logFailure(_ reason: String) {
        let now = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        let suppressed: Int? = failureLog.withLock { state in
            if let last = state.last, now - last < logInterval {
                state.suppressed += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.suppressed
        }
        guard let suppressed else { return }
        logger.warning("live-sync poke not published; the write succeeded (clients catch up at their next pull)", metadata: [
            "reason": "\(reason)", "publisher": "\(socketPath)", "suppressed_since_last": "\(suppressed)",
        ])
    }
}
