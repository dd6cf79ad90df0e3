import MariaDB
import TodoSyncCore

// Friends (contract "Friends", issue 37; docs/FRIENDS.md): the account's nickname, friend
// requests addressed to emails, friendships, and a friend's month. The tables are Sql/032's.

/// A person as the friends routes show one: `{"id", "email", "nickname"}`, and for a friend the
/// time the friendship began (`since`).
public struct FriendPerson: Sendable, Equatable {
    public let id: Int64
    public let email: String
    public let nickname: String?
    /// When the friendship began (RFC 3339); nil for a person who is not (yet) a friend.
    public let since: String?

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("email", email)
        writer.field("nickname", nickname)
        if let since { writer.field("since", since) }
        writer.endObject()
    }
}

/// `GET /account`: the signed-in user.
public struct AccountProfile: Sendable, Equatable {
    public let id: Int64
    public let email: String
    public let nickname: String?
    public let createdAt: String

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("id", id)
        writer.field("email", email)
        writer.field("nickname", nickname)
        writer.field("createdAt", createdAt)
        writer.endObject()
    }
}

/// A user's pending friend requests, as `GET /friends/requests` lists them.
public struct FriendRequests: Sendable {
    public struct Incoming: Sendable {
        public let id: Int64
        public let from: FriendPerson
        public let createdAt: String
    }
    public struct Outgoing: Sendable {
        public let id: Int64
        public let email: String
        public let createdAt: String
    }
    public var incoming: [Incoming] = []
    public var outgoing: [Outgoing] = []

    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("incoming")
        writer.beginArray()
        for request in incoming {
            writer.beginObject()
            writer.field("id", request.id)
            writer.key("from")
            request.from.write(to: &writer)
            writer.field("createdAt", request.createdAt)
            writer.endObject()
        }
        writer.endArray()
        writer.key("outgoing")
        writer.beginArray()
        for request in outgoing {
            writer.beginObject()
            writer.field("id", request.id)
            writer.field("email", request.email)
            writer.field("createdAt", request.createdAt)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
    }
}

/// The contract's numbers for friends.
public enum FriendLimits {
    /// Friends per account at most.
    public static let maximumFriends = 500
    /// Requests per account in any `requestWindowSeconds`.
    public static let requestsPerWindow = 20
    public static let requestWindowSeconds: Int64 = 3600
    /// A pending request expires this long after it was sent.
    public static let requestLifetimeSeconds: Int64 = 30 * 86_400
}

/// What a change of friends or requests changed for whom: the users whose friends list or
/// requests changed (each gets a `{"friendId": null}` event; `Application`), and for a request
/// by email whether one more channel is to be published to, so that a request to an email
/// without an account publishes as much as one to an account (no timing tells them apart).
public struct FriendListChange: Sendable {
    public var users: [Int64] = []
    public var padding = 0

    public init(users: [Int64] = [], padding: Int = 0) {
        self.users = users
        self.padding = padding
    }
}

extension Store {
    // MARK: Account

