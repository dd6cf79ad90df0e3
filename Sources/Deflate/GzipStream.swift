import CZlib

/// gzip (RFC 1952, one member) of a body that is compressed while it is produced, through zlib:
/// ``GzipCompressor`` compresses whole buffers, which a streamed body never is.
/// Memory is bounded whatever the body's length: zlib's state (about 256 KB at level 1) plus one
/// output buffer of `outputBytes`. One stream per body; not thread-safe.
public final class GzipStream {
    /// Heap-allocated: zlib's state points back at its `z_stream` and refuses one that moved.
    private let stream: UnsafeMutablePointer<z_stream>
    private let output: UnsafeMutableRawBufferPointer
    private var finished = false

    /// `level`: 1 (fastest) to 9 (smallest). `outputBytes`: the most handed to `emit` at once.
    public init(level: Int32 = 1, outputBytes: Int = 64 * 1024) {
        precondition((1...9).contains(level), "zlib level must be 1...9")
        precondition(outputBytes > 0, "the output buffer needs room")
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        output = .allocate(byteCount: outputBytes, alignment: 16)
        // windowBits 15 + 16: a gzip header and trailer instead of zlib's.
        let status = deflateInit2_(
            stream, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY, zlibVersion(), Int32(MemoryLayout<z_stream>.size))
        precondition(status == Z_OK, "zlib: deflateInit2 failed (\(status))")
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
        output.deallocate()
    }

    /// Compresses `input`, handing compressed bytes to `emit` whenever the output buffer fills.
    /// False when `emit` refused bytes (the reader went away): stop producing.
    public func compress(_ input: UnsafeRawBufferPointer, emit: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        precondition(!finished, "GzipStream: compress after finish")
        guard !input.isEmpty else { return true }
        return run(input, flush: Z_NO_FLUSH, emit: emit)
    }

    /// Ends the member: the rest of the compressed bytes and the gzip trailer go to `emit`.
    public func finish(emit: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        precondition(!finished, "GzipStream: finish twice")
        finished = true
        return run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH, emit: emit)
    }

    private func run(_ input: UnsafeRawBufferPointer, flush: Int32, emit: (UnsafeRawBufferPointer) -> Bool) -> Bool {
        stream.pointee.next_in = input.baseAddress.map {
            UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self))
        }
        stream.pointee.avail_in = UInt32(input.count)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.avail_in = 0
        }
        while true {
            stream.pointee.next_out = output.baseAddress!.assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = UInt32(output.count)
            let status = deflate(stream, flush)
            precondition(status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR, "zlib: deflate failed (\(status))")
            let produced = output.count - Int(stream.pointee.avail_out)
            if produced > 0, !emit(UnsafeRawBufferPointer(rebasing: output[0..<produced])) { return false }
            // More output is pending while zlib filled the whole buffer; Z_FINISH runs to the end.
            if flush == Z_FINISH ? status == Z_STREAM_END : stream.pointee.avail_out != 0 { return true }
        }
    }
}
