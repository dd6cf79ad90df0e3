import XCTest

@testable import FastCGI

final class FastCGIRequestTests: XCTestCase {
    func testDerivesMethodURIPathAndQueryFromParameters() {
        let request = FastCGIRequest(parameters: [
            "REQUEST_METHOD": "PATCH", "REQUEST_URI": "/v1/todos/%C3%A9?limit=5&x=%20", "QUERY_STRING": "limit=5&x=%20",
        ])
        XCTAssertEqual(request.method, "PATCH")
        XCTAssertEqual(request.uri, "/v1/todos/%C3%A9?limit=5&x=%20")
        XCTAssertEqual(request.path, "/v1/todos/%C3%A9")
        XCTAssertEqual(request.queryString, "limit=5&x=%20")
        XCTAssertEqual(request.body, [])
        XCTAssertFalse(request.bodyTooLarge)
    }

    func testQueryStringFallsBackToRequestURIAndDefaultsAreSensible() {
        let withQuery = FastCGIRequest(parameters: ["REQUEST_URI": "/a/b?c=d?e"])
        XCTAssertEqual(withQuery.method, "GET")
        XCTAssertEqual(withQuery.path, "/a/b")
        XCTAssertEqual(withQuery.queryString, "c=d?e")

        let empty = FastCGIRequest(parameters: [:])
        XCTAssertEqual(empty.uri, "/")
        XCTAssertEqual(empty.path, "/")
        XCTAssertEqual(empty.queryString, "")
    }

    func testHeaderLookupMapsHTTPNamesToCGIParameters() {
        let request = FastCGIRequest(parameters: [
            "HTTP_IF_MATCH": "\"v3\"", "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "12",
            "HTTP_X_REQUEST_ID": "abc", "HTTP_AUTHORIZATION": "Bearer t",
        ])
        XCTAssertEqual(request.header("If-Match"), "\"v3\"")
        XCTAssertEqual(request.header("if-match"), "\"v3\"")
        XCTAssertEqual(request.header("Content-Type"), "application/json")
        XCTAssertEqual(request.header("content-length"), "12")
        XCTAssertEqual(request.header("X-Request-Id"), "abc")
        XCTAssertEqual(request.header("Authorization"), "Bearer t")
        XCTAssertNil(request.header("Accept"))

        let onlyHTTPForm = FastCGIRequest(parameters: ["HTTP_CONTENT_TYPE": "text/plain"])
        XCTAssertEqual(onlyHTTPForm.header("Content-Type"), "text/plain")
    }

    func testParameterNameMapping() {
        XCTAssertEqual(FastCGIRequest.parameterName(forHeader: "If-None-Match"), "HTTP_IF_NONE_MATCH")
        XCTAssertEqual(FastCGIRequest.parameterName(forHeader: "x-é"), "HTTP_X_é")
    }
}
