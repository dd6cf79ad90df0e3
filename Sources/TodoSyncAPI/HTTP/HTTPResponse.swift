import TodoSyncCore

/// A response: status, headers and body bytes, or a body streamed while it is produced.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [HTTPHeader]
    public var body: [UInt8]
    /// A body written while it is produced, instead of ``body`` (nil: ``body`` is the body).
    public var stream: ResponseStream?
    /// A repeat of the request answers this body again by itself, changing nothing (a push: its
    /// opIds replay their stored results), so an `Idempotency-Key` keeps only the status and
    /// headers and rebuilds the body (`StoredResponse.replay`, Sql/028).
    public var isRebuiltByRepeat = false

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

    /// A JSON response whose body is streamed.
    public static func json(_ status: Int, stream: ResponseStream) -> HTTPResponse {
        var response = HTTPResponse(status: status, headers: [HTTPHeader("Content-Type", "application/json")])
        response.stream = stream
        return response
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

/// A response body written while it is produced, so a body of any length never sits in memory
/// whole (the FastCGI layer's `FastCGIBodyStream`: chunks of at most 64 KB go out as they fill,
/// the head with the first). `produce` runs once, on the worker's thread, after the handler
/// returned; `write` answers false once the reader is gone: produce nothing more.
///
/// A producer that throws failed: ``Application`` answers the error as any route's instead, when
/// nothing of the body has been sent yet; otherwise the response is cut off.
public struct ResponseStream: @unchecked Sendable {
    /// How the producer ended.
    public enum Outcome {
        /// The whole body was written.
        case complete
        /// The body could not be completed: the response is cut off (never passed on as whole).
        case cutOff
        /// This response instead, if nothing of the stream has been sent yet (else: cut off).
        case instead(HTTPResponse)
    }

    public typealias Write = (UnsafeRawBufferPointer) -> Bool

    public let produce: (_ write: Write) throws -> Outcome

    public init(_ produce: @escaping (_ write: Write) throws -> Outcome) {
        self.produce = produce
    }
}
