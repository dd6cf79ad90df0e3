import Synchronization
import TodoSyncCore

/// Requests in flight per account in this responder process (contract, Errors: 429 "too many
/// requests in flight for one account, counted per account, whatever token or spelling of the
/// `Authorization` header carries them"). Shared by every worker of the process.
///
/// Counted where the account is known: after the token is resolved to its user, so twenty logins
/// (twenty tokens), other spellings of `Bearer` and over-long headers all count against the one
/// account. nginx's per-token `limit_conn` stays in front as the cheap first filter.
///
/// Per process, not per service: responders share no state, so the limit of an account across a
/// host is `limit` × the responder processes on it (and × hosts for the service). This bounds
/// what one account can take of each process (`TODOSYNC_ACCOUNT_IN_FLIGHT` of its
/// `TODOSYNC_WORKERS`), which is what keeps a bystander's requests fast.
public final class AccountInFlight: Sendable {
    /// Requests one account may have in flight in this process.
    public let limit: Int
    private let counts = Mutex<[Int64: Int]>([:])

    public init(limit: Int) {
        precondition(limit >= 1, "AccountInFlight needs a limit of at least 1")
        self.limit = limit
    }

    /// Counts one more request of `userID`; false (nothing counted) when it has `limit` already.
    func enter(_ userID: Int64) -> Bool {
        counts.withLock { counts in
            let current = counts[userID, default: 0]
            guard current < limit else { return false }
            counts[userID] = current + 1
            return true
        }
    }

    /// Ends a request that `enter` counted.
    func leave(_ userID: Int64) {
        counts.withLock { counts in
            let current = counts[userID, default: 0]
            if current <= 1 { counts.removeValue(forKey: userID) } else { counts[userID] = current - 1 }
        }
    }

    /// Requests of `userID` in flight now (for tests).
    func inFlight(_ userID: Int64) -> Int {
        counts.withLock { $0[userID, default: 0] }
    }

    /// The answer beyond the limit: 429 `rate_limited`, `Retry-After: 1`.
    static let refusal = DomainError.throttled(
        message: "Too many requests in flight for this account; retry shortly.", retryAfterSeconds: 1)
}

/// Which per-account limit a route's requests count against.
public enum AccountLimit: Sendable {
    /// Requests in flight (`AccountInFlight`): every route that needs a bearer token.
    case requestsInFlight
    /// None: routes without an account (register, login, health, benchmark).
    case notCounted
    /// None, on purpose: the routes that take an account back from whoever holds one of its
    /// tokens (`POST /auth/logout`, `DELETE /account/sessions/:id`, `POST /account/delete`). Counted,
    /// a thief keeping the account's requests in flight with a stolen token kept its owner from
    /// revoking that token (429 until the thief paused; issue 34). They must always get through:
    /// nginx gives them a location without the per-token `limit_conn` too (the `location ~
    /// ^/api/v1/account/(delete|sessions/...)$` after `location /api/`; logout is under
    /// `/api/v1/auth/`, which has none). Each is cheap (one statement), or bounded elsewhere (the
    /// delete's password check: the hash slots and the account's failed-login lockout).
    case takesTheAccountBack
    /// Open live-sync streams (`GET /api/v1/sync/live`), never requests in flight (contract, "Sync:
    /// live"): the responder only authenticates the stream and hands it to nginx, whose nchan
    /// subscriber location holds it and counts the account's open streams (`limit_conn
    /// todosync_streams`, TODOSYNC_LIVE_STREAMS in nginx/limits.env).
    case openStreams
}
