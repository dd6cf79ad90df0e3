/// A response body written while it is produced, for bodies too large to hold in memory at once
/// (``FastCGIResponse/stream``).
///
/// After the handler returns, the worker calls ``produce`` on its own thread with a `write`
/// function. Bytes given to `write` are gathered into chunks of at most
/// ``FastCGIBodyStream/chunkBytes`` and each full chunk is written to the FastCGI connection and
/// flushed, so the web server receives the body as it is made and the responder holds one chunk.
/// `write` answers false once the connection failed (the web server went away, or did not read
/// for the write timeout): produce nothing more.
///
/// The head (status and headers, no `Content-Length`: the web server frames the body, chunked
/// for HTTP/1.1) goes out with the first chunk. Until then the producer may still answer
/// something else instead (``Outcome/instead(_:)``): an error found before any byte was sent is
/// a proper response. A body that cannot be completed (``Outcome/cutOff``, or `instead` after the
/// head went out) ends with the connection closed without FCGI_END_REQUEST, so the web server
/// reports the response as cut off (nginx: "upstream prematurely closed") and never passes a
/// truncated body on as a complete one.
///
/// Confined to the worker thread that runs the handler; hence `@unchecked Sendable`.
public struct FastCGIBodyStream: @unchecked Sendable {
    /// How the producer ended.
    public enum Outcome {
        /// The whole body was written.
        case complete
        /// The body could not be completed (a failure midway, or `write` answered false).
        case cutOff
        /// This response instead, if no byte of the stream has been sent yet (else: cut off).
        case instead(FastCGIResponse)
    }

    /// The most bytes written to the connection at once, and held before they are.
    public static let chunkBytes = 64 * 1024

    public let produce: (_ write: (UnsafeRawBufferPointer) -> Bool) -> Outcome

    public init(_ produce: @escaping (_ write: (UnsafeRawBufferPointer) -> Bool) -> Outcome) {
        self.produce = produce
    }
}

/// Gathers a streamed body's pieces into chunks of at most `capacity` bytes for `emit`.
struct BodyChunker {
    private var buffer: [UInt8]
    private let capacity: Int
    /// `emit` refused a chunk: everything after is dropped.
    private(set) var failed = false
    /// Whether any chunk reached `emit`.
    private(set) var emittedAny = false

    init(capacity: Int) {
        precondition(capacity > 0, "a chunk needs room")
        self.capacity = capacity
        buffer = []
        buffer.reserveCapacity(capacity)
    }

    /// Adds `bytes`, emitting every chunk that fills. False once `emit` failed.
    mutating func append(_ bytes: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard !failed else { return false }
        var rest = bytes[...]
        while !rest.isEmpty {
            let room = capacity - buffer.count
            let taken = rest.prefix(room)
            buffer.append(contentsOf: UnsafeRawBufferPointer(rebasing: taken))
            rest = rest.dropFirst(taken.count)
            if buffer.count == capacity, !emitBuffer(emit) { return false }
        }
        return true
    }

    /// Emits what is held. False once `emit` failed.
    mutating func finish(emit: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        guard !failed else { return false }
        return buffer.isEmpty || emitBuffer(emit)
    }

    private mutating func emitBuffer(_ emit: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        emittedAny = true
        let ok = buffer.withUnsafeBytes { emit($0) }
        buffer.removeAll(keepingCapacity: true)
        if !ok { failed = true }
        return ok
    }
}
