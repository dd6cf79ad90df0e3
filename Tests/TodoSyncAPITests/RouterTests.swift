@testable import TodoSyncAPI
import TodoSyncCore
import XCTest

final class RouterTests: XCTestCase {
    private func router() -> Router {
        let router = Router()
        let ok: RouteHandler = { _ in HTTPResponse(status: 200) }
        router.add("GET", "/api/v1/todos", ok)
        router.add("POST", "/api/v1/todos", ok)
        router.add("POST", "/api/v1/todos/quick-add", ok)
        router.add("GET", "/api/v1/todos/:id", ok)
        router.add("PATCH", "/api/v1/todos/:id", ok)
        return router
    }

    func testParametersAndHead() {
        guard case .found(_, let parameters, _, _, _) = router().match(method: "HEAD", path: "/api/v1/todos/42") else {
            return XCTFail("HEAD should be answered by the GET route")
        }
        XCTAssertEqual(parameters, ["42"])
    }

    func testLiteralPathOwnsItsMethods() {
        guard case .methodNotAllowed(let allowed) = router().match(method: "PATCH", path: "/api/v1/todos/quick-add")
        else { return XCTFail("PATCH /todos/quick-add must be 405, not a lookup of todo 'quick-add'") }
        XCTAssertEqual(allowed, ["POST"])
        guard case .found = router().match(method: "POST", path: "/api/v1/todos/quick-add") else { return XCTFail() }
    }

    func testUnknownPathsAndWrongMethods() {
        guard case .notFound = router().match(method: "GET", path: "/api/v1/todos/1/extra") else { return XCTFail() }
        guard case .notFound = router().match(method: "GET", path: "/api/v1/todos/") else { return XCTFail() }
        guard case .methodNotAllowed(let allowed) = router().match(method: "DELETE", path: "/api/v1/todos") else {
            return XCTFail()
        }
        XCTAssertEqual(allowed, ["GET", "HEAD", "POST"])
    }
}

final class QueryParsingTests: XCTestCase {
    func testDateRangeRules() throws {
        XCTAssertEqual(try DateRangeQuery.parse(["date": "2026-11-21"]).0, Day("2026-11-21"))
        XCTAssertNoThrow(try DateRangeQuery.parse(["from": "2026-01-01", "to": "2027-01-01"]))  // 365 days
        for query: [String: String] in [[:], ["from": "2026-01-01"], ["from": "2026-01-02", "to": "2026-01-01"],
                                        ["from": "2026-01-01", "to": "2027-01-02"],
                                        ["date": "2026-11-21", "from": "2026-11-21", "to": "2026-11-22"],
                                        ["date": "2026-02-30"], ["date": "1999-12-31"]] {
            XCTAssertThrowsError(try DateRangeQuery.parse(query), "\(query)") {
                XCTAssertEqual(($0 as? APIError)?.status, 400)
            }
        }
    }

    func testMonthRange() {
        XCTAssertEqual(MonthQuery.range("2024-02").map { "\($0.0)…\($0.1)" }, "2024-02-01…2024-02-29")
        XCTAssertEqual(MonthQuery.range("2026-11").map { "\($0.1)" }, "2026-11-30")
        for bad in ["2026-13", "2026-1", "1999-12", "3000-01", "2026-11-01", "abcd-ef"] { XCTAssertNil(MonthQuery.range(bad), bad) }
    }

    func testQueryStringDecoding() {
        let request = HTTPRequest(method: "GET", path: "/", queryString: "a=1&b=x%20y+z&c&a=2&d=%E2%9C%93", headers: [:], body: [])
        XCTAssertEqual(request.query, ["a": "2", "b": "x y z", "c": "", "d": "✓"])
    }
}
