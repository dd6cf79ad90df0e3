#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TodoSyncCore

/// The page of the benchmark's page ceiling (`/__bench/page`, test hooks only), shared by every
/// worker of the process. Each responder process holds its own: the bench fills it before use.
final class BenchPage: Sendable {
    static let shared = BenchPage()
    private let page = Mutex<[UInt8]?>(nil)

    /// The page last stored, nil before the first.
    var bytes: [UInt8]? { page.withLock { $0 } }

    func store(_ bytes: [UInt8]) {
        page.withLock { $0 = bytes }
    }
}

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
        // Ceiling 2: the same plus one prepared-statement round trip on the worker's connection,
        // the bearer-token check every authenticated route runs (`SQL.Tokens.userForToken`).
        router.add("GET", "/__bench/db", limit: .notCounted) { context in
            _ = try context.requireUser()
            return .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
        // Ceiling 3: a page's bytes served from memory, no database. The bench PUTs a real pull
        // page here; GET answers it as the pull route answers its page (`.json`), so the gzip
        // variant is compressed per request by the same `ResponseEncoder` as the real route.
        router.add("PUT", "/__bench/page", limit: .notCounted) { context in
            if context.request.bodyTooLarge { throw APIError.payloadTooLarge }
            BenchPage.shared.store(context.request.body)
            return .noContent
        }
        router.add("GET", "/__bench/page", limit: .notCounted) { _ in
            guard let page = BenchPage.shared.bytes else { throw DomainError.notFound }
            return .json(200, page)
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
