/// What a handler returns: an HTTP status, header lines in order, and the body.
///
/// The server writes `Status: <code> <reason>`, the headers, a `Content-Length` it computes
/// from ``body`` (a handler-supplied `Content-Length` or `Status` header is ignored), a blank line
/// and the body. For 1xx, 204 and 304 no `Content-Length` and no body are sent. Header lines with
/// CR, LF or NUL, or with a name that is not an HTTP token, are dropped and logged.
///
/// With a ``stream`` the body is produced after the handler returns and written in chunks as it
/// comes (``FastCGIBodyStream``); no `Content-Length` is sent and ``body`` is ignored.
public struct FastCGIResponse: Sendable {
    /// HTTP status code (100...599; anything else is answered as 500 and logged).
    public var status: Int
    /// Header lines, written in this order; a name may repeat (for example `Set-Cookie`).
    public var headers: [(name: String, value: String)]
    /// The response body.
    public var body: [UInt8]
    /// A body written while it is produced, instead of ``body`` (nil: ``body`` is the body).
    public var stream: FastCGIBodyStream?

    /// Creates a response.
    public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body is streamed (``FastCGIBodyStream``).
    public init(status: Int = 200, headers: [(name: String, value: String)] = [], stream: FastCGIBodyStream) {
        self.init(status: status, headers: headers)
        self.stream = stream
    }
}
