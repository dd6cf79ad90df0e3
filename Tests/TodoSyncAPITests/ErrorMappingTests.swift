import Foundation
import Logging
import MariaDB
@testable import TodoSyncAPI
import TodoSyncCore
import TodoSyncStore
import TodoSyncTestHooks
import XCTest

/// `APIError.init(_: DomainError)` is the one place where domain errors get their HTTP meaning:
/// the contract's status, code, message, headers and extra body members for every kind.
final class ErrorMappingTests: XCTestCase {
    private func response(_ error: DomainError) -> HTTPResponse {
        .error(APIError(error))
    }

    private func header(_ name: String, _ response: HTTPResponse) -> String? {
        response.headers.first { $0.name == name }?.value
    }

    private func body(_ response: HTTPResponse) -> String {
        String(decoding: response.body, as: UTF8.self)
    }

    func testStatusAndCodeOfEveryKind() {
        let cases: [(DomainError, Int, String)] = [
            (.unauthenticated, 401, "unauthorized"),
            (.badCredentials, 401, "unauthorized"),
            (.notFound, 404, "not_found"),
            (.versionMismatch(current: Array("{}".utf8), version: 3), 412, "version_mismatch"),
            (.validation(field: "title", "is required"), 422, "validation_failed"),
            (.emailTaken, 409, "email_taken"),
            (.friendLimit(maximum: 500), 409, "friend_limit"),
            (.cursorExpired, 410, "cursor_expired"),
            (.cursorFromAnotherHistory, 410, "cursor_expired"),
            (.throttled(message: "slow down", retryAfterSeconds: 7), 429, "rate_limited"),
            (.unavailable, 503, "unavailable"),
            (.outcomeUnknown, 504, "outcome_unknown"),
        ]
        for (error, status, code) in cases {
            let mapped = APIError(error)
            XCTAssertEqual(mapped.status, status, "\(error)")
            XCTAssertEqual(mapped.code, code, "\(error)")
            XCTAssertEqual(mapped.message, error.message, "\(error)")
            let response = response(error)
            XCTAssertEqual(response.status, status)
            XCTAssertEqual(header("Content-Type", response), "application/json")
        }
    }

