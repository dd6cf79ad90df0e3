/// What the API learned about one request that the transport cannot see: the route pattern it
/// matched and the authenticated user. Read after ``Application/handle(_:requestID:)`` returns.
public struct RequestObservation: Sendable {
    /// The registered pattern (`/api/v1/todos/:id`), never the raw path (ids would explode the
    /// number of metric series and put user data into labels); `unmatched` for 404/405.
    public var route = RequestObservation.unmatched
    /// The user whose bearer token was accepted; nil when the request had none or it was refused.
    public var userID: Int64?

    public static let unmatched = "unmatched"

    public init() {}
}
