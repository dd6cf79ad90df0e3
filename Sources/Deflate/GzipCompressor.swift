import CDeflate
import CISAL

/// Whole-buffer gzip (RFC 1952) through ISA-L's igzip at its level 1: on a 164 KB pull page
/// 165 µs against libdeflate's 388 µs at its fastest level, for 7 % more bytes (22.3 % of the
/// page against 20.7 %; 2 KB and 40 KB bodies: 9 against 12 µs, 46 against 93 µs;
/// docs/BENCHMARKS.md). libdeflate had replaced zlib, which cost 40 % more than it.
/// One compressor per thread: it owns igzip's state and level buffer.
public final class GzipCompressor {
    /// igzip's stream state (~80 KB; zeroed once here, each run's init sets what it reads) and
    /// its working memory for level 1 (hash tables and tokens, 276 KB), allocated once.
    private let stream: UnsafeMutablePointer<isal_zstream>
    private let levelBuffer: UnsafeMutablePointer<UInt8>
    private let levelBufferSize = Int(cisal_level1_buffer_size)

    public init() {
        stream = .allocate(capacity: 1)
        stream.initialize(to: isal_zstream())
        levelBuffer = .allocate(capacity: levelBufferSize)
    }

    deinit {
        stream.deallocate()
        levelBuffer.deallocate()
    }

    /// `bytes` as one gzip member.
    public func gzip(_ bytes: [UInt8]) -> [UInt8] {
        // Room for stored blocks (5 bytes per 64 KiB), which igzip falls back to when its output
        // would be larger, and the header and trailer; doubled in the unlikely case it is not.
        var capacity = bytes.count + bytes.count / 8192 + 1024
        while true {
            if let member = gzip(bytes, capacity: capacity) { return member }
            capacity *= 2
        }
    }

    /// One stateless igzip run into `capacity` bytes, written in place (no zero fill, no trim);
    /// nil when they were too few.
    func gzip(_ bytes: [UInt8], capacity: Int) -> [UInt8]? {
        var overflowed = false
        let member = [UInt8](unsafeUninitializedCapacity: capacity) { out, initialized in
            isal_deflate_stateless_init(stream)
            stream.pointee.level = 1
            stream.pointee.level_buf = levelBuffer
            stream.pointee.level_buf_size = UInt32(levelBufferSize)
            stream.pointee.gzip_flag = UInt16(IGZIP_GZIP)
            stream.pointee.end_of_stream = 1
            stream.pointee.flush = UInt16(NO_FLUSH)
            stream.pointee.next_out = out.baseAddress
            stream.pointee.avail_out = UInt32(out.count)
            let result = bytes.withUnsafeBytes { input -> Int32 in
                stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: UInt8.self))
                stream.pointee.avail_in = UInt32(input.count)
                return isal_deflate_stateless(stream)
            }
            if result == STATELESS_OVERFLOW {
                overflowed = true
                initialized = 0
                return
            }
            precondition(result == COMP_OK, "igzip: error \(result)")
            initialized = Int(stream.pointee.total_out)
        }
        return overflowed ? nil : member
    }
}

/// Decompresses one gzip member whose uncompressed size is at most `limit` bytes; nil when the
/// input is not valid gzip or is larger. The output is allocated at the size the member's
/// trailer gives (ISIZE), which libdeflate checks. `check-feed` decompresses every stored day
/// list with it: a buffer of `limit` bytes zero-filled per call, as this was, made check-feed
/// over the integration suite's database outlast its 90 s, and `TodoDaysTests` take 24 s instead
/// of 4. For tools and tests: the server never decompresses.
public func gunzip(_ bytes: [UInt8], limit: Int = 64 << 20) -> [UInt8]? {
    guard bytes.count >= 18 else { return nil } // header 10, trailer 8
    let size = bytes.suffix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
    guard size <= limit, let decompressor = libdeflate_alloc_decompressor() else { return nil }
    defer { libdeflate_free_decompressor(decompressor) }
    var result = LIBDEFLATE_BAD_DATA
    let output = [UInt8](unsafeUninitializedCapacity: max(size, 1)) { out, initialized in
        var written = 0
        result = bytes.withUnsafeBytes { input in
            libdeflate_gzip_decompress(decompressor, input.baseAddress, input.count, out.baseAddress, size, &written)
        }
        initialized = result == LIBDEFLATE_SUCCESS ? written : 0
    }
    return result == LIBDEFLATE_SUCCESS && output.count == size ? output : nil
}