    /// `GET /account`; `unauthenticated` when the account is gone.
    public func accountProfile(userID: Int64) throws -> AccountProfile {
        typealias Column = SQL.Friends.ProfileColumn
        guard let row = try guarded({ try db.queryOne(SQL.Friends.profile, [.int(userID)]) }) else {
            throw DomainError.unauthenticated
        }
        return AccountProfile(
            id: row.int64(Column.id)!, email: row.string(Column.email)!,
            nickname: row.string(Column.nickname),
            createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(Column.createdAt)!))
    }

    /// `PATCH /account`: sets or clears the nickname. Returns the profile, and whom to tell
    /// (friends, and the recipients of the user's pending requests, whose lists show the
    /// nickname) when it changed.
    public func setNickname(userID: Int64, _ input: NicknameInput) throws -> (AccountProfile, FriendListChange) {
        var change = FriendListChange()
        if let nickname = input.change {
            let changed = try guarded {
                try db.inSavepoint {
                    let result = try db.execute(SQL.Friends.setNickname, [nickname.map { .text($0) } ?? .null, .int(userID)])
                    guard result.affectedRows == 1 else { return [Int64]() }
                    return try db.query(SQL.Friends.peopleWhoSee, [.int(userID), .int(userID), .timestamp(Timestamp.now())])
                        .compactMap { $0.int64(OnlyColumn.value) }
                }
            }
            change.users = changed
        }
        return (try accountProfile(userID: userID), change)
    }

    // MARK: Requests

    /// `POST /friends/requests`: stores the request (202 for any email), or makes friends at once
    /// when the email's account has a pending request to this user. The same statements run
    /// whether or not the email names an account (a missing one is looked up as id 0), so the
    /// answer's timing tells nothing either. `validation` for the user's own email, `throttled`
    /// past 20 requests in 60 minutes, `DomainError.friendLimit` when crossing would pass 500 friends.
    public func sendFriendRequest(userID: Int64, _ input: FriendRequestInput) throws -> FriendListChange {
        try guarded {
            try db.inSavepoint {
                let now = Timestamp.now()
                typealias Sender = SQL.Friends.SenderColumn
                let windowStart = DatabaseValue.timestamp(now.adding(seconds: -FriendLimits.requestWindowSeconds))
                guard let me = try db.queryOne(SQL.Friends.lockSender, [windowStart, .timestamp(now), windowStart, .int(userID)])
                else { throw DomainError.unauthenticated }
                if me.string(Sender.emailKey) == input.emailKey {
                    throw DomainError.validation(field: "email", "must not be your own email")
                }
                if me.int64(Sender.sentInWindow)! >= Int64(FriendLimits.requestsPerWindow) {
                    let wait = me.int64(Sender.secondsUntilOneLeaves) ?? 1
                    throw DomainError.throttled(message: "Too many friend requests; try again later.",
                                                retryAfterSeconds: max(wait, 1))
                }
                try db.execute(SQL.Friends.recordSend, [.int(userID), .timestamp(now)])
                // The email's live account (0: none), whether it is a friend already, and its
                // pending request to this user: three lookups whatever the email names.
                let target = try db.queryOne(SQL.Friends.accountByEmailKey, [.text(input.emailKey)])?.int64(OnlyColumn.value) ?? 0
                let isFriend = try db.queryOne(SQL.Friends.isFriend, [.int(userID), .int(target)]) != nil
                let crossed = try db.queryOne(SQL.Friends.pendingFrom, [
                    .int(target), .text(me.string(Sender.emailKey)!), .timestamp(now),
                ])?.int64(OnlyColumn.value)
                if isFriend { return FriendListChange(users: [], padding: 2) }
                if let crossed {
                    try befriend(userID, target, settling: crossed, now: now)
                    return FriendListChange(users: [userID, target])
                }
                try db.execute(SQL.Friends.insertRequest, [
                    .int(userID), .text(input.email), .text(input.emailKey), .timestamp(now),
                    .timestamp(now.adding(seconds: FriendLimits.requestLifetimeSeconds)),
                ])
                return target == 0 ? FriendListChange(users: [userID], padding: 1) : FriendListChange(users: [userID, target])
            }
        }
    }

    /// `GET /friends/requests`: pending, unexpired requests, newest first.
    public func friendRequests(userID: Int64) throws -> FriendRequests {
        try guarded { try db.inTransaction(readOnly: true) { try friendRequestsInTransaction(userID: userID) } }
    }

    /// `POST /friends/requests/{id}/accept`: the sender becomes a friend. `notFound` unless the id
    /// is a pending incoming request of the user; `DomainError.friendLimit` at 500 friends.
    public func acceptFriendRequest(userID: Int64, requestID: Int64) throws -> (FriendPerson, FriendListChange) {
        try guarded {
            try db.inSavepoint {
                let now = Timestamp.now()
                guard let sender = try db.queryOne(SQL.Friends.incomingByID, [.int(userID), .int(requestID), .timestamp(now)])?
                    .int64(OnlyColumn.value) else { throw DomainError.notFound }
                try befriend(userID, sender, settling: requestID, now: now)
                guard let row = try db.queryOne(SQL.Friends.friend, [.int(userID), .int(sender)]) else {
                    throw DomainError.notFound
                }
                return (Self.friend(row), FriendListChange(users: [userID, sender]))
            }
        }
    }

    /// `POST /friends/requests/{id}/decline`: the recipient no longer sees it; to its sender it
    /// stays pending. `notFound` unless it is a pending incoming request of the user.
    public func declineFriendRequest(userID: Int64, requestID: Int64) throws -> FriendListChange {
        let now = DatabaseValue.timestamp(Timestamp.now())
        let result = try guarded { try db.execute(SQL.Friends.decline, [now, .int(requestID), .int(userID), now]) }
        guard result.affectedRows == 1 else { throw DomainError.notFound }
        return FriendListChange(users: [userID])
    }

    /// `DELETE /friends/requests/{id}`: the sender cancels. `notFound` unless it is a pending
    /// outgoing request of the user.
    public func cancelFriendRequest(userID: Int64, requestID: Int64) throws -> FriendListChange {
        try guarded {
            try db.inSavepoint {
                let now = DatabaseValue.timestamp(Timestamp.now())
                // The recipient to tell, when it is an account that still sees the request.
                let recipient = try db.queryOne(SQL.Friends.recipientOf, [.int(requestID), .int(userID), now])
                guard try db.execute(SQL.Friends.cancel, [.int(requestID), .int(userID), now]).affectedRows == 1 else {
                    throw DomainError.notFound
                }
                return FriendListChange(users: [userID] + (recipient?.int64(OnlyColumn.value).map { [$0] } ?? []))
            }
        }
    }

    // MARK: Friends

    /// `GET /friends`: by `since`, then id.
    public func friends(userID: Int64) throws -> [FriendPerson] {
        try guarded { try db.query(SQL.Friends.friends, [.int(userID)]).map(Self.friend) }
    }

    /// `DELETE /friends/{id}`: `notFound` unless `friendID` is a current friend.
    public func unfriend(userID: Int64, friendID: Int64) throws -> FriendListChange {
        let deleted = try guarded {
            try db.execute(SQL.Friends.unfriend, [.int(userID), .int(friendID), .int(friendID), .int(userID)])
        }
        guard deleted.affectedRows > 0 else { throw DomainError.notFound }
        return FriendListChange(users: [userID, friendID])
    }

    /// The friends of `userID` (ids only): where a change of the user's month is announced.
    public func friendIDs(of userID: Int64) throws -> [Int64] {
        try guarded { try db.query(SQL.Friends.friendIDs, [.int(userID)]).compactMap { $0.int64(OnlyColumn.value) } }
    }

    /// Whether `friendID` is a current friend of `userID` (the one check of every `/friends/{id}` read).
    public func isFriend(userID: Int64, friendID: Int64) throws -> Bool {
        try guarded { try db.queryOne(SQL.Friends.isFriend, [.int(userID), .int(friendID)]) != nil }
    }

    /// A friend's month of todos (contract FriendTodo): the owner's own `GET /todos?from=&to=`
    /// range read of `todo_list` (the rows the write path rendered, in list order), joined to the
    /// reader's friendship row (`ReadOwner.friend`) and to each todo's live tag, in one statement.
    /// Each body is copied without the members a friend does not see, its tag's name and color
    /// in place of its id. No row: one more lookup tells a friend with no todos that month (`[]`)
    /// from anyone else (`notFound`).
    public func friendTodoList(userID: Int64, friendID: Int64, from: Day, to: Day) throws -> [UInt8] {
        typealias Column = SQL.Friends.TodoColumn
        let (items, rows, tagged) = try guarded {
            var items: [UInt8] = [UInt8(ascii: "[")]
            items.reserveCapacity(16 * 1024)
            var rows = 0
            // Where each tagged todo's `null` tag stands in `items`, and its tag id.
            var tagged: [(at: Int, tagID: Int64)] = []
            _ = try db.forEachRow(SQL.Friends.todos, [.int(userID), .int(friendID), .day(from), .day(to)],
                                  restart: { items = [UInt8(ascii: "[")]; rows = 0; tagged = [] }) { row throws(DatabaseError) in
                if rows > 0 { items.append(UInt8(ascii: ",")) }
                rows += 1
                var tagID: Int64?
                _ = try row.withBytes(Column.body) { body in
                    tagID = FriendTodoProjection.tagID(in: body)
                    FriendTodoProjection.append(body, to: &items)
                }
                if let tagID { tagged.append((items.count, tagID)) }
                JSONWriter.appendLiteral("null}", to: &items)
            }
            items.append(UInt8(ascii: "]"))
            return (items, rows, tagged)
        }
        if rows == 0, try !isFriend(userID: userID, friendID: friendID) { throw DomainError.notFound }
        guard !tagged.isEmpty else { return items }
        // The friend's live tags (a handful), one statement for the month: each tagged todo's
        // `null` becomes `{"name", "color"}` (a tag delete un-tags its todos in its own commit).
        typealias Tag = SQL.Friends.TagColumn
        var tags: [Int64: [UInt8]] = [:]
        for row in try guarded({ try db.query(SQL.Friends.liveTags, [.int(friendID)]) }) {
            var tag = JSONWriter(reservingCapacity: 64)
            tag.beginObject()
            tag.field("name", row.string(Tag.name) ?? "")
            tag.field("color", row.string(Tag.color))
            tag.endObject()
            tags[row.int64(Tag.id)!] = tag.bytes
        }
        var out: [UInt8] = []
        out.reserveCapacity(items.count + tagged.count * 48)
        var copied = 0
        for (at, tagID) in tagged {
            out.append(contentsOf: items[copied..<at])
            out.append(contentsOf: tags[tagID] ?? Array("null".utf8))
            copied = at + 4  // past the `null`
        }
        out.append(contentsOf: items[copied...])
        return out
    }

    /// A friend's daily stats of a month: the owner's own `GET /daily-stats?month=` statement
    /// (`SQL.DailyStats.liveInRange`) over the reader's friendship row, written by the same row
    /// writer, so the bytes are the friend's own. `notFound` unless `friendID` is a current friend.
    public func friendDailyStatList(userID: Int64, friendID: Int64, from: Day, to: Day) throws -> [UInt8] {
        let (items, rows) = try guarded {
            var items = JSONWriter(reservingCapacity: 8192)
            items.beginArray()
            var rows = 0
            _ = try db.forEachRow(SQL.Friends.dailyStats, [.int(userID), .int(friendID), .day(from), .day(to)],
                                  restart: { items = JSONWriter(reservingCapacity: 8192); items.beginArray(); rows = 0 }) {
                row throws(DatabaseError) in
                try DailyStatRowJSON.write(row, to: &items)
                rows += 1
            }
            items.endArray()
            return (items.bytes, rows)
        }
        if rows == 0, try !isFriend(userID: userID, friendID: friendID) { throw DomainError.notFound }
        return items
    }

    // MARK: Account deletion

    /// In the account delete's transaction, before the account is marked (its email key is still
    /// its own): ends its friendships, deletes the requests it sent, and closes those sent to its
    /// email (never delivered; they stay listed for their senders, Sql/032). Returns whom to tell.
    func endFriendsOfDeletedAccount(userID: Int64, emailKey: String) throws -> [Int64] {
        let now = DatabaseValue.timestamp(Timestamp.now())
        let told = try db.query(SQL.Friends.peopleWhoSee, [.int(userID), .int(userID), now]).compactMap { $0.int64(OnlyColumn.value) }
        try db.execute(SQL.Friends.unfriendAll, [.int(userID), .int(userID)])
        try db.execute(SQL.Friends.deleteSent, [.int(userID)])
        try db.execute(SQL.Friends.closeAddressedTo, [now, .text(emailKey)])
        return told
    }

    /// The export's friends and requests (`exportAccount`), inside its read transaction.
    func writeFriendsExport(userID: Int64, to out: inout JSONWriter) throws {
        out.key("friends")
        out.beginArray()
        for row in try db.query(SQL.Friends.friends, [.int(userID)]) { Self.friend(row).write(to: &out) }
        out.endArray()
        out.key("friendRequests")
        try friendRequestsInTransaction(userID: userID).write(to: &out)
    }

    private func friendRequestsInTransaction(userID: Int64) throws -> FriendRequests {
        typealias In = SQL.Friends.IncomingColumn
        typealias Out = SQL.Friends.OutgoingColumn
        let now = DatabaseValue.timestamp(Timestamp.now())
        var requests = FriendRequests()
        requests.incoming = try db.query(SQL.Friends.incoming, [.int(userID), now]).map { row in
            FriendRequests.Incoming(
                id: row.int64(In.id)!,
                from: FriendPerson(id: row.int64(In.senderID)!, email: row.string(In.senderEmail)!,
                                   nickname: row.string(In.senderNickname), since: nil),
                createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(In.createdAt)!))
        }
        requests.outgoing = try db.query(SQL.Friends.outgoing, [.int(userID), now]).map { row in
            FriendRequests.Outgoing(
                id: row.int64(Out.id)!, email: row.string(Out.email)!,
                createdAt: Timestamp.rfc3339(fromDatabaseText: row.string(Out.createdAt)!))
        }
        return requests
    }

    /// The purge's part: expired requests and request counts older than the window. Rows only:
    /// expiry itself is decided by the reads (`expires_at`), at the exact time.
    func purgeFriendRows(now: Timestamp) throws -> Int {
        var deleted = 0
        while true {
            let batch = Int(try db.execute(SQL.Friends.purgeExpired, [.timestamp(now), .int(1000)]).affectedRows)
            deleted += batch
            if batch < 1000 { break }
        }
        try db.execute(SQL.Friends.purgeSends, [.timestamp(now.adding(seconds: -FriendLimits.requestWindowSeconds))])
        return deleted
    }

    // MARK: Helpers

    /// Makes `a` and `b` friends and deletes the request that did it (and any the other way):
    /// both users' rows locked in id order first, so two accepts at once cannot both pass 500.
    private func befriend(_ a: Int64, _ b: Int64, settling requestID: Int64, now: Timestamp) throws {
        let counts = try db.query(SQL.Friends.lockPair, [.int(min(a, b)), .int(max(a, b))])
        guard counts.count == 2 else { throw DomainError.notFound }
        for row in counts where row.int64(SQL.Friends.LockPairColumn.friends)! >= Int64(FriendLimits.maximumFriends) { throw DomainError.friendLimit(maximum: FriendLimits.maximumFriends) }
        try db.execute(SQL.Friends.insertFriendship, [.int(a), .int(b), .timestamp(now), .int(b), .int(a), .timestamp(now)])
        try db.execute(SQL.Friends.deleteRequest, [.int(requestID)])
        try db.execute(SQL.Friends.deleteBetween, [.int(a), .int(b), .int(b), .int(a)])
    }

    private static func friend(_ row: Row) -> FriendPerson {
        typealias Column = SQL.Friends.FriendColumn
        return FriendPerson(id: row.int64(Column.id)!, email: row.string(Column.email)!,
                            nickname: row.string(Column.nickname),
                            since: Timestamp.rfc3339(fromDatabaseText: row.string(Column.since)!))
    }
}

