#if canImport(Glibc)
import Glibc
#endif
import TodoSyncCore

extension Application {
    func registerHealthRoutes() {
        let health: RouteHandler = { context in
            try context.store.ping()
            return .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
        guard options.enableTestHooks else { return router.add("GET", "/healthz", limit: .notCounted, health) }
        registerTestHookRoutes(health: health)
    }

    /// The test and benchmark routes, registered only when the binary runs with test hooks on
    /// (`ApplicationOptions.enableTestHooks`); without them these paths are 404 (`APIError.noRoute`)
    /// and `/healthz` ignores the hooks' query parameters.
    private func registerTestHookRoutes(health: @escaping RouteHandler) {
        // `/healthz` with the lifecycle tests' hooks: `delay_ms` waits before answering,
        // `die_mid_body_ms` kills the responder mid-body.
        router.add("GET", "/healthz", limit: .notCounted) { context in
            if let delay = context.request.query["delay_ms"].flatMap(Int.init), (1...10_000).contains(delay) {
                usleep(useconds_t(delay * 1000))
            }
            let response = try health(context)
            if let delay = context.request.query["die_mid_body_ms"].flatMap(Int.init), (1...1_000).contains(delay) {
                return Self.dieMidBody(afterMilliseconds: delay)
            }
            return response
        }
        // The benchmark's FastCGI ceiling: a route that touches no database. nginx routes only
        // /api/ and /healthz to the responders, so this is reachable only through the bench
        // location that `TODOSYNC_BENCH_LOCATIONS=1` adds.
        router.add("GET", "/__bench/fastcgi", limit: .notCounted) { _ in
            .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
        registerSlowWriteTestRoute()
    }

    /// Test hook: a 64 MiB JSON body, and the process killed (SIGKILL, like a crash) `milliseconds`
    /// after the handler returns, while the body is still being written. Proves that nginx never
    /// passes a response cut short by a dying responder to the client as a complete one.
    private static func dieMidBody(afterMilliseconds milliseconds: Int) -> HTTPResponse {
        let padding = 64 * 1024 * 1024
        var body = [UInt8](repeating: UInt8(ascii: "x"), count: padding)
        body.replaceSubrange(0..<12, with: Array(#"{"padding":""#.utf8))
        body.replaceSubrange((padding - 2)..<padding, with: Array(#""}"#.utf8))
        var thread = pthread_t()
        let context = UnsafeMutableRawPointer(bitPattern: milliseconds)
        pthread_create(&thread, nil, { argument in
            usleep(useconds_t(Int(bitPattern: argument) * 1000))
            kill(getpid(), SIGKILL)
            return nil
        }, context)
        pthread_detach(thread)
        return .json(200, body)
    }
}
