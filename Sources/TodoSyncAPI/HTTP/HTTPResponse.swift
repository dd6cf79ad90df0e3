import TodoSyncCore

/// A response: status, headers and body bytes.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response.
    public static func json(_ status: Int, _ body: [UInt8], headers: [HTTPHeader] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [HTTPHeader("Content-Type", "application/json")] + headers, body: body)
    }

    /// `{"<key>": <json>}`: a JSON value the store rendered (such as a list of records) as the
    /// member of a response body.
    public static func json(_ status: Int, member key: String, _ json: [UInt8]) -> HTTPResponse {
        var body: [UInt8] = []
        body.reserveCapacity(json.count + key.utf8.count + 5)
        body.append(contentsOf: #"{""#.utf8)
        body.append(contentsOf: key.utf8)
        body.append(contentsOf: #"":"#.utf8)
        body.append(contentsOf: json)
        body.append(UInt8(ascii: "}"))
        return .json(status, body)
    }

    /// 204 No Content.
    public static let noContent = HTTPResponse(status: 204)

    /// The contract's error body for `error`.
    public static func error(_ error: APIError) -> HTTPResponse {
        json(error.status, error.jsonBody, headers: error.headers)
    }

    /// One record with its `ETag: "<version>"`.
    public static func record(_ status: Int, version: Int64, write: (inout JSONWriter) -> Void) -> HTTPResponse {
        var writer = JSONWriter(reservingCapacity: 400)
        write(&writer)
        return json(status, writer.bytes, headers: [HTTPHeader("ETag", "\"\(version)\"")])
    }
}
