import TodoSyncCore

/// An error that knows its HTTP meaning: status, the contract's `code`, and a message that is safe
/// to show a client. The API layer throws these for problems of the HTTP request itself (no
/// route, wrong method, bad query, unreadable body); the domain's errors (`DomainError`) become
/// one through `init(_:)`, the single place that gives each kind its status, headers and extra
/// body members. Anything else becomes a 500 with a fixed body.
public struct APIError: Error, Sendable, Equatable {
    public let status: Int
    public let code: String
    public let message: String
    public let details: [FieldProblem]
    /// An extra top-level member of the body, such as `"current": <record>` on 412.
    public let extra: ExtraMember?
    /// Extra response headers, such as `Allow` on 405.
    public let headers: [HTTPHeader]
    /// Extra members of the error object itself, such as 426's `minimum` and `current`.
    public let errorMembers: [ErrorMember]

    /// A member of the error body beside `error`, already encoded.
    public struct ExtraMember: Sendable, Equatable {
        public let key: String
        public let json: [UInt8]
    }

    public init(status: Int, code: String, message: String, details: [FieldProblem] = [],
                extra: ExtraMember? = nil, headers: [HTTPHeader] = [], errorMembers: [ErrorMember] = []) {
        self.errorMembers = errorMembers
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.extra = extra
        self.headers = headers
    }

    public static func malformedJSON(_ reason: String) -> APIError {
        APIError(status: 400, code: "malformed_json", message: "The request body is not valid JSON: \(reason).")
    }

    public static func badRequest(_ message: String) -> APIError {
        APIError(status: 400, code: "bad_request", message: message)
    }

    public static let noRoute = APIError(status: 404, code: "not_found", message: "No such route.")

    public static func methodNotAllowed(allowed: [String]) -> APIError {
        APIError(status: 405, code: "method_not_allowed", message: "This route does not support that method.",
                 headers: [HTTPHeader("Allow", allowed.joined(separator: ", "))])
    }

    public static let payloadTooLarge = APIError(
        status: 413, code: "payload_too_large", message: "The request body is larger than 1 MiB.")

    /// A body over `Router.noBodyLimit` bytes on a route that takes none.
    public static let bodyNotAllowed = APIError(
        status: 413, code: "payload_too_large", message: "This route takes no request body; the body is larger than 1 KiB.")

    /// A snapshot `Range` that is not one satisfiable byte range of the file (RFC 9110's 416;
    /// the contract's error table has no row for it: docs/API.md).
    public static func rangeNotSatisfiable(size: Int64, headers: [HTTPHeader] = []) -> APIError {
        APIError(status: 416, code: "range_not_satisfiable",
                 message: "The Range header names no satisfiable byte range of this file.",
                 headers: [HTTPHeader("Content-Range", "bytes */\(size)")] + headers)
    }

    public static let unsupportedMediaType = APIError(
        status: 415, code: "unsupported_media_type", message: "The request body must be application/json.")

    /// A sync request whose schema version is below the server's minimum.
    public static func upgradeRequired(minimum: Int, current: Int) -> APIError {
        APIError(status: 426, code: "upgrade_required",
                 message: "This app is too old for the server: schema version \(minimum) or newer is needed. Please update it.",
                 errorMembers: [ErrorMember("minimum", Int64(minimum)), ErrorMember("current", Int64(current))])
    }

    public static let internalError = APIError(
        status: 500, code: "internal_error", message: "An unexpected error occurred.")

    /// The HTTP meaning of a domain error: the one mapping from `DomainError` kinds to statuses,
    /// headers (`WWW-Authenticate`, `ETag`, `Retry-After`) and extra body members (`current`).
    public init(_ error: DomainError) {
        let status: Int
        var headers: [HTTPHeader] = []
        var extra: ExtraMember?
        switch error {
        case .unauthenticated, .badCredentials, .wrongPassword:
            status = 401
            headers = [HTTPHeader("WWW-Authenticate", "Bearer")]
        case .notFound:
            status = 404
        case .versionMismatch(let current, let version):
            status = 412
            extra = ExtraMember(key: "current", json: current)
            headers = [HTTPHeader("ETag", "\"\(version)\"")]
        case .validation:
            status = 422
        case .emailTaken, .friendLimit:
            status = 409
        case .cursorExpired, .cursorFromAnotherHistory:
            status = 410
        case .throttled(_, let retryAfterSeconds):
            // The contract's `Retry-After`: whole seconds, at least 1.
            status = 429
            headers = [HTTPHeader("Retry-After", "\(max(retryAfterSeconds, 1))")]
        case .unavailable:
            // Nothing was applied; retry after a second (the contract: 503 carries `Retry-After`).
            status = 503
            headers = [HTTPHeader("Retry-After", "1")]
        case .snapshotTooSlow(let retryAfterSeconds):
            status = 503
            headers = [HTTPHeader("Retry-After", "\(max(retryAfterSeconds, 1))")]
        case .snapshotBusy:
            status = 503
            headers = [HTTPHeader("Retry-After", "1")]
        case .outcomeUnknown:
            status = 504
        }
        self.init(status: status, code: error.code, message: error.message, details: error.details, extra: extra,
                  headers: headers)
    }

    /// The contract's error body.
    public var jsonBody: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("error")
        writeErrorObject(to: &writer)
        if let extra {
            writer.key(extra.key)
            writer.raw(extra.json)
        }
        writer.endObject()
        return writer.bytes
    }

    /// `{"code", "message", "details"?}`: the error object of an error body or a push result.
    public func writeErrorObject(to writer: inout JSONWriter) {
        DomainError.writeErrorObject(code: code, message: message, details: details, integers: errorMembers, to: &writer)
    }
}

/// A response header.
public struct HTTPHeader: Sendable, Equatable {
    public let name: String
    public let value: String

    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }
}
