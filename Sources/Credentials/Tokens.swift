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

    /// SHA-256 of `bytes`. Through `EVP_Digest` with the algorithm fetched once: OpenSSL 3's
    /// one-shot `SHA256()` fetches it from the provider store on every call (`EVP_Q_digest`), about
    /// two thirds of its ~12,000 instructions for a token, and every request hashes its token.
    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        guard EVP_Digest(bytes, bytes.count, &digest, nil, sha256Algorithm.pointer, nil) == 1 else {
            fatalError("libcrypto: SHA-256 failed")
        }
        return digest
    }

    /// The provider's SHA-256, fetched once per process and never freed (it is shared and
    /// immutable, safe from any thread).
    private static let sha256Algorithm = FetchedDigest(name: "SHA256")
}

/// An `EVP_MD` fetched from the default provider, kept for the life of the process.
private struct FetchedDigest: @unchecked Sendable {
    let pointer: OpaquePointer

    init(name: String) {
        guard let pointer = EVP_MD_fetch(nil, name, nil) else { fatalError("libcrypto: no \(name)") }
        self.pointer = pointer
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
