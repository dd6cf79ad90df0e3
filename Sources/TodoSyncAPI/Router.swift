import TodoSyncCore

/// A route handler: builds a response or throws (an `APIError` for expected failures).
public typealias RouteHandler = (RequestContext) throws -> HTTPResponse

/// Matches `METHOD /path/with/:params` to handlers. Unknown paths are 404; known paths with
/// another method are 405 with an `Allow` header.
package final class Router {
    private enum Segment: Equatable {
        case literal(String)
        case parameter
    }

    private struct Route {
        let method: String
        /// As registered (`/api/v1/tags/:id`): the route's name in logs and metrics.
        let pattern: String
        let segments: [Segment]
        let limit: AccountLimit
        /// Whether the route reads a request body; one that does not refuses a body over
        /// `Router.noBodyLimit` bytes (413), as nginx does before reading it.
        let takesBody: Bool
        let handler: RouteHandler
    }

    /// The largest body a route that takes none accepts (contract, 413: "over 1 KiB on a route
    /// that takes no body"). nginx refuses a larger declared body first (nginx/body-limits-http.conf.template,
    /// checked against this by NginxBodyLimitTests).
    static let noBodyLimit = 1024

    enum Match {
        case found(RouteHandler, parameters: [String], pattern: String, limit: AccountLimit, takesBody: Bool)
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private var routes: [Route] = []
    /// The routes without parameters by their path (`/` and the segments), in registration order:
    /// a path that is one of these is matched by one hash lookup (no other route can own it, having
    /// more parameters), not by comparing it with every route's segments.
    private var literalRoutes: [String: [Route]] = [:]

    /// Every registered route, `(method, pattern, limit)` in registration order: the route table
    /// that nginx's method map, openapi.yaml and docs/API.md are checked against (RouteTableTests).
    var table: [(method: String, pattern: String, limit: AccountLimit, takesBody: Bool)] {
        routes.map { ($0.method, $0.pattern, $0.limit, $0.takesBody) }
    }

    /// Registers `handler` for `method` and a pattern such as `/api/v1/tags/:id`. `limit`: the
    /// per-account limit its requests count against (every authenticated route: requests in flight).
    /// `takesBody`: whether the handler reads a body; by default POST, PUT and PATCH do, GET and
    /// DELETE do not (a POST without one, such as logout, says so).
    package func add(_ method: String, _ pattern: String, limit: AccountLimit = .requestsInFlight, takesBody: Bool? = nil,
             _ handler: @escaping RouteHandler) {
        let takesBody = takesBody ?? ["POST", "PUT", "PATCH"].contains(method)
        let segments = pattern.split(separator: "/").map { part -> Segment in
            part.hasPrefix(":") ? .parameter : .literal(String(part))
        }
        let route = Route(method: method, pattern: pattern, segments: segments, limit: limit, takesBody: takesBody,
                          handler: handler)
        routes.append(route)
        let literals = segments.compactMap { if case .literal(let literal) = $0 { literal } else { nil } }
        if !segments.isEmpty && literals.count == segments.count {
            literalRoutes["/" + literals.joined(separator: "/"), default: []].append(route)
        }
    }

    /// HEAD is answered by the GET handler (nginx sends the headers only). When several
    /// patterns match a path, the most specific (fewest parameters) owns it: `/todos/quick-add`
    /// is that route's path, so `PATCH /todos/quick-add` is a 405, not a lookup of todo "quick-add".
    func match(method: String, path: String) -> Match {
        let method = method == "HEAD" ? "GET" : method
        guard path.hasPrefix("/") else { return .notFound }
        let best = literalRoutes[path]?.map { (route: $0, parameters: [String]()) } ?? bestMatches(path)
        if let found = best.first(where: { $0.route.method == method }) {
            return .found(found.route.handler, parameters: found.parameters, pattern: found.route.pattern,
                          limit: found.route.limit, takesBody: found.route.takesBody)
        }
        guard !best.isEmpty else { return .notFound }
        var allowed: [String] = []
        for candidate in best {
            allowed.append(candidate.route.method)
            if candidate.route.method == "GET" { allowed.append("HEAD") }
        }
        return .methodNotAllowed(allowed: allowed)
    }

    /// The routes whose segments match `path`, those with the fewest parameters, in registration
    /// order, each with its parameters' values.
    private func bestMatches(_ path: String) -> [(route: Route, parameters: [String])] {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var best: [(route: Route, parameters: [String])] = []
        var bestParameterCount = Int.max
        for route in routes where route.segments.count == parts.count {
            var parameters: [String] = []
            var matches = true
            for (segment, part) in zip(route.segments, parts) {
                switch segment {
                case .literal(let literal): if literal != part { matches = false }
                case .parameter: if part.isEmpty { matches = false } else { parameters.append(String(part)) }
                }
                if !matches { break }
            }
            guard matches, parameters.count <= bestParameterCount else { continue }
            if parameters.count < bestParameterCount {
                best = []
                bestParameterCount = parameters.count
            }
            best.append((route, parameters))
        }
        return best
    }
}