/// A stored todo body (`todo_list`, the contract's Todo at the current schema version) as the
/// contract's FriendTodo: the members a friend does not see cut out, and `"tag":` last, whose
/// value and the closing brace the caller writes.
enum FriendTodoProjection {
    /// The members a FriendTodo keeps.
    static let kept: Set<String> = ["id", "title", "deadline", "isCompleted", "isImportant", "isLife", "difficulty",
                                    "estimatedTime"]
    /// Every other member of the stored Todo, in the order `Todo.write` writes them (`clientId`,
    /// the synced fields the friend does not see, the bookkeeping): derived from the field list,
    /// so a field added later (remindAt) is cut without an edit here.
    static let cut: [[UInt8]] = (["clientId"] + TodoField.allCases.map(\.rawValue)
        + ["version", "createdAt", "updatedAt", "deletedAt"])
        .filter { !kept.contains($0) }
        .map(JSONMemberFilter.memberPattern)

    /// `body` without the cut members (`JSONMemberFilter.appendFlatObject`: memchr to each, the
    /// rest copied), its closing brace replaced by `,"tag":`.
    static let tagIDPattern = JSONMemberFilter.memberPattern("tagId")

    /// The todo's `tagId`, nil when null.
    static func tagID(in body: UnsafeRawBufferPointer) -> Int64? {
        let pattern = tagIDPattern, first = pattern[0]
        var at = 0
        var found: Int?
        while at + pattern.count <= body.count {
            if body[at] == first, pattern.indices.allSatisfy({ body[at + $0] == pattern[$0] }) {
                found = at
                break
            }
            at += 1
        }
        guard let found else { return nil }
        var index = found + pattern.count
        var value: Int64 = 0
        var digits = 0
        while index < body.count, body[index] >= UInt8(ascii: "0"), body[index] <= UInt8(ascii: "9") {
            value = value * 10 + Int64(body[index] - UInt8(ascii: "0"))
            index += 1
            digits += 1
        }
        return digits > 0 ? value : nil
    }

