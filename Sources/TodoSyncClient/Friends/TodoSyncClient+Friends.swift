import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The social side (API.md "Friends"): online only, nothing of it is stored with the user's own
/// records. Every call needs the store's token. Errors: `FriendsError` for the contract's answers
/// (404, 409 `friend_limit`, 422, 429 with `Retry-After`); `SyncError` for the rest, as for every
/// call (`.offline`, `.timedOut`, `.unavailable` for 503, `.unauthorized` signs the store out).
///
/// `POST`s carry an `Idempotency-Key`, so a lost answer is resent safely (a repeated friend
/// request does not count twice against the 20-an-hour limit); `DELETE`s are not resent (a
/// repeat after a lost 204 would answer 404): they then fail offline, done or not.
extension TodoSyncClient {
    // MARK: Account

    /// The account: id, email, nickname (nil until set), createdAt.
    public func account() async throws -> AccountProfile {
        try Self.profile(try await friendsCall("GET", "/api/v1/account", expect: 200).json())
    }

    /// Sets the nickname friends see (trimmed by the server; 1–40 characters, no control or
    /// format characters) or clears it (nil). A refused one is `FriendsError.invalid` and keeps
    /// the old value.
    @discardableResult
    public func setNickname(_ nickname: String?) async throws -> AccountProfile {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("nickname")
        if let nickname { writer.string(nickname) } else { writer.null() }
        writer.endObject()
        return try Self.profile(try await friendsCall("PATCH", "/api/v1/account", body: Data(writer.bytes), expect: 200).json())
    }

    // MARK: Requests

    /// Asks `email` to be friends. The answer is the same whether or not an account has that
    /// email (the request shows in `friendRequests().outgoing` either way); asking someone who
    /// asked you makes you friends at once. Your own email is `FriendsError.invalid`; the 21st
    /// request within 60 minutes `FriendsError.rateLimited`.
    public func sendFriendRequest(to email: String) async throws {
        _ = try await friendsCall("POST", "/api/v1/friends/requests", body: Self.jsonObject(["email": email]), expect: 202)
    }

    /// This user's pending requests, incoming and outgoing, each newest first.
    public func friendRequests() async throws -> FriendRequests {
        let body = try await friendsCall("GET", "/api/v1/friends/requests", expect: 200).json()
        guard let incoming = body["incoming"]?.arrayValue, let outgoing = body["outgoing"]?.arrayValue else {
            throw SyncError.protocolError("friend requests without incoming and outgoing")
        }
        return FriendRequests(
            incoming: try incoming.map { item in
                guard let object = item.objectValue, let id = object["id"]?.int64Value, let from = object["from"]?.objectValue,
                      let createdAt = object["createdAt"]?.stringValue else {
                    throw SyncError.protocolError("an incoming request without id, from and createdAt")
                }
                return FriendRequests.Incoming(id: id, from: try Self.person(from), createdAt: createdAt)
            },
            outgoing: try outgoing.map { item in
                guard let object = item.objectValue, let id = object["id"]?.int64Value, let email = object["email"]?.stringValue,
                      let createdAt = object["createdAt"]?.stringValue else {
                    throw SyncError.protocolError("an outgoing request without id, email and createdAt")
                }
                return FriendRequests.Outgoing(id: id, email: email, createdAt: createdAt)
            })
    }

    /// Accepts an incoming request; returns the new friend. `FriendsError.notFound` when `id`
    /// is not a pending incoming request of this user, `.friendLimit` when either of you is full.
    @discardableResult
    public func acceptFriendRequest(_ id: Int64) async throws -> Friend {
        try Self.friend(try await friendsCall("POST", "/api/v1/friends/requests/\(id)/accept", expect: 200).json())
    }

    /// Declines an incoming request (its sender still sees it pending, as the contract says).
    public func declineFriendRequest(_ id: Int64) async throws {
        _ = try await friendsCall("POST", "/api/v1/friends/requests/\(id)/decline", expect: 204)
    }

    /// Cancels a request this user sent.
    public func cancelFriendRequest(_ id: Int64) async throws {
        _ = try await friendsCall("DELETE", "/api/v1/friends/requests/\(id)", expect: 204)
    }

    // MARK: Friends

    /// This user's friends, by when each friendship began.
    public func friends() async throws -> [Friend] {
        guard let items = try await friendsCall("GET", "/api/v1/friends", expect: 200).json()["items"]?.arrayValue else {
            throw SyncError.protocolError("friends answer without items")
        }
        return try items.map { item in
            guard let object = item.objectValue else { throw SyncError.protocolError("a friend that is not an object") }
            return try Self.friend(object)
        }
    }

    /// Ends a friendship: from then on neither sees the other's month.
    public func removeFriend(_ id: Int64) async throws {
        _ = try await friendsCall("DELETE", "/api/v1/friends/\(id)", expect: 204)
    }

