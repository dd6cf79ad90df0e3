import Dispatch
import Logging
import MariaDB
import Synchronization
@testable import TodoSyncAPI
import TodoSyncCore
@testable import TodoSyncStore
import XCTest

/// Requests in flight per account (issue 19, item 3): counted per account whatever token or
/// spelling of `Authorization` carries them, 429 `rate_limited` with `Retry-After` beyond the
/// limit, released when the request ends.
final class AccountInFlightTests: XCTestCase {
    func testCountsPerAccountAndReleases() {
        let limit = AccountInFlight(limit: 2)
        XCTAssertTrue(limit.enter(1))
        XCTAssertTrue(limit.enter(1))
        XCTAssertFalse(limit.enter(1), "a third request of the account")
        XCTAssertTrue(limit.enter(2), "another account is not affected")
        limit.leave(1)
        XCTAssertTrue(limit.enter(1))
        limit.leave(1)
        limit.leave(1)
        limit.leave(2)
        XCTAssertEqual(limit.inFlight(1), 0)
        XCTAssertEqual(limit.inFlight(2), 0)
    }

    func testNeverMoreThanTheLimitAcrossThreads() {
        let limit = AccountInFlight(limit: 3)
        let peak = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 2000) { _ in
            guard limit.enter(7) else { return }
            let now = limit.inFlight(7)
            peak.withLock { $0 = max($0, now) }
            limit.leave(7)
        }
        XCTAssertLessThanOrEqual(peak.withLock { $0 }, 3)
        XCTAssertEqual(limit.inFlight(7), 0)
    }

    // MARK: - Each account's share of the CPU (issue 34, item 6)

    /// 100 ms per second, a sum halving every second: the share's ceiling is 0.1/ln 2 ≈ 0.144 s.
    private func shared() -> AccountInFlight {
        AccountInFlight(limit: 2, share: AccountInFlight.Share(coreSeconds: 0.1, halfLife: 1, maximumWait: 0.25,
                                                               othersActive: 0.002))
    }

    func testAnAccountAloneIsNeverHeldBackByItsShare() {
        let limit = shared()
        XCTAssertEqual(limit.admit(1, now: 100), .admitted(measuringCPU: false))
        limit.leave(1, wallSeconds: 5, now: 100)  // far over the ceiling, but nobody else used the process
        XCTAssertEqual(limit.admit(1, now: 100), .admitted(measuringCPU: true))
        limit.leave(1, wallSeconds: 5, cpuSeconds: 5, now: 100)
        XCTAssertEqual(limit.admit(1, now: 100), .admitted(measuringCPU: true))
        limit.leave(1, now: 100)
    }

    func testAnAccountOverItsShareBesideAnotherWaitsThenGets429() {
        let limit = shared()
        XCTAssertEqual(limit.admit(2, now: 100), .admitted(measuringCPU: false))
        limit.leave(2, wallSeconds: 0.01, now: 100)  // a bystander's small request: others are active
        XCTAssertEqual(limit.admit(1, now: 100), .admitted(measuringCPU: false))
        limit.leave(1, wallSeconds: 0.3, now: 100)  // past the ceiling in wall-clock time: measured from now on
        XCTAssertEqual(limit.admit(1, now: 100), .admitted(measuringCPU: true))
        limit.leave(1, wallSeconds: 0.2, cpuSeconds: 0.2, now: 100)  // a wait of log2(0.2/0.144) ≈ 0.47 s
        XCTAssertEqual(limit.admit(1, now: 100), .overShare(retryAfterSeconds: 1))
        XCTAssertEqual(limit.inFlight(1), 0, "a refused request is not counted")
        // A third of a second later the sum has decayed to within a short wait of the ceiling.
        guard case .admittedAfter(let wait) = limit.admit(1, now: 100.3) else { return XCTFail("not admitted after a wait") }
        XCTAssertEqual(wait, log2(0.2 * exp2(-0.3) / (0.1 / M_LN2)), accuracy: 1e-9)
        XCTAssertEqual(limit.inFlight(1), 1, "a request that waits holds its place in flight")
        limit.leave(1, now: 100.3)
        // The bystander is far below its share: never measured, never held back.
        XCTAssertEqual(limit.admit(2, now: 100.3), .admitted(measuringCPU: false))
        limit.leave(2, wallSeconds: 0.001, now: 100.3)
        // Once the CPU sum has decayed below the ceiling the account runs at once.
        XCTAssertEqual(limit.admit(1, now: 101), .admitted(measuringCPU: true))
        limit.leave(1, now: 101)
    }

    /// Wall-clock time past the ceiling alone (a slow bystander on a loaded host) is measured,
    /// never held back: only CPU time counts against the share.
    func testWallClockTimeAloneNeverHoldsAnAccountBack() {
        let limit = shared()
        limit.leave(2, wallSeconds: 0.5, now: 100)  // another account
        limit.leave(1, wallSeconds: 1, cpuSeconds: 0.01, now: 100)
        XCTAssertEqual(limit.admit(1, now: 100), .admitted(measuringCPU: true))
    }

    func testTheInFlightLimitStillComesFirst() {
        let limit = shared()
        XCTAssertEqual(limit.admit(1, now: 1), .admitted(measuringCPU: false))
        XCTAssertEqual(limit.admit(1, now: 1), .admitted(measuringCPU: false))
        XCTAssertEqual(limit.admit(1, now: 1), .tooMany)
    }

    // MARK: - The application counts before the route runs

    /// An application over a store whose database does not exist (every query is 503), whose
    /// token memory knows `tokens` as user 7's: a counted request never reaches the database.
    private func application(limit: AccountInFlight, tokens: [String]) -> Application {
        let connection = Connection(configuration: ConnectionConfiguration(
            unixSocket: "/nonexistent/todosync-test.sock", user: "nobody", password: "", database: "none",
            connectTimeoutSeconds: 1))
        let configuration = StoreConfiguration()
        for token in tokens { configuration.tokenOwners.remember(token, owner: 7) }
        return Application(store: Store(connection: connection, configuration: configuration),
                           logger: Logger(label: "test"), options: ApplicationOptions(accountInFlight: limit))
    }

    private func get(_ app: Application, _ path: String, authorization: String?) -> HTTPResponse {
        app.handle(HTTPRequest(method: "GET", path: path, queryString: "",
                               headers: authorization.map { ["authorization": $0] } ?? [:], body: []))
    }

    func testEveryTokenAndSpellingOfOneAccountCountsAgainstIt() {
        let limit = AccountInFlight(limit: 1)
        let app = application(limit: limit, tokens: ["token-a", "token-b"])
        XCTAssertTrue(limit.enter(7), "one request of user 7 in flight")
        for header in ["Bearer token-a", "bearer token-b", "BEARER    token-a", "Bearer " + String(repeating: " ", count: 300) + "token-b",
                       "bEaReR token-a\t"] {
            let response = get(app, "/api/v1/tags", authorization: header)
            XCTAssertEqual(response.status, 429, header)
            XCTAssertEqual(response.headers.first { $0.name == "Retry-After" }?.value, "1", header)
            XCTAssertTrue(String(decoding: response.body, as: UTF8.self).contains(#""code":"rate_limited""#))
            // The hot read that checks its token in its own statement is counted before it too.
            XCTAssertEqual(get(app, "/api/v1/todos", authorization: header).status, 429, header)
        }
        limit.leave(7)
        // Below the limit the request runs (and meets the missing database); its count is released.
        XCTAssertEqual(get(app, "/api/v1/tags", authorization: "Bearer token-a").status, 503)
        XCTAssertEqual(limit.inFlight(7), 0)
    }

    func testRoutesWithoutAnAccountAreNotCounted() {
        let limit = AccountInFlight(limit: 1)
        let app = application(limit: limit, tokens: ["token-a"])
        XCTAssertTrue(limit.enter(7))
        // /healthz needs no token; a client that sends one anyway is not turned away.
        XCTAssertEqual(get(app, "/healthz", authorization: "Bearer token-a").status, 503)
        // No bearer token at all: the route's own 401, not a 429.
        XCTAssertEqual(get(app, "/api/v1/tags", authorization: "Basic dXNlcjpwdw==").status, 401)
        XCTAssertEqual(get(app, "/api/v1/tags", authorization: nil).status, 401)
        limit.leave(7)
    }
}
