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
}

/// Server-Sent Events, line by line: comments (`: ping`) are skipped, `data:` lines of one event
/// are joined, a blank line ends the event. Each poke's data is one JSON object.
struct SSEParser {
    private var buffer: [UInt8] = []
    private var data: [String] = []

    /// Feeds received bytes; returns the pokes completed by them.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [LiveEvent] {
        buffer.append(contentsOf: bytes)
        var events: [LiveEvent] = []
        while let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) {
            var line = buffer[..<newline]
            buffer.removeSubrange(...newline)
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.isEmpty {
                if !data.isEmpty, let event = Self.poke(data.joined(separator: "\n")) { events.append(event) }
                data = []
                continue
            }
            let text = String(decoding: line, as: UTF8.self)
            if text.hasPrefix(":") { continue }
            guard text.hasPrefix("data:") else { continue }  // id:, event:, retry: carry nothing the client needs
            var value = text.dropFirst(5)
            if value.first == " " { value = value.dropFirst() }
            data.append(String(value))
        }
        return events
    }

    static func poke(_ json: String) -> LiveEvent? {
        guard let object = (try? JSONParser.parse(Array(json.utf8), maxDepth: 4))?.objectValue,
              let version = object["version"]?.int64Value else { return nil }
        return .poke(version: version, deviceID: object["deviceId"]?.stringValue)
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
        var components = URLComponents(url: baseURL.appendingPathComponent("/api/v1/sync/live"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "schemaVersion", value: String(schemaVersion))]
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
            continuation.onTermination = { _ in
                task.cancel()
                session.invalidateAndCancel()
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
