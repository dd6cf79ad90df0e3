#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Synchronization
import TodoSyncAPI
import TodoSyncCore
import TodoSyncStore

/// The test hooks: compiled into the `todosync-test` executable (the test stack and the
/// benchmarks run it, `scripts/stack.sh` with TODOSYNC_ENABLE_TEST_HOOKS=1) and never into the
/// shipping `todosync`, which Tests/integration/test_release_binary.py checks. `serve
/// --enable-test-hooks` installs them (`ApplicationOptions.testHooks`).
public struct TestHooks: ApplicationTestHooks {
    public init() {}

    /// The test and benchmark routes; without the hooks these paths are 404 (`APIError.noRoute`)
    /// and `/healthz` ignores the hooks' query parameters.
    public func registerRoutes(on application: Application, health: @escaping RouteHandler) {
        let router = application.router
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
        registerSlowWriteTestRoute(router)
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

    /// Test hook, registered only with test hooks on (`--enable-test-hooks`):
    /// `POST /api/v1/__test/slow-todo?hold_ms=N` creates a todo like `POST /todos` but holds the
    /// user's row lock for N ms (1–120000) before committing.
    private func registerSlowWriteTestRoute(_ router: Router) {
        router.add("POST", "/api/v1/__test/slow-todo") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let draft = try TodoDraft.parse(&reader)
            guard let hold = context.request.query["hold_ms"].flatMap(Int.init), (1...120_000).contains(hold) else {
                throw APIError.badRequest("`hold_ms` must be 1 to 120000.")
            }
            let created = try context.store.createTodoHoldingLock(userID: userID, draft, holdMilliseconds: hold)
            return .record(created.isNew ? 201 : 200, version: created.record.version, write: created.record.write)
        }
    }

    /// `X-TodoSync-Test-Hold-Ms: N` keeps an `Idempotency-Key` request's transaction open N ms
    /// (1–60000) after its handler ran, holding its key and the user's row lock: the "first
    /// request still running" of the 409 test.
    public func afterIdempotentHandler(_ request: HTTPRequest) {
        guard let hold = request.header("x-todosync-test-hold-ms").flatMap(Int.init), (1...60_000).contains(hold) else {
            return
        }
        usleep(useconds_t(hold * 1000))
    }

    /// `GET /sync/snapshot?__test_hold_ms=N` (0–120000): the build sleeps N ms right after its
    /// consistent read began, so writes can commit while it runs.
    public func snapshotPause(_ request: HTTPRequest) throws -> (() -> Void)? {
        guard let text = request.query["__test_hold_ms"] else { return nil }
        guard let hold = Int(text), (0...120_000).contains(hold) else {
            throw APIError.badRequest("`__test_hold_ms` must be 0 to 120000.")
        }
        return hold == 0 ? nil : { usleep(useconds_t(hold) * 1000) }
    }
}

extension TestHooks {
    /// The bugs `TODOSYNC_TEST_INJECT` may name (comma-separated), each breaking one of issue 38's
    /// properties so that the history checker can be seen to catch it (docs/HISTORY.md):
    /// `skip-opid-lookup` (exactly-once), `ignore-version-check` (no-lost-update),
    /// `skip-stats-rebuild` (stats).
    public static let injections = ["ignore-version-check", "skip-opid-lookup", "skip-stats-rebuild"]

    /// The faults a comma-separated list names; throws on an unknown name (the responder then
    /// refuses to start, 78).
    public static func parseInjections(_ list: String) throws -> StoreFaults {
        var faults = StoreFaults()
        for name in list.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) where !name.isEmpty {
            switch name {
            case "skip-opid-lookup": faults.skipOpIDLookup = true
            case "ignore-version-check": faults.ignoreVersionCheck = true
            case "skip-stats-rebuild": faults.skipStatsRebuild = true
            default: throw InjectionError(name: name)
            }
        }
        return faults
    }

    /// `TODOSYNC_TEST_INJECT`, read once at start by `serve`. Loud: a responder that breaks the
    /// contract on purpose says so first thing, on every start.
    public func storeFaults(_ list: String, logger: Logger) throws -> StoreFaults {
        let faults = try Self.parseInjections(list)
        if !faults.isEmpty {
            logger.critical("TEST BUILD WITH BUGS INJECTED ON PURPOSE: this responder breaks the contract (TODOSYNC_TEST_INJECT)",
                            metadata: ["inject": "\(list)"])
        }
        return faults
    }
}

/// A name in `TODOSYNC_TEST_INJECT` that is not one of `TestHooks.injections`.
struct InjectionError: Error, CustomStringConvertible {
    let name: String
    var description: String {
        "TODOSYNC_TEST_INJECT: unknown injection \(name); known: \(TestHooks.injections.joined(separator: ", "))"
    }
}

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

extension Store {
    /// Test hook (its route exists only with test hooks on): creates a todo like
    /// `createTodo(userID:_:)`, but keeps the transaction open, holding the user's row lock, for
    /// `holdMilliseconds` before it commits: a slow write, for the deadline and 504 tests.
    public func createTodoHoldingLock(userID: Int64, _ draft: TodoDraft, holdMilliseconds: Int) throws -> Created<Todo> {
        try write(userID: userID, operations: 1) { transaction in
            let created = try createTodo(draft, in: transaction)
            usleep(useconds_t(holdMilliseconds * 1000))
            return created
        }
    }
}
