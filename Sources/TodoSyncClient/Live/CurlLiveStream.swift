#if canImport(FoundationNetworking)
import CCurlStream
import Foundation
import FoundationNetworking

/// The live stream on Linux: the same request and events as `URLSessionLiveStream`, through
/// libcurl's easy interface on a thread of its own.
///
/// Why: FoundationNetworking keeps the libdispatch write source it made while sending a request
/// until the transfer ends; a connected socket is always writable, so every open stream spun a
/// core (an idle `todosync-client watch`: 8.4 s of CPU in 10 s, about 1,500 wake-ups a second).
/// libcurl (what FoundationNetworking is built on, so no new library on the device) waits in
/// poll(2): an idle stream costs nothing until the server's next byte. Cancelling the consumer
/// stops the transfer within about a second (curl's progress callback).
public struct CurlLiveStream: LiveStream {
    let baseURL: URL
    /// Seconds without a byte (the server pings at least every 30 s) before the stream counts as dead.
    let idleTimeout: Double
    /// A CA bundle to trust instead of the system's (a private deployment's certificate).
    let caFile: String?

    public init(baseURL: URL, idleTimeout: Double = 75, caFile: String? = nil) {
        self.baseURL = baseURL
        self.idleTimeout = idleTimeout
        self.caFile = caFile
    }

    public func open(token: String, schemaVersion: Int) -> AsyncThrowingStream<LiveEvent, Error> {
        open(token: token, schemaVersion: schemaVersion, friends: false)
    }

    public func open(token: String, schemaVersion: Int, friends: Bool) -> AsyncThrowingStream<LiveEvent, Error> {
        var components = URLComponents(url: baseURL.appendingPathComponent("/api/v1/sync/live"), resolvingAgainstBaseURL: false)!
        components.queryItems = Self.query(schemaVersion: schemaVersion, friends: friends)
        let url = components.url!.absoluteString
        let headers = ["Accept: text/event-stream", "Authorization: Bearer \(token)", "Cache-Control: no-cache"]
        let idle = max(1, Int(idleTimeout.rounded(.up)))
        let caFile = self.caFile
        return AsyncThrowingStream { continuation in
            let transfer = CurlTransfer(continuation: continuation)
            continuation.onTermination = { _ in transfer.cancel() }
            let thread = Thread { transfer.run(url: url, headers: headers, idleSeconds: idle, caFile: caFile) }
            thread.name = "todosync-live"
            thread.stackSize = 256 * 1024
            thread.start()
        }
    }
}

/// One transfer's state, shared by the libcurl thread and the stream's cancellation.
private final class CurlTransfer: @unchecked Sendable {
    private let lock = NSLock()
    private let continuation: AsyncThrowingStream<LiveEvent, Error>.Continuation
    private var parser = SSEParser()
    private var cancelled = false
    private var headerStatus = 0
    private var retryAfter: Double?
    private var opened = false
    private var errorBody = Data()

    init(continuation: AsyncThrowingStream<LiveEvent, Error>.Continuation) { self.continuation = continuation }

    func cancel() { lock.withLock { cancelled = true } }

    var isCancelled: Bool { lock.withLock { cancelled } }

    /// A header line: the status line, a header, or the blank line that ends them (the stream is
    /// then open when the status is 200).
    func header(_ line: String) {
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ")
            headerStatus = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            retryAfter = nil
        } else if line.isEmpty {
            if headerStatus == 200 && !opened {
                opened = true
                continuation.yield(.opened)
            }
        } else if let colon = line.firstIndex(of: ":"),
                  line[..<colon].trimmingCharacters(in: .whitespaces).lowercased() == "retry-after" {
            retryAfter = Double(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
    }

    func data(status: Int, _ bytes: UnsafeBufferPointer<UInt8>) {
        if status != 200 {
            if errorBody.count < 4096 { errorBody.append(contentsOf: bytes.prefix(4096 - errorBody.count)) }
            return
        }
        for event in parser.feed(bytes) { continuation.yield(event) }
    }

    func run(url: String, headers: [String], idleSeconds: Int, caFile: String?) {
        var callbacks = ts_stream_callbacks()
        callbacks.context = Unmanaged.passUnretained(self).toOpaque()
        callbacks.on_header = { context, line, length in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            let text = line.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: length).bindMemory(to: UInt8.self), as: UTF8.self) } ?? ""
            transfer.header(text)
            return 0
        }
        callbacks.on_data = { context, status, bytes, length in
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue()
            if let bytes {
                transfer.data(status: Int(status), UnsafeRawBufferPointer(start: bytes, count: length).bindMemory(to: UInt8.self))
            }
            return 0
        }
        callbacks.should_stop = { context in
            Unmanaged<CurlTransfer>.fromOpaque(context!).takeUnretainedValue().isCancelled ? 1 : 0
        }
        var status = 0
        var error = [CChar](repeating: 0, count: 512)
        let result = withExtendedLifetime(self) { () -> Int32 in
            let cStrings = headers.map { strdup($0) }
            defer { cStrings.forEach { free($0) } }
            var pointers = cStrings.map { UnsafePointer<CChar>($0) }
            return pointers.withUnsafeMutableBufferPointer { list in
                error.withUnsafeMutableBufferPointer { message in
                    ts_stream_get(url, list.baseAddress, Int32(list.count), idleSeconds, min(idleSeconds, 30), caFile,
                                  &callbacks, &status, message.baseAddress, message.count)
                }
            }
        }
        if result == 1 || isCancelled {
            continuation.finish()
        } else if status != 0 && status != 200 {
            continuation.finish(throwing: LiveStreamError.refused(status: status, retryAfter: retryAfter, body: errorBody))
        } else if result == -1 {
            let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            continuation.finish(throwing: LiveStreamError.ended(message.isEmpty ? "connection lost" : message))
        } else {
            continuation.finish(throwing: LiveStreamError.ended("closed by the server"))
        }
    }
}
#endif
