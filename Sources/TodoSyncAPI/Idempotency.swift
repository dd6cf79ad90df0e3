#if canImport(Glibc)
import Glibc
#endif
import TodoSyncCore
import TodoSyncStore

extension APIError {
    /// 409: the first request with this `Idempotency-Key` is still running; retry after
    /// `retryAfterSeconds` (1 while it is seen running, else when it would be taken over).
    static func requestInProgress(retryAfterSeconds: Int64) -> APIError {
        APIError(
            status: 409, code: "request_in_progress",
            message: "A request with this Idempotency-Key is still running; retry after the Retry-After seconds.",
            headers: [HTTPHeader("Retry-After", "\(max(retryAfterSeconds, 1))")])
    }

    /// 422: the `Idempotency-Key` was used before for another method, path or body.
    static let idempotencyKeyReused = APIError(
        status: 422, code: "idempotency_key_reused",
        message: "This Idempotency-Key was used for a different request.")

    static let malformedIdempotencyKey = APIError(
        status: 400, code: "bad_request",
        message: "Idempotency-Key must be 1 to 100 printable ASCII characters.",
        details: [FieldProblem(field: "Idempotency-Key", problem: "1 to 100 printable ASCII characters")])
}

extension Application {
    /// Headers of an answer that are kept with it for a replay (nginx adds the others).
    static let replayedHeaders: Set<String> = ["content-type", "etag", "location"]

    /// Starts a request: its deadline from nginx's handover time (`X-TodoSync-Start`, nginx's
    /// `$msec`, which nginx sets itself and a client cannot) and the budget. A request that
    /// arrives past it is answered 503 without any work (nothing applied).
    func startRequest(_ request: HTTPRequest) -> HTTPResponse? {
        let start = request.header("x-todosync-start").flatMap(RequestDeadline.parseMsec)
        let deadline = RequestDeadline(start: start, budgetMilliseconds: store.requestBudgetMilliseconds)
        store.deadline = deadline
        return deadline.hasPassed ? .error(APIError(DomainError.unavailable)) : nil
    }

    /// Routes that ignore `Idempotency-Key`. Register and login are not authenticated. The
    /// account's password change and delete check a password, and a wrong one must count as a
    /// failed login even though the request applies nothing: inside the keyed request's one
    /// transaction that count would be rolled back with it, so guesses would be free. A repeat of
    /// either is safe without a key (a password change repeated after it applied is a 401 for
    /// the old password; a repeated delete is a 401 for the token it revoked).
    static let routesWithoutIdempotency: Set<String> = [
        "/api/v1/auth/register", "/api/v1/auth/login", "/api/v1/account/password", "/api/v1/account/delete",
    ]

    /// Runs a route's handler. An authenticated `POST` with an `Idempotency-Key` (contract,
    /// Conventions) runs exactly once per user and key: its answer is stored in the transaction
    /// of its write and replayed to a repeat; a repeat while it runs is 409, the key with another
    /// request 422. The routes in `routesWithoutIdempotency` ignore the header; a repeated
    /// logout is 401 (its token is gone), as without a key.
    func run(_ handler: RouteHandler, _ context: RequestContext) throws -> HTTPResponse {
        let request = context.request
        guard request.method == "POST", let key = request.header("idempotency-key"),
              !Self.routesWithoutIdempotency.contains(request.path) else {
            return try handler(context)
        }
        guard (1...100).contains(key.utf8.count), key.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw APIError.malformedIdempotencyKey
        }
        let userID = try context.requireUser()
        let fingerprint = Store.idempotencyFingerprint(method: request.method, path: request.path, body: request.body)
        switch try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: fingerprint) {
        case .completed(let stored) where stored.replay:
            // The body was not kept: the request runs again and rebuilds it, changing nothing.
            store.replayOnly = true
            defer { store.replayOnly = false }
            return try handler(context)
        case .completed(let stored):
            return HTTPResponse(status: stored.status, headers: stored.headers.map { HTTPHeader($0.name, $0.value) },
                                body: stored.body)
        case .inProgress(let retryAfterSeconds):
            throw APIError.requestInProgress(retryAfterSeconds: retryAfterSeconds)
        case .reused:
            throw APIError.idempotencyKeyReused
        case .claimed(let ticket):
            do {
                let response = try store.runIdempotent(ticket, {
                    let response = try handler(context)
                    options.testHooks?.afterIdempotentHandler(request)
                    return response
                }, answer: { response in
                    guard (200..<300).contains(response.status) else { return nil }
                    return StoredResponse(
                        status: response.status,
                        headers: response.headers.filter { Self.replayedHeaders.contains($0.name.lowercased()) }
                            .map { ($0.name, $0.value) },
                        body: response.isRebuiltByRepeat ? [] : response.body, replay: response.isRebuiltByRepeat)
                })
                if !(200..<300).contains(response.status) { store.releaseIdempotencyKey(ticket) }
                return response
            } catch {
                store.releaseIdempotencyKey(ticket)
                throw error
            }
        }
    }
}
