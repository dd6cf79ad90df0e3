import CDeflate

/// gzip members (RFC 1952) around deflate streams compressed elsewhere: by MariaDB's `COMPRESS()`
/// at write time, so that a read sends stored bytes instead of compressing per request.
public enum GzipMember {
    /// Bodies shorter than this are sent as they are: a member's 18 bytes of header and trailer
    /// eat the gain (`ResponseEncoder`; nginx's `gzip_min_length` is the same).
    public static let worthwhileLength = 1000

    /// The member holding the bytes that MariaDB's `COMPRESS()` turned into `compressed`, given
    /// their `CRC32()`; nil when `compressed` is not such a value.
    ///
    /// `COMPRESS()` answers the input's length (4 bytes, little-endian, top two bits clear), then
    /// the zlib stream of zlib's `compress()` (RFC 1950: 2 header bytes, the deflate stream, the
    /// Adler-32), then a `.` when that stream's last byte is a space. The member is gzip's header,
    /// the same deflate stream, then the CRC-32 and the length. Where the value ends in a space
    /// and a dot (one stored value in 65,536), the stream is decompressed to find its end.
    public static func fromCompress(_ compressed: UnsafeRawBufferPointer, crc32: UInt32) -> [UInt8]? {
        let bytes = compressed.bindMemory(to: UInt8.self)
        // The length, the zlib header, at least one deflate byte, the Adler-32.
        guard bytes.count >= 4 + 2 + 1 + 4 else { return nil }
        let length = (UInt32(bytes[0]) | UInt32(bytes[1]) << 8 | UInt32(bytes[2]) << 16 | UInt32(bytes[3]) << 24)
        let (cmf, flg) = (UInt32(bytes[4]), UInt32(bytes[5]))
        // Deflate, no preset dictionary, a valid header check.
        guard length < 1 << 30, cmf & 0x0F == 8, flg & 0x20 == 0, (cmf << 8 | flg) % 31 == 0 else { return nil }
        var end = bytes.count
        if bytes[end - 1] == UInt8(ascii: "."), bytes[end - 2] == UInt8(ascii: " ") {
            guard let streamLength = zlibStreamLength(UnsafeRawBufferPointer(rebasing: compressed[4...]),
                                                      uncompressed: Int(length)) else { return nil }
            end = 4 + streamLength
        }
        let deflate = UnsafeRawBufferPointer(rebasing: compressed[6 ..< end - 4])
        let header: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]  // deflate, no flags, no time, OS unknown
        return [UInt8](unsafeUninitializedCapacity: header.count + deflate.count + 8) { out, initialized in
            var at = 0
            func put(_ source: UnsafeRawBufferPointer) {
                UnsafeMutableRawBufferPointer(UnsafeMutableBufferPointer(rebasing: out[at ..< at + source.count]))
                    .copyMemory(from: source)
                at += source.count
            }
            func put(littleEndian value: UInt32) {
                for shift in stride(from: 0, to: 32, by: 8) { out[at] = UInt8(truncatingIfNeeded: value >> shift); at += 1 }
            }
            header.withUnsafeBytes { put($0) }
            put(deflate)
            put(littleEndian: crc32)
            put(littleEndian: length)
            initialized = at
        }
    }

    /// How many bytes of `zlib` its stream takes, if it is a valid one that decompresses to
    /// exactly `uncompressed` bytes.
    private static func zlibStreamLength(_ zlib: UnsafeRawBufferPointer, uncompressed: Int) -> Int? {
        guard let decompressor = libdeflate_alloc_decompressor() else { return nil }
        defer { libdeflate_free_decompressor(decompressor) }
        var output = [UInt8](repeating: 0, count: max(uncompressed, 1))
        var read = 0, written = 0
        let result = output.withUnsafeMutableBytes { out in
            libdeflate_zlib_decompress_ex(decompressor, zlib.baseAddress, zlib.count, out.baseAddress, out.count,
                                          &read, &written)
        }
        return result == LIBDEFLATE_SUCCESS && written == uncompressed ? read : nil
    }
}