    static func append(_ body: UnsafeRawBufferPointer, to out: inout [UInt8]) {
        JSONMemberFilter.appendFlatObject(body, removing: cut, to: &out)
        out.removeLast()  // the object's `}`
        JSONWriter.appendLiteral(#","tag":"#, to: &out)
    }
}

extension SQL {
    /// The statements of friends, beside the code that binds them (Sql/032).
    enum Friends {
        enum ProfileColumn: Int, ResultColumns { case id, email, nickname, createdAt }
        static let profile = "SELECT id, email, nickname, created_at FROM users WHERE id = ? AND deleted_at IS NULL"
        /// Parameters: nickname or NULL, user. Affects 0 rows when the value is the same.
        static let setNickname = "UPDATE users SET nickname = ? WHERE id = ? AND deleted_at IS NULL"

        /// Whose lists show the user: friends, and the accounts its pending requests are addressed
        /// to. Parameters: user, user, now.
        static let peopleWhoSee = """
            SELECT friend_id FROM friendships WHERE user_id = ?
            UNION
            SELECT u.id FROM friend_requests r JOIN users u ON u.email_key = r.email_key AND u.deleted_at IS NULL
             WHERE r.user_id = ? AND r.expires_at > ? AND r.closed_at IS NULL
            """

        enum SenderColumn: Int, ResultColumns { case emailKey, sentInWindow, secondsUntilOneLeaves }
        /// The sender's row locked (its requests are counted one at a time), with its email key, its
        /// requests in the window and the seconds until the oldest of them leaves it. Parameters:
        /// window start, now, window start, user.
        static let lockSender = """
            SELECT u.email_key,
                   (SELECT COUNT(*) FROM friend_request_sends s WHERE s.user_id = u.id AND s.sent_at > ?),
                   (SELECT CAST(CEILING(TIMESTAMPDIFF(MICROSECOND, ?, MIN(s.sent_at)) / 1000000) AS SIGNED)
                           + \(FriendLimits.requestWindowSeconds)
                      FROM friend_request_sends s WHERE s.user_id = u.id AND s.sent_at > ?)
              FROM users u WHERE u.id = ? AND u.deleted_at IS NULL FOR UPDATE
            """
        static let recordSend = "INSERT INTO friend_request_sends (user_id, sent_at) VALUES (?, ?)"
        static let accountByEmailKey = "SELECT id FROM users WHERE email_key = ? AND deleted_at IS NULL"
        /// Parameters: user, other.
        static let isFriend = """
            SELECT 1 FROM friendships f JOIN users u ON u.id = f.friend_id AND u.deleted_at IS NULL
             WHERE f.user_id = ? AND f.friend_id = ?
            """
        /// A pending request from a sender to an email key (a declined one included: to its sender it
        /// is pending, and the recipient asking back wants the friendship too). Parameters: sender,
        /// email key, now. Locked: it is settled in this transaction.
        static let pendingFrom = """
            SELECT id FROM friend_requests WHERE user_id = ? AND email_key = ? AND expires_at > ? FOR UPDATE
            """
        /// A new request, or a repeat: a pending one changes nothing, an expired one starts afresh
        /// (the assignments read the old `expires_at` until it is assigned, last). Parameters:
        /// sender, email, email key, now, expiry.
        static let insertRequest = """
            INSERT INTO friend_requests (user_id, email, email_key, created_at, expires_at) VALUES (?, ?, ?, ?, ?)
                ON DUPLICATE KEY UPDATE
                    email = IF(expires_at <= VALUES(created_at), VALUES(email), email),
                    closed_at = IF(expires_at <= VALUES(created_at), NULL, closed_at),
                    created_at = IF(expires_at <= VALUES(created_at), VALUES(created_at), created_at),
                    expires_at = IF(expires_at <= VALUES(created_at), VALUES(expires_at), expires_at)
            """

