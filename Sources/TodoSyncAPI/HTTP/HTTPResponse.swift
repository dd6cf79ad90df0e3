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
