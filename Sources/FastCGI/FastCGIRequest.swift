/// One request as the web server hands it over: CGI parameters plus the request body.
public struct FastCGIRequest: Sendable {
    /// CGI parameters: `REQUEST_METHOD`, `REQUEST_URI`, `QUERY_STRING`, `CONTENT_TYPE`,
    /// `CONTENT_LENGTH`, `HTTP_*` request headers, and whatever else the web server sends.
    /// Values are decoded as UTF-8 (invalid sequences become U+FFFD). If a name occurs twice, the
    /// first value wins.
    public let parameters: [String: String]
    /// The request body, exactly `CONTENT_LENGTH` bytes; empty when ``bodyTooLarge`` is set.
    public let body: [UInt8]
    /// `CONTENT_LENGTH` exceeded the configured limit: the body was not read and ``body`` is empty.
    public let bodyTooLarge: Bool

    /// `REQUEST_METHOD` (for example `GET`); `GET` when the web server sent none.
    public var method: String
    /// The raw request target, `REQUEST_URI` (path plus `?query`, still percent-encoded).
    public var uri: String
    /// The part of ``uri`` before `?`, still percent-encoded.
    public var path: String
    /// `QUERY_STRING`, or the part of ``uri`` after `?` when that parameter is missing; no leading `?`.
    public var queryString: String

    /// Creates a request; ``method``, ``uri``, ``path`` and ``queryString`` are derived from `parameters`.
    public init(parameters: [String: String], body: [UInt8] = [], bodyTooLarge: Bool = false) {
        self.parameters = parameters
        self.body = body
        self.bodyTooLarge = bodyTooLarge
        self.method = parameters["REQUEST_METHOD"] ?? "GET"
        let uri = parameters["REQUEST_URI"] ?? parameters["DOCUMENT_URI"] ?? "/"
        self.uri = uri
        if let questionMark = uri.utf8.firstIndex(of: UInt8(ascii: "?")) {
            self.path = String(uri[..<questionMark])
            self.queryString = parameters["QUERY_STRING"] ?? String(uri[uri.utf8.index(after: questionMark)...])
        } else {
            self.path = uri
            self.queryString = parameters["QUERY_STRING"] ?? ""
        }
    }

    /// The value of an HTTP request header, looked up case-insensitively by its HTTP name:
    /// `"If-Match"` reads `HTTP_IF_MATCH`; `"Content-Type"` and `"Content-Length"` read the CGI
    /// parameters `CONTENT_TYPE` and `CONTENT_LENGTH` (falling back to their `HTTP_` forms).
    public func header(_ name: String) -> String? {
        let key = Self.parameterName(forHeader: name)
        switch key {
        case "HTTP_CONTENT_TYPE": return parameters["CONTENT_TYPE"] ?? parameters[key]
        case "HTTP_CONTENT_LENGTH": return parameters["CONTENT_LENGTH"] ?? parameters[key]
        default: return parameters[key]
        }
    }

    /// Maps an HTTP header name to its CGI parameter name: `X-Request-Id` -> `HTTP_X_REQUEST_ID`.
    static func parameterName(forHeader name: String) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(name.utf8.count + 5)
        bytes.append(contentsOf: "HTTP_".utf8)
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"): bytes.append(byte - 32)
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "_"))
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
