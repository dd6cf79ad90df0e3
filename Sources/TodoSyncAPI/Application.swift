import Logging
import TodoSyncCore
import TodoSyncStore

/// Options of the HTTP application.
public struct ApplicationOptions: Sendable {
    /// Enables `GET /healthz?delay_ms=N` for lifecycle tests. Never on in production.
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
        if options.enableTestHooks { registerSlowWriteTestRoute() }
    }

    /// Answers one request. Never throws: unexpected errors become a logged 500 with a fixed body.
    public func handle(_ request: HTTPRequest, requestID: String? = nil) -> HTTPResponse {
        if let late = startRequest(request) { return late }
        switch router.match(method: request.method, path: request.path) {
        case .notFound:
            return .error(.noRoute)
        case .methodNotAllowed(let allowed):
            return .error(.methodNotAllowed(allowed: allowed))
        case .found(let handler, let parameters):
            let context = RequestContext(request: request, pathParameters: parameters, store: store)
            do {
                return try run(handler, context)
            } catch let error as APIError {
                if error.status >= 500 {
                    logger.warning("request failed", metadata: [
                        "request.id": "\(requestID ?? "-")", "status": "\(error.status)", "code": "\(error.code)",
                    ])
                }
                return .error(error)
            } catch {
                logger.error("unexpected error", metadata: [
                    "request.id": "\(requestID ?? "-")", "method": "\(request.method)", "path": "\(request.path)",
                    "error": "\(String(reflecting: error))",
                ])
                return .error(.internalError)
            }
        }
    }
}
