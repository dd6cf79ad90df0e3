import Foundation

/// SHA-256 (FIPS 180-4), to check a downloaded snapshot against the response's `Repr-Digest`.
/// The client links no crypto library (the server's OpenSSL shim is not part of it, and
/// swift-crypto would be a new dependency for one hash), so the hash is here: plain Swift,
/// fed in chunks, so a file of any size is hashed in a bounded buffer.
struct SHA256Digest {
    private var state: [UInt32] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
    ]
    private var pending: [UInt8] = []
    private var length: UInt64 = 0

    private static let k: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length += UInt64(bytes.count)
        var offset = 0
        if !pending.isEmpty {
            let take = min(64 - pending.count, bytes.count)
            pending.append(contentsOf: bytes[0..<take])
            offset = take
            if pending.count == 64 {
                let block = pending
                pending = []
                block.withUnsafeBytes { compress($0.baseAddress!) }
            }
        }
        while bytes.count - offset >= 64 {
            compress(bytes.baseAddress! + offset)
            offset += 64
        }
        if offset < bytes.count { pending.append(contentsOf: bytes[offset...]) }
    }

    mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The digest; the value is spent afterwards.
    mutating func finish() -> [UInt8] {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        while (pending.count + tail.count) % 64 != 56 { tail.append(0) }
        for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        let saved = length
        tail.withUnsafeBytes { update($0) }
        length = saved
        var out: [UInt8] = []
        for word in state { for shift in [24, 16, 8, 0] { out.append(UInt8(truncatingIfNeeded: word >> UInt32(shift))) } }
        return out
    }

    private mutating func compress(_ block: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            for i in 0..<16 { w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
            for i in 16..<64 {
                let s0 = w[i - 15].rotr(7) ^ w[i - 15].rotr(18) ^ (w[i - 15] >> 3)
                let s1 = w[i - 2].rotr(17) ^ w[i - 2].rotr(19) ^ (w[i - 2] >> 10)
                w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
            }
            var a = state[0], b = state[1], c = state[2], d = state[3], e = state[4], f = state[5], g = state[6], h = state[7]
            Self.k.withUnsafeBufferPointer { k in
                for i in 0..<64 {
                    let s1 = e.rotr(6) ^ e.rotr(11) ^ e.rotr(25)
                    let choice = (e & f) ^ (~e & g)
                    let t1 = h &+ s1 &+ choice &+ k[i] &+ w[i]
                    let s0 = a.rotr(2) ^ a.rotr(13) ^ a.rotr(22)
                    let majority = (a & b) ^ (a & c) ^ (b & c)
                    let t2 = s0 &+ majority
                    h = g; g = f; f = e; e = d &+ t1; d = c; c = b; b = a; a = t1 &+ t2
                }
            }
            state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
            state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
        }
    }

    /// The SHA-256 of a file's bytes, read 1 MiB at a time.
    static func ofFile(atPath path: String) throws -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile) }
        defer { try? handle.close() }
        var digest = SHA256Digest()
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty { digest.update(chunk) }
        return digest.finish()
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
        var digest = SHA256Digest()
        guard let handle = FileHandle(forReadingAtPath: path) else { throw CocoaError(.fileReadNoSuchFile) }
        defer { try? handle.close() }
        var left = end
        while left > 0, let chunk = try handle.read(upToCount: Int(min(left, 1 << 20))), !chunk.isEmpty {
            digest.update(chunk)
            left -= Int64(chunk.count)
        }
        guard left == 0 else { throw CocoaError(.fileReadCorruptFile) }
        bytes = end
        let hashed = digest
        hashing = Task.detached { hashed }
    }
}

private extension UInt32 {
    func rotr(_ n: UInt32) -> UInt32 { (self >> n) | (self << (32 - n)) }
}
