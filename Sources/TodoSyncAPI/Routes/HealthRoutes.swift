#if canImport(Glibc)
import Glibc
#endif
import TodoSyncCore

extension Application {
    func registerHealthRoutes() {
        router.add("GET", "/healthz") { [options] context in
            if options.enableTestHooks, let delay = context.request.query["delay_ms"].flatMap(Int.init),
               (1...10_000).contains(delay) {
                usleep(useconds_t(delay * 1000))
            }
            try context.store.ping()
            return .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
        // The benchmark's FastCGI ceiling: a route that touches no database. nginx routes only
        // /api/ and /healthz to the responders, so this is reachable only through the bench
        // location that `TODOSYNC_BENCH_LOCATIONS=1` adds.
        router.add("GET", "/__bench/fastcgi") { _ in
            .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
    }
}
