import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the live stream (`GET /api/v1/sync/live`, API.md "Sync: live (pokes)") reports.
public enum LiveEvent: Sendable, Equatable {
    /// The stream is open (the server answered 200): a pull now catches up on anything missed.
    case opened
    /// A change committed: `version` is the user's newest, `deviceID` the pushing device (nil
    /// for REST writes and derived changes).
    case poke(version: Int64, deviceID: String?)
    /// `event: friend` (a stream opened with `friends=1`, API.md "Friends"): what a friend's
    /// routes return changed for `friendID`; nil: this user's friends list or requests changed.
    case friend(friendID: Int64?)
}

/// Why a live stream could not be opened, as far as the engine cares.
public enum LiveStreamError: Error, Sendable, Equatable {
    /// The server answered the stream request with this status before any stream (401, 426, 429…).
    case refused(status: Int, retryAfter: Double?, body: Data)
    /// The stream ended (the server closed it, or the connection broke).
    case ended(String)
}

/// A source of pokes. The default is `URLSessionLiveStream`; tests feed events by hand.
public protocol LiveStream: Sendable {
    /// Opens one stream; it yields `.opened` first, then pokes, and finishes (or throws) when the
    /// connection ends. Cancelling the consuming task closes the connection.
    func open(token: String, schemaVersion: Int) -> AsyncThrowingStream<LiveEvent, Error>
    /// The same, with `friends=1` when `friends` is true: the stream also carries `.friend` events.
    func open(token: String, schemaVersion: Int, friends: Bool) -> AsyncThrowingStream<LiveEvent, Error>
}

extension LiveStream {
    /// A source that knows no friends events: its stream is the plain one.
    public func open(token: String, schemaVersion: Int, friends: Bool) -> AsyncThrowingStream<LiveEvent, Error> {
        open(token: token, schemaVersion: schemaVersion)
    }

    /// The query of the stream request: `schemaVersion`, and `friends=1` when asked.
    static func query(schemaVersion: Int, friends: Bool) -> [URLQueryItem] {
        [URLQueryItem(name: "schemaVersion", value: String(schemaVersion))]
            + (friends ? [URLQueryItem(name: "friends", value: "1")] : [])
    }
}

/// Server-Sent Events, line by line: comments (`: ping`) are skipped, `data:` lines of one event
/// are joined, a blank line ends the event, and the event's name (`event:`) says what it is: none
/// (or `message`) is a poke, `friend` a friend's change; other names are skipped (a newer
/// server's events an older client does not know). Each event's data is one JSON object.
struct SSEParser {
    private var buffer: [UInt8] = []
    private var data: [String] = []
    private var name: String?

    /// Feeds received bytes; returns the events completed by them.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [LiveEvent] {
        buffer.append(contentsOf: bytes)
        var events: [LiveEvent] = []
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            var line = buffer[..<newline]
            buffer.removeSubrange(...newline)
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.isEmpty {
                if !data.isEmpty, let event = Self.event(name ?? "message", data.joined(separator: "\n")) { events.append(event) }
                data = []
                name = nil
                continue
            }
            let text = String(decoding: line, as: UTF8.self)
            if text.hasPrefix(":") { continue }
            if let value = Self.field("event", text) {
                name = String(value)
            } else if let value = Self.field("data", text) {
                data.append(String(value))
            }  // id: and retry: carry nothing the client needs
        }
        return events
    }

    /// The value of a `name:` line (one leading space removed), or nil for another field.
    private static func field(_ name: String, _ line: String) -> Substring? {
        guard line.hasPrefix(name + ":") else { return nil }
        var value = line.dropFirst(name.utf8.count + 1)
        if value.first == " " { value = value.dropFirst() }
        return value
    }

    /// One complete event by its name, or nil (an unknown name, data not of the contract's shape).
    static func event(_ name: String, _ json: String) -> LiveEvent? {
        guard let object = (try? JSONParser.parse(Array(json.utf8), maxDepth: 4))?.objectValue else { return nil }
        switch name {
        case "message", "poke":
            guard let version = object["version"]?.int64Value else { return nil }
            return .poke(version: version, deviceID: object["deviceId"]?.stringValue)
        case "friend":
            guard let member = object["friendId"] else { return nil }
            if case .null = member { return .friend(friendID: nil) }
            guard let id = member.int64Value else { return nil }
            return .friend(friendID: id)
        default:
            return nil
        }
    }
}

