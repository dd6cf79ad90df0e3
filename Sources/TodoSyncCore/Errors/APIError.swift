/// One field-level problem in a `validation_failed` error.
public struct FieldProblem: Sendable, Equatable {
    public let field: String
    public let problem: String

    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }
}

/// An error that knows its HTTP meaning: status, the contract's `code`, and a message that is safe
/// to show a client. Anything that is not an `APIError` becomes a 500 with a fixed body.
public struct APIError: Error, Sendable, Equatable {
    public let status: Int
    public let code: String
    public let message: String
    public let details: [FieldProblem]
    /// An extra top-level member of the body, such as `"current": <record>` on 412.
    public let extra: ExtraMember?
    /// Extra response headers, such as `Allow` on 405.
    public let headers: [HTTPHeader]

    /// A member of the error body beside `error`, already encoded.
    public struct ExtraMember: Sendable, Equatable {
        public let key: String
        public let json: [UInt8]
    }

    public init(status: Int, code: String, message: String, details: [FieldProblem] = [],
                extra: ExtraMember? = nil, headers: [HTTPHeader] = []) {
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

    public static let unauthorized = APIError(
        status: 401, code: "unauthorized", message: "Missing, invalid or expired bearer token.",
        headers: [HTTPHeader("WWW-Authenticate", "Bearer")])

    public static let badCredentials = APIError(
        status: 401, code: "unauthorized", message: "Email or password is incorrect.",
        headers: [HTTPHeader("WWW-Authenticate", "Bearer")])

    public static let notFound = APIError(status: 404, code: "not_found", message: "No such record.")

    public static let noRoute = APIError(status: 404, code: "not_found", message: "No such route.")

    public static func methodNotAllowed(allowed: [String]) -> APIError {
        APIError(status: 405, code: "method_not_allowed", message: "This route does not support that method.",
                 headers: [HTTPHeader("Allow", allowed.joined(separator: ", "))])
    }

    public static let emailTaken = APIError(
        status: 409, code: "email_taken", message: "An account with this email already exists.")

    public static let cursorExpired = APIError(
        status: 410, code: "cursor_expired",
        message: "The cursor is older than the tombstone retention horizon; pull again without a cursor.")

    /// A cursor this database did not issue for the user's current history (after a restore from
    /// backup, from another installation, or of a format before epochs).
    public static let cursorFromAnotherHistory = APIError(
        status: 410, code: "cursor_expired",
        message: "The cursor does not belong to this server's current history (for example after a restore); "
            + "pull again without a cursor.")

    public static func versionMismatch(current: [UInt8], version: Int64) -> APIError {
        APIError(status: 412, code: "version_mismatch",
                 message: "The record has changed since that version; see `current`.",
                 extra: ExtraMember(key: "current", json: current),
                 headers: [HTTPHeader("ETag", "\"\(version)\"")])
    }

    public static let payloadTooLarge = APIError(
        status: 413, code: "payload_too_large", message: "The request body is larger than 1 MiB.")

    public static let unsupportedMediaType = APIError(
        status: 415, code: "unsupported_media_type", message: "The request body must be application/json.")

    public static func validation(_ details: [FieldProblem]) -> APIError {
        APIError(status: 422, code: "validation_failed", message: "Some fields are invalid; see `details`.",
                 details: details)
    }

    public static func validation(field: String, _ problem: String) -> APIError {
        validation([FieldProblem(field: field, problem: problem)])
    }

    /// 429 after too many failed logins for one email (whether or not it has an account).
    public static func tooManyLoginFailures(retryAfterSeconds: Int64) -> APIError {
        rateLimited("Too many failed logins for this account; try again later.", retryAfterSeconds: retryAfterSeconds)
    }

    /// 429 `rate_limited` with the contract's `Retry-After` (whole seconds, at least 1).
    public static func rateLimited(_ message: String, retryAfterSeconds: Int64) -> APIError {
        APIError(status: 429, code: "rate_limited", message: message,
                 headers: [HTTPHeader("Retry-After", "\(max(retryAfterSeconds, 1))")])
    }

    /// 503: nothing was applied; retry after a second (the contract: 503 carries `Retry-After`).
    public static let unavailable = APIError(
        status: 503, code: "unavailable", message: "The service is temporarily unavailable; try again shortly.",
        headers: [HTTPHeader("Retry-After", "1")])

    public static let internalError = APIError(
        status: 500, code: "internal_error", message: "An unexpected error occurred.")

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
        writer.beginObject()
        writer.field("code", code)
        writer.field("message", message)
        if !details.isEmpty {
            writer.key("details")
            writer.beginArray()
            for detail in details {
                writer.beginObject()
                writer.field("field", detail.field)
                writer.field("problem", detail.problem)
                writer.endObject()
            }
            writer.endArray()
        }
        writer.endObject()
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
