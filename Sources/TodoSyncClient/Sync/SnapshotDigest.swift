import Foundation

#if canImport(CommonCrypto)
import CommonCrypto
#else
import COpenSSL
#endif

/// SHA-256, to check a downloaded snapshot against the response's `Repr-Digest`, fed in chunks
/// so a file of any size is hashed in a bounded buffer. The platform's implementation:
/// CommonCrypto on Apple systems, OpenSSL's libcrypto on Linux (already in the process there:
/// FoundationNetworking's libcurl links it). They use the CPU's SHA extensions; the plain-Swift
/// hash this replaces ran at about 200 MB/s, which made hashing, not the network, the bound of a
/// cached 176 MB snapshot's download (docs/BENCHMARKS.md). A value: a copy hashes on by itself.
struct SHA256Digest: Sendable {
    #if canImport(CommonCrypto)
    private var context = CC_SHA256_CTX()

    init() { CC_SHA256_Init(&context) }

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var offset = 0
        while offset < bytes.count {  // CC_LONG is 32 bits
            let count = min(bytes.count - offset, 1 << 30)
            CC_SHA256_Update(&context, bytes.baseAddress! + offset, CC_LONG(count))
            offset += count
        }
    }

    /// The digest; the value is spent afterwards.
    mutating func finish() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(CC_SHA256_DIGEST_LENGTH))
        CC_SHA256_Final(&out, &context)
        return out
    }
    #else
    /// An EVP context, copied before a write when another value shares it (copy on write, as
    /// Array does): a context that two values share is only read, hence Sendable.
    private final class Context: @unchecked Sendable {
        let pointer: OpaquePointer
        init() {
            guard let pointer = EVP_MD_CTX_new(), EVP_DigestInit_ex(pointer, EVP_sha256(), nil) == 1 else {
                fatalError("libcrypto: cannot start a SHA-256")
            }
            self.pointer = pointer
        }
        init(copying other: Context) {
            guard let pointer = EVP_MD_CTX_new(), EVP_MD_CTX_copy_ex(pointer, other.pointer) == 1 else {
                fatalError("libcrypto: cannot copy a SHA-256")
            }
            self.pointer = pointer
        }
        deinit { EVP_MD_CTX_free(pointer) }
    }
    private var context = Context()

    init() {}

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        guard EVP_DigestUpdate(context.pointer, base, bytes.count) == 1 else { fatalError("libcrypto: SHA-256 update failed") }
    }

    /// The digest; the value is spent afterwards.
    mutating func finish() -> [UInt8] {
        if !isKnownUniquelyReferenced(&context) { context = Context(copying: context) }
        var out = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context.pointer, &out, &length) == 1 else { fatalError("libcrypto: SHA-256 final failed") }
        return out
    }
    #endif

    mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The SHA-256 of a file's bytes, read 1 MiB at a time.
    static func ofFile(atPath path: String) throws -> [UInt8] {
        var digest = try hashing(fileAt: path)
        return digest.finish()
    }

    /// A digest fed the file's first `length` bytes (all of them when nil), read 1 MiB at a
    /// time, not finished; a file shorter than `length` is an error.
    static func hashing(fileAt path: String, length: Int64? = nil) throws -> SHA256Digest {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile) }
        defer { try? handle.close() }
        var digest = SHA256Digest()
        var left = length ?? .max
        while left > 0, let chunk = try handle.read(upToCount: Int(min(left, 1 << 20))), !chunk.isEmpty {
            digest.update(chunk)
            left -= Int64(chunk.count)
        }
        if let length, left != 0 { throw CocoaError(.fileReadCorruptFile, userInfo: [NSFilePathErrorKey: path, "length": length]) }
        return digest
    }

    /// The value of an RFC 9530 `Repr-Digest` header's `sha-256` member (`sha-256=:BASE64:`),
    /// decoded; nil when the header names no SHA-256.
    static func fromReprDigest(_ header: String) -> [UInt8]? {
        for member in header.split(separator: ",") {
            let parts = member.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "sha-256" else { continue }
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            guard value.hasPrefix(":"), value.hasSuffix(":"), value.count > 2 else { return nil }
            return Data(base64Encoded: String(value.dropFirst().dropLast())).map { [UInt8]($0) }
        }
        return nil
    }
}

/// The SHA-256 of a file written front to back, computed while it is written: each appended
/// range is hashed on another thread while the next one downloads (at most one range waits, so
/// memory stays at two ranges). Bytes already on disk (a download an earlier run began or
/// finished) are read back and hashed first, so the digest is always of the whole file.
struct RunningFileDigest {
    private var hashing: Task<SHA256Digest, Error>?
    /// Bytes of the file the digest covers (hashed or being hashed).
    private(set) var bytes: Int64 = 0

    /// Forgets everything hashed (the file starts over).
    mutating func reset() {
        hashing?.cancel()
        hashing = nil
        bytes = 0
    }

    /// Hashes `data`, the file's bytes from `offset`; the bytes before it come from `path`
    /// when the digest does not cover them yet.
    mutating func add(_ data: Data, at offset: Int64, of path: String) async throws {
        if offset != bytes { try await catchUp(path: path, through: offset) }
        let hashed = try await current()
        bytes += Int64(data.count)
        hashing = Task.detached {
            var digest = hashed
            digest.update(data)
            return digest
        }
    }

    /// The digest of the file's first `length` bytes (read from `path` where not hashed yet).
    mutating func finish(path: String, length: Int64) async throws -> [UInt8] {
        if bytes != length { try await catchUp(path: path, through: length) }
        var digest = try await current()
        return digest.finish()
    }

    private func current() async throws -> SHA256Digest {
        try await hashing?.value ?? SHA256Digest()
    }

    /// Hashes the file's bytes from the start through `end` (any earlier digest is of bytes
    /// that may no longer be the file's: start over from disk).
    private mutating func catchUp(path: String, through end: Int64) async throws {
        reset()
        guard end > 0 else { return }
        let hashed = try SHA256Digest.hashing(fileAt: path, length: end)
        bytes = end
        hashing = Task.detached { hashed }
    }
}