    /// A friend's month: their todos due in it and their daily stats, fetched side by side.
    /// `FriendsError.notFound` for anyone who is not a current friend.
    public func friendMonth(_ friendID: Int64, month: CalendarMonth) async throws -> FriendMonth {
        let query = [URLQueryItem(name: "month", value: month.description)]
        async let todosAnswer = Self.settled { try await self.friendsCall("GET", "/api/v1/friends/\(friendID)/todos", query: query, expect: 200) }
        async let statsAnswer = Self.settled {
            try await self.friendsCall("GET", "/api/v1/friends/\(friendID)/daily-stats", query: query, expect: 200)
        }
        let (todosResult, statsResult) = await (todosAnswer, statsAnswer)
        let (todoBody, statBody) = try (todosResult.get().json(), statsResult.get().json())
        guard let todoItems = todoBody["items"]?.arrayValue, let statItems = statBody["items"]?.arrayValue else {
            throw SyncError.protocolError("a friend's month without items")
        }
        let todos = try todoItems.map { item in
            guard let object = item.objectValue else { throw SyncError.protocolError("a friend's todo that is not an object") }
            return try Self.friendTodo(object)
        }
        let stats = try statItems.map { item in
            guard let stat = LocalDailyStat(json: JSONText.encode(item)) else {
                throw SyncError.protocolError("a friend's daily stat without id, date, balance and center")
            }
            return stat
        }
        return FriendMonth(friendID: friendID, month: month, todos: todos, stats: stats)
    }

    // MARK: Wire

    /// The outcome of a call run beside another, never thrown: both halves of a friend's month
    /// run to their end and the first half's error is the one reported, whichever failed first.
    /// (This was first the workaround for FoundationNetworking's cancel deadlock, seen when a 404
    /// of one half cancelled the other; every request now ends that way: `URLSessionCall`.)
    static func settled<T: Sendable>(_ body: @Sendable () async throws -> T) async -> Result<T, Error> {
        do {
            return .success(try await body())
        } catch {
            return .failure(error)
        }
    }

    /// One call of this family: the answer when its status is `expect`, else the typed error.
    func friendsCall(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil,
                     expect: Int) async throws -> APIResponse {
        let key = method == "POST" ? ["Idempotency-Key": UUID().uuidString] : [:]
        let response = try await authorized(method, path, query: query, body: body, headers: key,
                                            deadline: SyncDeadline(clock: api.clock, seconds: api.timeouts.sync),
                                            resend: method != "DELETE")
        guard response.status != expect else { return response }
        throw Self.friendsFailure(response)
    }

    static func friendsFailure(_ response: APIResponse) -> Error {
        let code: String? = if case .server(_, let code, _, _) = response.error { code } else { nil }
        switch (response.status, code) {
        case (404, _): return FriendsError.notFound
        case (409, "friend_limit"): return FriendsError.friendLimit
        case (422, _):
            guard case .server(_, _, let message, let details) = response.error else { return response.error }
            return FriendsError.invalid(message: message, details: details)
        case (429, _): return FriendsError.rateLimited(retryAfter: response.headers["retry-after"].flatMap(Double.init))
        default: return failure(response)
        }
    }

    static func person(_ object: JSONObject) throws -> Person {
        guard let id = object["id"]?.int64Value, let email = object["email"]?.stringValue else {
            throw SyncError.protocolError("a person without id and email")
        }
        return Person(id: id, email: email, nickname: object["nickname"]?.stringValue)
    }

    static func friend(_ object: JSONObject) throws -> Friend {
        guard let since = object["since"]?.stringValue else { throw SyncError.protocolError("a friend without since") }
        return Friend(person: try person(object), since: since)
    }

    static func profile(_ object: JSONObject) throws -> AccountProfile {
        guard let id = object["id"]?.int64Value, let email = object["email"]?.stringValue,
              let createdAt = object["createdAt"]?.stringValue else {
            throw SyncError.protocolError("an account without id, email and createdAt")
        }
        return AccountProfile(id: id, email: email, nickname: object["nickname"]?.stringValue, createdAt: createdAt)
    }

    static func friendTodo(_ object: JSONObject) throws -> FriendTodo {
        guard let id = object["id"]?.int64Value, let title = object["title"]?.stringValue,
              let deadline = object["deadline"]?.stringValue.flatMap(Day.init) else {
            throw SyncError.protocolError("a friend's todo without id, title and deadline")
        }
        let tag = object["tag"]?.objectValue.map {
            FriendTodo.Tag(name: $0["name"]?.stringValue ?? "", color: $0["color"]?.stringValue ?? "")
        }
        return FriendTodo(
            id: id, title: title, deadline: deadline, isCompleted: object["isCompleted"]?.boolValue ?? false,
            isImportant: object["isImportant"]?.boolValue ?? false, isLife: object["isLife"]?.boolValue ?? false,
            difficulty: Int(object["difficulty"]?.int64Value ?? 0), estimatedTime: Int(object["estimatedTime"]?.int64Value ?? 0),
            tag: tag)
    }
}
