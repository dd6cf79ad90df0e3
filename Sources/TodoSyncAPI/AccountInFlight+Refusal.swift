import TodoSyncCore

extension AccountInFlight {
    /// The answer beyond the limit: 429 `rate_limited`, `Retry-After: 1`.
    static let refusal = DomainError.throttled(
        message: "Too many requests in flight for this account; retry shortly.", retryAfterSeconds: 1)

    /// The answer to an account over its share of the CPU for longer than a request may wait:
    /// 429 `rate_limited` with the seconds until it is back within its share.
    static func overShare(retryAfterSeconds: Int64) -> DomainError {
        .throttled(message: "This account is using more than its share of the server; retry after the delay.",
                   retryAfterSeconds: retryAfterSeconds)
    }
}
