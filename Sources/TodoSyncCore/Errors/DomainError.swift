/// One field-level problem in a `validation_failed` error.
public struct FieldProblem: Sendable, Equatable {
    public let field: String
    public let problem: String

    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }
}

/// What went wrong in the domain or the store, in the domain's terms. It knows nothing of HTTP:
/// the API layer (`APIError.init(_: DomainError)` in TodoSyncAPI) is the one place that turns a
/// kind into a status, headers and extra body members. The contract's error `code` and a message
/// safe to show a client belong to the kind itself, because push results carry them too
/// (`{"status": "rejected", "error": {"code", "message", "details"?}}`).
public enum DomainError: Error, Sendable, Equatable {
    /// No valid session: a bearer token that is unknown, revoked or expired, or an account gone.
    case unauthenticated
    /// Login with an email or password that does not match an account.
    case badCredentials
    /// A signed-in user's password, asked again before a change to the account (`field` names
    /// it in the request), does not match. Counted as a failed login of the account. A 401 like a
    /// bad token, but with `details` naming the field, so a client can tell it is not signed out.
    case wrongPassword(field: String)
    /// No such record of this user (or a tombstone where a live record is needed).
    case notFound
    /// A precondition on the record's version failed; `current` is the record as it is now.
    case versionMismatch(current: [UInt8], version: Int64)
    /// Input that breaks the model's rules, one problem per field.
    case validation([FieldProblem])
    /// A unique value already in use: an account email.
    case emailTaken
    /// A pull cursor older than the tombstone retention horizon.
    case cursorExpired
    /// A pull cursor from another history of the database (a restore, another installation).
    case cursorFromAnotherHistory
    /// A budget is used up (login failures, password-hash slots, quotas); retry after the delay.
    case throttled(message: String, retryAfterSeconds: Int64)
    /// The database is unreachable or busy; nothing was applied.
    case unavailable
    /// The account's snapshot cannot be built within the request budget (now, or within the
    /// snapshot cache's age limit): retry after that many seconds, or sync by paged pull.
    case snapshotTooSlow(retryAfterSeconds: Int64)
    /// Another request is building the snapshot and did not finish within this request's budget.
    case snapshotBusy
    /// The connection to the database was lost while it committed: the write may or may not have
    /// been applied. Safe to retry only with the same `clientId`, `opId` or `Idempotency-Key`.
    case outcomeUnknown
    /// Accepting (or crossing) a friend request would pass the most friends allowed (`maximum`)
    /// for either user: nothing changed.
    case friendLimit(maximum: Int)

    /// A single-field validation problem.
    public static func validation(field: String, _ problem: String) -> DomainError {
        .validation([FieldProblem(field: field, problem: problem)])
    }

    /// Too many failed logins for one email (whether or not it has an account).
    public static func tooManyLoginFailures(retryAfterSeconds: Int64) -> DomainError {
        .throttled(message: "Too many failed logins for this account; try again later.",
                   retryAfterSeconds: retryAfterSeconds)
    }

    /// Whether this error is the fault of one push operation (its input, or the record it names),
    /// so that operation alone is `rejected` and the rest of the push goes on. Any other kind
    /// (the session, a budget, the database) fails the whole request.
    public var rejectsPushOperation: Bool {
        switch self {
        case .validation, .notFound, .versionMismatch, .emailTaken: true
        case .unauthenticated, .badCredentials, .wrongPassword, .cursorExpired, .cursorFromAnotherHistory, .throttled,
             .unavailable, .snapshotTooSlow, .snapshotBusy, .outcomeUnknown, .friendLimit:
            false
        }
    }

    /// The contract's error code.
    public var code: String {
        switch self {
        case .unauthenticated, .badCredentials, .wrongPassword: "unauthorized"
        case .notFound: "not_found"
        case .versionMismatch: "version_mismatch"
        case .validation: "validation_failed"
        case .emailTaken: "email_taken"
        case .cursorExpired, .cursorFromAnotherHistory: "cursor_expired"
        case .throttled: "rate_limited"
        case .unavailable, .snapshotTooSlow, .snapshotBusy: "unavailable"
        case .outcomeUnknown: "outcome_unknown"
        case .friendLimit: "friend_limit"
        }
    }

    /// A message safe to show a client.
    public var message: String {
        switch self {
        case .unauthenticated: "Missing, invalid or expired bearer token."
        case .badCredentials: "Email or password is incorrect."
        case .wrongPassword: "The password is incorrect."
        case .notFound: "No such record."
        case .versionMismatch: "The record has changed since that version; see `current`."
        case .validation: "Some fields are invalid; see `details`."
        case .emailTaken: "An account with this email already exists."
        case .cursorExpired:
            "The cursor is older than the tombstone retention horizon; pull again without a cursor."
        case .cursorFromAnotherHistory:
            "The cursor does not belong to this server's current history (for example after a restore); "
                + "pull again without a cursor."
        case .throttled(let message, _): message
        case .unavailable: "The service is temporarily unavailable; try again shortly."
        case .snapshotTooSlow:
            "This account's snapshot cannot be built within the request budget; sync by paged pull."
        case .snapshotBusy: "The snapshot is still being built; retry shortly."
        case .friendLimit(let maximum): "One of you already has the most friends allowed (\(maximum))."
        case .outcomeUnknown:
            "The server cannot tell whether this write was applied; retry it with the same clientId, opId or "
                + "Idempotency-Key."
        }
    }

    /// The field problems of a validation error (empty for other kinds).
    public var details: [FieldProblem] {
        switch self {
        case .validation(let problems): problems
        case .wrongPassword(let field): [FieldProblem(field: field, problem: "is incorrect")]
        default: []
        }
    }

    /// `{"code", "message", "details"?}`: the error object of a push result (and of an error body).
    public func writeErrorObject(to writer: inout JSONWriter) {
        Self.writeErrorObject(code: code, message: message, details: details, to: &writer)
    }

    /// The contract's error object from its parts.
    /// `integers`: further members of the object (426's `minimum` and `current`).
    public static func writeErrorObject(code: String, message: String, details: [FieldProblem],
                                        integers: [ErrorMember] = [], to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("code", code)
        writer.field("message", message)
        for member in integers {
            writer.key(member.key)
            writer.int(member.value)
        }
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

/// An integer member of an error object beside `code` and `message`.
public struct ErrorMember: Sendable, Equatable {
    public let key: String
    public let value: Int64

    public init(_ key: String, _ value: Int64) {
        self.key = key
        self.value = value
    }
}
