#if canImport(Glibc)
import Glibc
#endif
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

/// SHA-256 of a file's bytes, read in chunks (a snapshot file may be hundreds of megabytes).
public enum FileDigest {
    public struct Failure: Error, Sendable {}

    public static func sha256(ofFileAt path: String) throws -> [UInt8] {
        guard let file = fopen(path, "rb") else { throw Failure() }
        defer { fclose(file) }
        guard let context = EVP_MD_CTX_new() else { throw Failure() }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1 else { throw Failure() }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let read = fread(&buffer, 1, buffer.count, file)
            if read > 0 { guard EVP_DigestUpdate(context, buffer, read) == 1 else { throw Failure() } }
            if read < buffer.count {
                guard ferror(file) == 0 else { throw Failure() }
                break
            }
        }
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(context, &digest, &length) == 1 else { throw Failure() }
        return digest
    }
}
