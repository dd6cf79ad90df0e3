import COpenSSL
import TodoSyncCore

/// Cryptographically secure random bytes from OpenSSL's CSPRNG.
public enum SecureRandom {
    /// The CSPRNG could not produce bytes.
    public struct Failure: Error, Sendable {}

    public static func bytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else { throw Failure() }
        return bytes
    }
}

/// Bearer tokens: 256 random bits, base64url-encoded for the client; only their SHA-256 is stored.
public enum BearerToken {
    /// A new token string (43 characters).
    public static func generate() throws -> String {
        Base64URL.encode(try SecureRandom.bytes(32))
    }

    /// The value stored and looked up in the database.
    public static func hash(_ token: String) -> [UInt8] {
        sha256(Array(token.utf8))
    }

    /// SHA-256 of `bytes`.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        _ = SHA256(bytes, bytes.count, &digest)
        return digest
    }
}
