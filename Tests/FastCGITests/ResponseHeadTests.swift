import XCTest

@testable import FastCGI

final class ResponseHeadTests: XCTestCase {
    private func text(_ head: ResponseHead) -> String {
        String(decoding: head.bytes, as: UTF8.self)
    }

    func testWritesStatusHeadersInOrderAndContentLength() {
        let head = ResponseHead(FastCGIResponse(
            status: 201,
            headers: [("Content-Type", "application/json"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2"), ("ETag", "\"é\"")],
            body: Array("{}".utf8)))
        XCTAssertEqual(
            text(head),
            "Status: 201 Created\r\nContent-Type: application/json\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n"
                + "ETag: \"é\"\r\nContent-Length: 2\r\n\r\n")
        XCTAssertTrue(head.includesBody)
        XCTAssertEqual(head.droppedHeaderNames, [])
    }

    func testReplacesHandlerContentLengthAndStatusAndDropsMalformedHeaders() {
        let head = ResponseHead(FastCGIResponse(
            status: 400,
            headers: [
                ("content-length", "999"), ("Status", "200 OK"), ("X-Injected", "a\r\nSet-Cookie: evil=1"),
                ("Bad Name", "x"), ("", "x"), ("X-Nul", "a\u{0}b"), ("X-Fine", "ok"),
            ],
            body: Array("nope".utf8)))
        XCTAssertEqual(text(head), "Status: 400 Bad Request\r\nX-Fine: ok\r\nContent-Length: 4\r\n\r\n")
        XCTAssertEqual(head.droppedHeaderNames, ["X-Injected", "Bad Name", "", "X-Nul"])
    }

    func testNoBodyOrContentLengthFor204And304() {
        for status in [204, 304] {
            let head = ResponseHead(FastCGIResponse(status: status, headers: [("ETag", "\"1\"")], body: [1, 2, 3]))
            XCTAssertFalse(head.includesBody)
            XCTAssertFalse(text(head).contains("Content-Length"), "\(status)")
            XCTAssertTrue(text(head).hasSuffix("ETag: \"1\"\r\n\r\n"))
        }
        XCTAssertTrue(text(ResponseHead(FastCGIResponse(status: 304))).hasPrefix("Status: 304 Not Modified\r\n"))
    }

    func testInvalidStatusBecomesEmpty500() {
        let head = ResponseHead(FastCGIResponse(status: 42, headers: [("X-A", "b")], body: [1]))
        XCTAssertEqual(head.status, 500)
        XCTAssertFalse(head.includesBody)
        XCTAssertEqual(text(head), "Status: 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n")
    }

    func testUnknownStatusGetsClassReasonPhrase() {
        XCTAssertEqual(HTTPReasonPhrase.for(299), "Success")
        XCTAssertEqual(HTTPReasonPhrase.for(499), "Client Error")
        XCTAssertEqual(HTTPReasonPhrase.for(413), "Content Too Large")
    }
}
