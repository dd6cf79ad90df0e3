#if canImport(Glibc)
import Glibc
#endif
import Logging
import TodoSyncCore
import TodoSyncStore

/// Options of the HTTP application.
public struct ApplicationOptions: Sendable {
    /// The test hooks (`TodoSyncTestHooks`, linked only into the `todosync-test` executable, never
    /// into the shipping `todosync`): the test and benchmark routes, and the waits the lifecycle,
    /// deadline and idempotency tests need. nil: those paths do not exist (404) and `/healthz`,
    /// the snapshot and keyed requests ignore the hooks' parameters and headers.
    public var testHooks: (any ApplicationTestHooks)?
    /// Requests in flight per account in this process, shared by every worker's application
    /// (`TODOSYNC_ACCOUNT_IN_FLIGHT`); nil: not counted.
    public var accountInFlight: AccountInFlight?
    /// Where committed changes are announced to live-sync streams (`TODOSYNC_LIVE_PUBLISHER`);
    /// nil: no pokes (clients still catch up by pulling).
    public var livePublisher: LivePublisher?

    public init(testHooks: (any ApplicationTestHooks)? = nil, accountInFlight: AccountInFlight? = nil,
                livePublisher: LivePublisher? = nil) {
        self.testHooks = testHooks
        self.accountInFlight = accountInFlight
        self.livePublisher = livePublisher
    }
}

/// What a test build adds to the application. The one implementation (`TestHooks` in
/// `TodoSyncTestHooks`) is linked only into `todosync-test`; the shipping binary has none of it.
public protocol ApplicationTestHooks: Sendable {
    /// Registers `/healthz` (`health` plus the hooks' parameters) and the test and benchmark routes.
    func registerRoutes(on application: Application, health: @escaping RouteHandler)
    /// Runs after a keyed (`Idempotency-Key`) request's handler, inside its transaction.
    func afterIdempotentHandler(_ request: HTTPRequest)
    /// What a snapshot build runs right after its consistent read began (nil: nothing).
    func snapshotPause(_ request: HTTPRequest) throws -> (() -> Void)?
    /// The store's bugs on purpose (`StoreFaults`) this process is to run with: `list` is
    /// `TODOSYNC_TEST_INJECT` as read once at start (comma-separated names); logged on `logger`
    /// when any is on. Throws on a name it does not know.
    func storeFaults(_ list: String, logger: Logger) throws -> StoreFaults
}

/// The TodoSync HTTP API of one worker: routes requests to handlers over that worker's store and
/// turns every error into the contract's JSON error body.
public final class Application {
    let store: Store
    let logger: Logger
    let options: ApplicationOptions
    package let router = Router()
    /// Compresses this worker's responses (the server runs every response through it); routes
    /// that send bytes compressed at write time ask it whether the client accepts gzip.
    public let encoder = ResponseEncoder()
    /// The route and user of the request being (or last) handled, for logs and metrics.
    public internal(set) var observed = RequestObservation()

    public init(store: Store, logger: Logger, options: ApplicationOptions = ApplicationOptions()) {
        self.store = store
        self.logger = logger
        self.options = options
        registerHealthRoutes()
        registerAuthRoutes()
        registerTagRoutes()
        registerTodoRoutes()
        registerDailyStatRoutes()
        registerSyncRoutes()
        registerAccountRoutes()
        registerFriendRoutes()
    }