        enum IncomingColumn: Int, ResultColumns { case id, senderID, senderEmail, senderNickname, createdAt }
        /// Parameters: user, now.
        static let incoming = """
            SELECT r.id, s.id, s.email, s.nickname, r.created_at
              FROM users me
              JOIN friend_requests r ON r.email_key = me.email_key
              JOIN users s ON s.id = r.user_id AND s.deleted_at IS NULL
             WHERE me.id = ? AND me.deleted_at IS NULL AND r.expires_at > ? AND r.closed_at IS NULL
             ORDER BY r.created_at DESC, r.id DESC
            """
        enum OutgoingColumn: Int, ResultColumns { case id, email, createdAt }
        /// Parameters: user, now.
        static let outgoing = """
            SELECT id, email, created_at FROM friend_requests WHERE user_id = ? AND expires_at > ?
             ORDER BY created_at DESC, id DESC
            """
        /// The sender of a pending incoming request. Parameters: user, request, now.
        static let incomingByID = """
            SELECT r.user_id FROM friend_requests r
              JOIN users me ON me.email_key = r.email_key AND me.id = ? AND me.deleted_at IS NULL
              JOIN users s ON s.id = r.user_id AND s.deleted_at IS NULL
             WHERE r.id = ? AND r.expires_at > ? AND r.closed_at IS NULL FOR UPDATE
            """
        /// Parameters: now, request, user, now.
        static let decline = """
            UPDATE friend_requests r JOIN users me ON me.email_key = r.email_key AND me.deleted_at IS NULL
               SET r.closed_at = ?
             WHERE r.id = ? AND me.id = ? AND r.expires_at > ? AND r.closed_at IS NULL
            """
        /// The account a pending outgoing request reaches. Parameters: request, user, now.
        static let recipientOf = """
            SELECT u.id FROM friend_requests r JOIN users u ON u.email_key = r.email_key AND u.deleted_at IS NULL
             WHERE r.id = ? AND r.user_id = ? AND r.expires_at > ? AND r.closed_at IS NULL
            """
        /// Parameters: request, user, now.
        static let cancel = "DELETE FROM friend_requests WHERE id = ? AND user_id = ? AND expires_at > ?"
        static let deleteRequest = "DELETE FROM friend_requests WHERE id = ?"
        /// Requests either way between two accounts (by their email keys). Parameters: a, b, b, a.
        static let deleteBetween = """
            DELETE r FROM friend_requests r JOIN users u ON u.email_key = r.email_key
             WHERE (r.user_id = ? AND u.id = ?) OR (r.user_id = ? AND u.id = ?)
            """
        /// Both users locked in id order, each with its number of friends. Parameters: lower id, higher id.
        static let lockPair = """
            SELECT u.id, (SELECT COUNT(*) FROM friendships f WHERE f.user_id = u.id)
              FROM users u WHERE u.id IN (?, ?) AND u.deleted_at IS NULL ORDER BY u.id FOR UPDATE
            """
        /// Parameters: a, b, since, b, a, since.
        static let insertFriendship = "INSERT IGNORE INTO friendships (user_id, friend_id, since) VALUES (?, ?, ?), (?, ?, ?)"

