import CArgon2

/// Argon2id password hashing at OWASP's recommended parameters (m = 19 MiB, t = 2, p = 1),
/// stored in the standard encoded form (`$argon2id$v=19$m=19456,t=2,p=1$salt$hash`).
public struct PasswordHasher: Sendable {
    /// Memory cost in KiB.
    public let memoryKiB: UInt32
    /// Number of passes.
    public let iterations: UInt32
    public let parallelism: UInt32

    public init(memoryKiB: UInt32 = 19 * 1024, iterations: UInt32 = 2, parallelism: UInt32 = 1) {
        self.memoryKiB = memoryKiB
        self.iterations = iterations
        self.parallelism = parallelism
    }

    /// Failure inside libargon2 (out of memory, bad parameters).
    public struct HashingError: Error, Sendable {
        public let code: Int32
    }

    /// Hashes `password` with a fresh 16-byte random salt.
    public func hash(_ password: String) throws -> String {
        let salt = try SecureRandom.bytes(16)
        let passwordBytes = Array(password.utf8)
        let hashLength = 32
        let encodedLength = argon2_encodedlen(iterations, memoryKiB, parallelism, UInt32(salt.count),
                                              UInt32(hashLength), Argon2_id)
        var encoded = [CChar](repeating: 0, count: encodedLength)
        let code = HashMetrics.measure(verify: false) {
            argon2id_hash_encoded(iterations, memoryKiB, parallelism, passwordBytes, passwordBytes.count,
                                  salt, salt.count, hashLength, &encoded, encodedLength)
        }
        guard code == ARGON2_OK.rawValue else { throw HashingError(code: code) }
        return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether `password` matches an encoded hash made by `hash(_:)`.
    public func verify(_ password: String, against encodedHash: String) -> Bool {
        let passwordBytes = Array(password.utf8)
        return HashMetrics.measure(verify: true) {
            argon2id_verify(encodedHash, passwordBytes, passwordBytes.count) == ARGON2_OK.rawValue
        }
    }

    /// A hash of a random password, to verify against when the account does not exist, so that
    /// "unknown email" and "wrong password" take the same time.
    public func decoyHash() -> String {
        (try? hash("decoy-password-\(UInt64.random(in: 0...UInt64.max))")) ?? ""
    }
}