    /// Answers one request. Never throws: unexpected errors become a logged 500 with a fixed body.
    public func handle(_ request: HTTPRequest, requestID: String? = nil) -> HTTPResponse {
        observed = RequestObservation()
        store.changedVersion = nil
        if let late = startRequest(request) { return late }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return .error(.noRoute)
        case .methodNotAllowed(let allowed):
            return .error(.methodNotAllowed(allowed: allowed))
        case .found(let handler, let parameters, let pattern, let limit, let takesBody):
            if !takesBody && (request.bodyTooLarge || request.body.count > Router.noBodyLimit) {
                return .error(.bodyNotAllowed)
            }
            let context = RequestContext(request: request, pathParameters: parameters, store: store, encoder: encoder)
            observed.route = pattern
            defer { observed.userID = context.userID ?? observed.userID }
            do {
                let (counted, measuringCPU) = try admit(context, limit)
                // The request's time is charged to its account when shares are on: wall-clock
                // always (cheap), CPU only for an account past its share in wall-clock time.
                let timed = counted != nil && options.accountInFlight?.share != nil
                let started = timed ? AccountInFlight.monotonicNow() : 0
                let cpuStart = measuringCPU ? AccountInFlight.threadCPUSeconds() : 0
                defer {
                    if let counted {
                        options.accountInFlight?.leave(
                            counted, wallSeconds: timed ? AccountInFlight.monotonicNow() - started : 0,
                            cpuSeconds: measuringCPU ? AccountInFlight.threadCPUSeconds() - cpuStart : nil)
                    }
                }
                var response = try run(handler, context)
                announce(context)
                if let stream = response.stream {
                    response.stream = answeringErrors(of: stream, request, requestID: requestID,
                                                      chargedTo: timed ? counted : nil, measuringCPU: measuringCPU)
                }
                return response
            } catch {
                return response(for: error, request, requestID: requestID)
            }
        }
    }

    /// The contract's answer to an error of a request: expected ones as their `APIError`,
    /// anything else a logged 500 with a fixed body.
    private func response(for error: any Error, _ request: HTTPRequest, requestID: String?) -> HTTPResponse {
        switch error {
        case let error as DomainError:
            return failed(APIError(error), requestID: requestID)
        case let error as APIError:
            return failed(error, requestID: requestID)
        default:
            logger.error("unexpected error", metadata: [
                "request_id": "\(LogField.capped(requestID ?? "-"))",
                "method": "\(LogField.capped(request.method, limit: LogField.methodLimit))",
                "path": "\(LogField.capped(request.path))",
                "error": "\(LogField.capped(String(reflecting: error), limit: 4 * LogField.textLimit))",
            ])
            return .error(.internalError)
        }
    }

    /// A route's streamed body whose errors are answered as the route's would have been
    /// (`ResponseStream.Outcome.instead`; the FastCGI layer cuts the response off instead when
    /// part of the body is already out).
    /// A streamed body's CPU time is charged to `chargedTo`'s share too (`AccountInFlight`).
    private func answeringErrors(of stream: ResponseStream, _ request: HTTPRequest, requestID: String?,
                                 chargedTo account: Int64?, measuringCPU: Bool) -> ResponseStream {
        ResponseStream { [self] write in
            let started = account != nil ? AccountInFlight.monotonicNow() : 0
            let cpuStart = measuringCPU ? AccountInFlight.threadCPUSeconds() : 0
            defer {
                if let account {
                    options.accountInFlight?.charge(
                        account, wallSeconds: AccountInFlight.monotonicNow() - started,
                        cpuSeconds: measuringCPU ? AccountInFlight.threadCPUSeconds() - cpuStart : nil)
                }
            }
            do {
                return try stream.produce(write)
            } catch {
                return .instead(response(for: error, request, requestID: requestID))
            }
        }
    }

    /// Counts the request against its account's requests in flight (`AccountInFlight`) before
    /// anything else runs: 429 at once beyond the limit. An account over its share of the CPU
    /// while others use the process waits here first (a fraction of a second, its place in
    /// flight held), or is answered 429 with the `Retry-After` until it is back within its share.
    /// The account is the token's owner
    /// (`Store.owner(ofToken:)`: remembered, or one lookup that then stands in for the route's own
    /// token check), so every token and every spelling of the header counts against it. Returns
    /// the user counted (to be released), or nil when the route or request is not counted: a
    /// route without an account, or no well-formed bearer token (the route answers 401 itself);
    /// and whether the request's CPU time is to be measured (`AccountInFlight.Admission`).
    private func admit(_ context: RequestContext, _ limit: AccountLimit) throws -> (Int64?, measuringCPU: Bool) {
        guard case .requestsInFlight = limit, let inFlight = options.accountInFlight,
              let token = context.bearerToken() else { return (nil, false) }
        guard let owner = try store.owner(ofToken: token) else { throw DomainError.unauthenticated }
        if owner.verified { context.authenticated(as: owner.userID) }
        switch inFlight.admit(owner.userID) {
        case .admitted(let measuringCPU):
            return (owner.userID, measuringCPU)
        case .admittedAfter(let seconds):
            var pause = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
            var left = timespec()
            while nanosleep(&pause, &left) == -1 && errno == EINTR { pause = left }
            return (owner.userID, true)
        case .tooMany:
            observed.userID = owner.userID  // the request log names the account turned away
            throw AccountInFlight.refusal
        case .overShare(let retryAfterSeconds):
            observed.userID = owner.userID
            throw AccountInFlight.overShare(retryAfterSeconds: retryAfterSeconds)
        }
    }

    /// After the request's outermost commit (`run` has returned: a plain write committed in
    /// `Store.write`, an `Idempotency-Key` request's in `runIdempotent`): when it changed what the
    /// user's pull returns (its writes handed out a version: REST writes, pushes, quick-add and the
    /// derived daily stats and un-tagging they cause), a poke to the user's live-sync streams.
    /// Never fails the request (`LivePublisher`).
    /// After a route that revoked tokens (`RequestContext.closesLiveStreams`), the user's open
    /// streams are closed instead.
    /// Friends (docs/FRIENDS.md): a route that changed friends lists or requests names whose
    /// (`RequestContext.friendListChange`: `{"friendId": null}` to each); a write that changed the
    /// user's records announces `{"friendId": <user>}` to each friend's friends channel, in at most
    /// two publish requests for 500 friends, queued to the publisher's own queue
    /// (`LivePublisher.queueFriendEvent`): the write waits for neither.
    private func announce(_ context: RequestContext) {
        guard let publisher = options.livePublisher, let userID = context.userID else { return }
        if let change = context.friendListChange {
            publisher.queueFriendEvent(friendID: nil, to: change.users, padding: change.padding)
        }
        if context.closesLiveStreams {
            publisher.closeStreams(userID: userID)
            return
        }
        guard let version = store.changedVersion else { return }
        publisher.publish(userID: userID, version: version, deviceID: context.pushingDevice)
        // A failed lookup costs the friends their event only (they refresh on their next open).
        if let friends = try? store.friendIDs(of: userID), !friends.isEmpty {
            publisher.queueFriendEvent(friendID: userID, to: friends)
        }
    }

    /// The error response for an expected failure; the server's own (5xx) are logged.
    private func failed(_ error: APIError, requestID: String?) -> HTTPResponse {
        if error.status >= 500 {
            logger.warning("request failed", metadata: [
                "request_id": "\(LogField.capped(requestID ?? "-"))", "status": .stringConvertible(error.status),
                "code": "\(error.code)",
            ])
        }
        return .error(error)
    }
}