        enum FriendColumn: Int, ResultColumns { case id, email, nickname, since }
        static let friends = """
            SELECT u.id, u.email, u.nickname, f.since
              FROM friendships f JOIN users u ON u.id = f.friend_id AND u.deleted_at IS NULL
             WHERE f.user_id = ? ORDER BY f.since, u.id
            """
        /// Parameters: user, friend.
        static let friend = """
            SELECT u.id, u.email, u.nickname, f.since
              FROM friendships f JOIN users u ON u.id = f.friend_id AND u.deleted_at IS NULL
             WHERE f.user_id = ? AND f.friend_id = ?
            """
        static let friendIDs = "SELECT friend_id FROM friendships WHERE user_id = ?"
        /// Parameters: user, friend, friend, user.
        static let unfriend = """
            DELETE FROM friendships WHERE (user_id = ? AND friend_id = ?) OR (user_id = ? AND friend_id = ?)
            """
        /// Parameters: user, user.
        static let unfriendAll = "DELETE FROM friendships WHERE user_id = ? OR friend_id = ?"
        static let deleteSent = "DELETE FROM friend_requests WHERE user_id = ?"
        /// Parameters: now, email key.
        static let closeAddressedTo = "UPDATE friend_requests SET closed_at = ? WHERE email_key = ? AND closed_at IS NULL"

        enum LockPairColumn: Int, ResultColumns { case id, friends }
        /// A friend's todos of a range: `SQL.TodoList.bodiesInRange`'s read over the reader's
        /// friendship (`ReadOwner.friend`), in list order (the primary key's). Parameters:
        /// reader, friend, from, to.
        static let todos = """
            SELECT l.body FROM \(ReadOwner.friend.from("todo_list l", alias: "l"))
             WHERE \(ReadOwner.friend.condition(alias: "l")) AND l.deadline BETWEEN ? AND ?
             ORDER BY \(TodoList.order)
            """
        enum TodoColumn: Int, ResultColumns { case body }
        enum TagColumn: Int, ResultColumns { case id, name, color }
        static let liveTags = "SELECT id, name, color FROM tags WHERE user_id = ? AND deleted_at IS NULL"
        /// The owner's `GET /daily-stats?month=` statement over the reader's friendship.
        /// Parameters: reader, friend, from, to.
        static let dailyStats = DailyStats.liveInRange(.friend)

        /// Parameters: now, batch.
        static let purgeExpired = "DELETE FROM friend_requests WHERE expires_at <= ? LIMIT ?"
        static let purgeSends = "DELETE FROM friend_request_sends WHERE sent_at <= ?"
    }
}