/// The platform's live stream: libcurl on Linux (`CurlLiveStream`: FoundationNetworking's
/// URLSession spins a core while a stream is open there), URLSession elsewhere.
public func defaultLiveStream(baseURL: URL) -> any LiveStream {
    #if canImport(FoundationNetworking)
    CurlLiveStream(baseURL: baseURL)
    #else
    URLSessionLiveStream(baseURL: baseURL)
    #endif
}

/// The live stream over URLSession (Apple platforms; on Linux it works but spins a core while
/// open, see `CurlLiveStream`). Built on `URLSessionDataDelegate`, which receives each chunk
/// as it arrives on Linux too (FoundationNetworking has no `bytes(for:)`).
public struct URLSessionLiveStream: LiveStream {
    let baseURL: URL
    /// Seconds without a byte (the server pings at least every 30 s) before the stream counts as dead.
    let idleTimeout: Double

    public init(baseURL: URL, idleTimeout: Double = 75) {
        self.baseURL = baseURL
        self.idleTimeout = idleTimeout
    }

    public func open(token: String, schemaVersion: Int) -> AsyncThrowingStream<LiveEvent, Error> {
        open(token: token, schemaVersion: schemaVersion, friends: false)
    }

    public func open(token: String, schemaVersion: Int, friends: Bool) -> AsyncThrowingStream<LiveEvent, Error> {
        var components = URLComponents(url: baseURL.appendingPathComponent("/api/v1/sync/live"), resolvingAgainstBaseURL: false)!
        components.queryItems = Self.query(schemaVersion: schemaVersion, friends: friends)
        var request = URLRequest(url: components.url!)
        request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("no-cache", forHTTPHeaderField: "Cache-Control")
        request.timeoutInterval = idleTimeout
        return AsyncThrowingStream { continuation in
            let reader = SSEReader(continuation: continuation)
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = idleTimeout
            configuration.timeoutIntervalForResource = 7 * 24 * 3600
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            let session = URLSession(configuration: configuration, delegate: reader, delegateQueue: nil)
            let task = session.dataTask(with: request)
            // Runs under the consuming task's lock when that task is cancelled: the cancel must
            // not wait for URLSession there (`URLSessionCancel`).
            continuation.onTermination = { _ in
                URLSessionCancel.cancelLater(task)
                URLSessionCancel.invalidateLater(session)
            }
            task.resume()
        }
    }
}

/// The delegate of one stream: status first, then chunks through `SSEParser`.
private final class SSEReader: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private let continuation: AsyncThrowingStream<LiveEvent, Error>.Continuation
    private var parser = SSEParser()
    private var refused: (status: Int, retryAfter: Double?)?
    private var errorBody = Data()

    init(continuation: AsyncThrowingStream<LiveEvent, Error>.Continuation) { self.continuation = continuation }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        let http = response as? HTTPURLResponse
        let status = http?.statusCode ?? 0
        if status == 200 {
            continuation.yield(.opened)
        } else {
            let retryAfter = (http?.value(forHTTPHeaderField: "Retry-After")).flatMap(Double.init)
            lock.lock()
            refused = (status, retryAfter)
            lock.unlock()
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        if refused != nil {
            if errorBody.count < 4096 { errorBody.append(data) }
            lock.unlock()
            return
        }
        let events = parser.feed(data)
        lock.unlock()
        for event in events { continuation.yield(event) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        let refused = self.refused
        let body = errorBody
        lock.unlock()
        if let refused {
            continuation.finish(throwing: LiveStreamError.refused(status: refused.status, retryAfter: refused.retryAfter, body: body))
        } else {
            continuation.finish(throwing: LiveStreamError.ended(error.map(APIClient.describe) ?? "closed by the server"))
        }
        session.finishTasksAndInvalidate()
    }
}
