import Logging
import TodoSyncCore
import TodoSyncStore

/// Options of the HTTP application.
public struct ApplicationOptions: Sendable {
    /// Registers the test and benchmark routes: `GET /healthz?delay_ms=N` and `?die_mid_body_ms=N`
    /// for lifecycle tests, `GET /__bench/fastcgi` for the benchmark. Never on in production;
    /// off, those paths do not exist (404) and `/healthz` ignores the hooks' parameters.
    public var enableTestHooks = false

    public init(enableTestHooks: Bool = false) {
        self.enableTestHooks = enableTestHooks
    }
}

/// The TodoSync HTTP API of one worker: routes requests to handlers over that worker's store and
/// turns every error into the contract's JSON error body.
public final class Application {
    let store: Store
    let logger: Logger
    let options: ApplicationOptions
    let router = Router()
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
    }

    /// Answers one request. Never throws: unexpected errors become a logged 500 with a fixed body.
    public func handle(_ request: HTTPRequest, requestID: String? = nil) -> HTTPResponse {
        observed = RequestObservation()
        if let late = startRequest(request) { return late }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return .error(.noRoute)
        case .methodNotAllowed(let allowed):
            return .error(.methodNotAllowed(allowed: allowed))
        case .found(let handler, let parameters, let pattern):
            let context = RequestContext(request: request, pathParameters: parameters, store: store)
            observed.route = pattern
            defer { observed.userID = context.userID }
            do {
                return try run(handler, context)
            } catch let error as DomainError {
                return failed(APIError(error), requestID: requestID)
            } catch let error as APIError {
                return failed(error, requestID: requestID)
            } catch {
                logger.error("unexpected error", metadata: [
                    "request.id": "\(requestID ?? "-")", "method": "\(request.method)", "path": "\(request.path)",
                    "error": "\(String(reflecting: error))",
                ])
                return .error(.internalError)
            }
        }
    }

    /// The error response for an expected failure; the server's own (5xx) are logged.
    private func failed(_ error: APIError, requestID: String?) -> HTTPResponse {
        if error.status >= 500 {
            logger.warning("request failed", metadata: [
                "request.id": "\(requestID ?? "-")", "status": "\(error.status)", "code": "\(error.code)",
            ])
        }
        return .error(error)
    }
}
