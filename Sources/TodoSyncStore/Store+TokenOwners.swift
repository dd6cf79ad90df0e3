import Credentials
import Synchronization

/// Which account each recently seen bearer token belongs to, shared by every worker of one
/// process (`StoreConfiguration.tokenOwners`). It serves one purpose: counting a request against
/// its account's requests in flight *before* the route checks its token, so the hot reads that
/// check the token inside their one statement keep their single round trip. It never grants
/// access: every route still checks the token itself. A token's owner never changes (tokens are
/// random and never reissued), so an entry is never wrong about whose token it was; a revoked
/// token's entry only means its requests still count against that account until the route
/// answers 401 (or 429 when that account is at its limit).
///
/// Keyed by the token's SHA-256 (what the database stores), never the token. Bounded: when full
/// it starts over empty, which costs each token one lookup again.
public final class TokenOwners: Sendable {
    public let capacity: Int
    private let owners = Mutex<[[UInt8]: Int64]>([:])

    public init(capacity: Int = 50_000) {
        precondition(capacity >= 1, "TokenOwners needs room for one token")
        self.capacity = capacity
    }

    func owner(ofHash hash: [UInt8]) -> Int64? {
        owners.withLock { $0[hash] }
    }

    func remember(_ token: String, owner: Int64) {
        remember(hash: BearerToken.hash(token), owner: owner)
    }

    func remember(hash: [UInt8], owner: Int64) {
        owners.withLock {
            if $0.count >= capacity { $0.removeAll(keepingCapacity: true) }
            $0[hash] = owner
        }
    }
}

/// The account a bearer token names, for counting a request against that account.
public struct TokenOwner: Sendable, Equatable {
    public let userID: Int64
    /// Checked against the database just now (valid at this instant); false: remembered from an
    /// earlier check (`TokenOwners`), so the route must still check the token itself.
    public let verified: Bool
}

extension Store {
    /// The account `token` belongs to: remembered from an earlier request of this process, else
    /// checked in the database (one primary-key lookup, as `authenticate(token:)`) and
    /// remembered. Nil when the token is unknown, revoked or expired.
    public func owner(ofToken token: String) throws -> TokenOwner? {
        let hash = tokenHash(token)
        if let userID = configuration.tokenOwners.owner(ofHash: hash) {
            return TokenOwner(userID: userID, verified: false)
        }
        guard let userID = try authenticate(token: token) else { return nil }
        configuration.tokenOwners.remember(hash: hash, owner: userID)
        return TokenOwner(userID: userID, verified: true)
    }
}