    func testUnauthenticatedAsksForABearerToken() {
        for error in [DomainError.unauthenticated, .badCredentials] {
            XCTAssertEqual(header("WWW-Authenticate", response(error)), "Bearer")
        }
        XCTAssertEqual(body(response(.unauthenticated)),
                       #"{"error":{"code":"unauthorized","message":"Missing, invalid or expired bearer token."}}"#)
    }

    func testVersionMismatchCarriesTheCurrentRecordAndItsETag() {
        let current = #"{"id":5,"version":9}"#
        let response = response(.versionMismatch(current: Array(current.utf8), version: 9))
        XCTAssertEqual(header("ETag", response), "\"9\"")
        XCTAssertEqual(body(response), #"{"error":{"code":"version_mismatch","message":"The record has changed since that version; see `current`."},"current":"#
                       + current + "}")
    }

    func testValidationListsEveryFieldProblem() {
        let response = response(.validation([FieldProblem(field: "title", problem: "is required"),
                                             FieldProblem(field: "deadline", problem: "must be a date")]))
        XCTAssertEqual(body(response), #"{"error":{"code":"validation_failed","message":"Some fields are invalid; see `details`.","#
                       + #""details":[{"field":"title","problem":"is required"},{"field":"deadline","problem":"must be a date"}]}}"#)
    }

    func testRetryAfterOnThrottledAndUnavailable() {
        XCTAssertEqual(header("Retry-After", response(.throttled(message: "m", retryAfterSeconds: 42))), "42")
        // Whole seconds, at least 1 (the contract).
        XCTAssertEqual(header("Retry-After", response(.throttled(message: "m", retryAfterSeconds: 0))), "1")
        XCTAssertEqual(header("Retry-After", response(.tooManyLoginFailures(retryAfterSeconds: -3))), "1")
        XCTAssertEqual(header("Retry-After", response(.unavailable)), "1")
        XCTAssertEqual(body(response(.throttled(message: "slow down", retryAfterSeconds: 5))),
                       #"{"error":{"code":"rate_limited","message":"slow down"}}"#)
    }

    func testOtherKindsCarryNoExtraHeaders() {
        for error in [DomainError.notFound, .emailTaken, .cursorExpired, .validation(field: "f", "p")] {
            XCTAssertEqual(response(error).headers.map(\.name), ["Content-Type"], "\(error)")
        }
    }

    /// A push rejects an operation only for its own faults; everything else fails the request.
    func testPushRejectsOnlyTheOperationsOwnFaults() {
        let rejected: [DomainError] = [.validation(field: "f", "p"), .notFound,
                                       .versionMismatch(current: [], version: 1), .emailTaken]
        let fatal: [DomainError] = [.unauthenticated, .badCredentials, .cursorExpired, .cursorFromAnotherHistory,
                                    .throttled(message: "m", retryAfterSeconds: 1), .unavailable, .outcomeUnknown]
        for error in rejected { XCTAssertTrue(error.rejectsPushOperation, "\(error)") }
        for error in fatal { XCTAssertFalse(error.rejectsPushOperation, "\(error)") }
    }
}

/// Test and benchmark routes exist only with test hooks on (`ApplicationOptions.testHooks`, `TodoSyncTestHooks`).
final class TestHookRouteTests: XCTestCase {
    /// An application over a store whose database does not exist: the routes below either touch no
    /// database or answer 503 at once.
    private func application(hooks: Bool) -> Application {
        let connection = Connection(configuration: ConnectionConfiguration(
            unixSocket: "/nonexistent/todosync-test.sock", user: "nobody", password: "", database: "none",
            connectTimeoutSeconds: 1))
        return Application(store: Store(connection: connection), logger: Logger(label: "test"),
                           options: ApplicationOptions(testHooks: hooks ? TestHooks() : nil))
    }

    private func get(_ app: Application, _ path: String, query: String = "") -> HTTPResponse {
        app.handle(HTTPRequest(method: "GET", path: path, queryString: query, headers: [:], body: []))
    }

    func testBenchRouteIsNoRouteWithoutHooks() {
        let response = get(application(hooks: false), "/__bench/fastcgi")
        XCTAssertEqual(response.status, 404)
        XCTAssertEqual(response.body, APIError.noRoute.jsonBody)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self),
                       #"{"error":{"code":"not_found","message":"No such route."}}"#)
    }

    /// The ceilings' routes exist only with hooks: without them every one is `noRoute`.
    func testCeilingRoutesAreNoRouteWithoutHooks() {
        let app = application(hooks: false)
        for (method, path) in [("GET", "/__bench/db"), ("GET", "/__bench/page"), ("PUT", "/__bench/page")] {
            let response = app.handle(HTTPRequest(method: method, path: path, queryString: "", headers: [:],
                                                  body: Array("[1]".utf8)))
            XCTAssertEqual(response.status, 404, "\(method) \(path)")
            XCTAssertEqual(response.body, APIError.noRoute.jsonBody, "\(method) \(path)")
        }
    }

    /// Ceiling 2 checks the bearer token like every authenticated route: none is a 401 before any
    /// database is touched (this store has none).
    func testDatabaseCeilingRequiresAToken() {
        let response = get(application(hooks: true), "/__bench/db")
        XCTAssertEqual(response.status, 401)
    }

    /// Ceiling 3 serves the bytes last PUT, unchanged, as JSON, to any worker's application of
    /// the process; the gzip variant goes through the same `ResponseEncoder` as a pull page.
    func testPageCeilingServesTheStoredPage() {
        let page = Array((#"{"changes":{"todos":{"upserted":["# + String(repeating: #"{"id":1},"#, count: 200)
            + #"{"id":2}],"deleted":[]}},"cursor":"c","hasMore":true}"#).utf8)
        let stored = application(hooks: true).handle(HTTPRequest(
            method: "PUT", path: "/__bench/page", queryString: "", headers: [:], body: page))
        XCTAssertEqual(stored.status, 204)
        let response = get(application(hooks: true), "/__bench/page")
        XCTAssertEqual(response.status, 200)
        XCTAssertTrue(response.body == page, "the stored page, byte for byte")
        XCTAssertTrue(response.headers.contains { $0.name == "Content-Type" && $0.value.hasPrefix("application/json") })
        let encoded = ResponseEncoder().encode(response, acceptEncoding: "gzip")
        XCTAssertTrue(encoded.headers.contains { $0.name == "Content-Encoding" && $0.value == "gzip" })
        XCTAssertLessThan(encoded.body.count, page.count)
    }

    func testBenchRouteAnswersWithHooks() {
        let response = get(application(hooks: true), "/__bench/fastcgi")
        XCTAssertEqual(response.status, 200)
        XCTAssertEqual(String(decoding: response.body, as: UTF8.self), #"{"status":"ok"}"#)
    }

    /// Without hooks `/healthz` ignores `delay_ms`: it answers (here 503, no database) at once
    /// instead of sleeping 5 s first. With hooks the same request really waits.
    func testHealthDelayHookOnlyWithHooks() {
        let started = Date()
        let response = get(application(hooks: false), "/healthz", query: "delay_ms=5000")
        XCTAssertEqual(response.status, 503)
        XCTAssertLessThan(Date().timeIntervalSince(started), 4, "delay_ms honoured with test hooks off")

        let hooked = Date()
        XCTAssertEqual(get(application(hooks: true), "/healthz", query: "delay_ms=300").status, 503)
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(hooked), 0.3, "delay_ms ignored with test hooks on")
    }
}
