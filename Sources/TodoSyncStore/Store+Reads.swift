import Credentials
import Deflate
import MariaDB
import TodoSyncCore

/// Whom a hot list read is for. The API layer authenticates every request; for the hottest reads
/// it may instead hand the store the bearer token, which the read resolves in the same statement
/// as it reads the rows (`SQL.ReadOwner.token`), saving a round trip per request.
public enum Authentication: Sendable, Equatable {
    /// A user the API layer has already authenticated.
    case user(Int64)
    /// A bearer token, still to be checked: the read throws `DomainError.unauthenticated` when it
    /// is unknown, revoked or expired.
    case token(String)
}

/// A hot list read: whose list it was (the request log names the user) and the JSON array.
public struct RenderedList: Sendable {
    public let userID: Int64
    public let json: [UInt8]
    /// Instead of `json` (then empty): the whole response body, `{"items":` the array `}`, as a
    /// gzip member compressed when the list was written (`todoList(_:from:to:gzip:)`).
    public let gzippedItems: [UInt8]?

    init(userID: Int64, json: [UInt8], gzippedItems: [UInt8]? = nil) {
        (self.userID, self.json, self.gzippedItems) = (userID, json, gzippedItems)
    }
}

extension Store {
    /// The user's live todos whose deadlines lie from `from` to `to` inclusive, in the contract's
    /// order, as a JSON array of records. The records are `todo_list`'s, rendered at write time:
    /// the read copies bytes. One date is read from its stored list (`todo_days`) when it is
    /// stored: one row. With `gzip` (the client accepts it), a stored list long enough to be worth
    /// compressing comes as `gzippedItems`, compressed when it was stored.
    public func todoList(_ owner: Authentication, from: Day, to: Day, gzip: Bool = false) throws -> RenderedList {
        if from == to {
            switch try storedDayList(owner, from, gzip: gzip) {
            case .list(let list): return list
            case .notStored(let userID): return try rangeList(.user(userID), from: from, to: to)
            }
        }
        return try rangeList(owner, from: from, to: to)
    }

    /// The range read of `todo_list`.
    private func rangeList(_ owner: Authentication, from: Day, to: Day) throws -> RenderedList {
        try renderedList(owner, user: SQL.TodoList.bodiesInRangeForUser, token: SQL.TodoList.bodiesInRangeForToken,
                         [.day(from), .day(to)]) {
            row, items throws(DatabaseError) in try RowJSON.write(to: &items) { bytes throws(DatabaseError) in
                try RowJSON.appendStoredJSON(row, 0, to: &bytes)
            }
        }
    }

    private enum StoredDay {
        case list(RenderedList)
        /// The date has no stored list (`SQL.TodoDays`): its list rows are read.
        case notStored(userID: Int64)
    }

    /// One date's list from its row of `todo_days`: one primary-key lookup, with a token checked
    /// in the same statement (a row whenever the token is good), so a date without todos (no row)
    /// takes no second statement either. A connection lost mid-result is retried from scratch.
    private func storedDayList(_ owner: Authentication, _ day: Day, gzip: Bool) throws -> StoredDay {
        typealias Column = SQL.TodoDays.DayColumn
        let sql: String, parameters: [DatabaseValue]
        let now = Timestamp.now()
        switch owner {
        case .user(let userID):
            (sql, parameters) = (SQL.TodoDays.dayForUser(gzip: gzip), [.int(userID), .day(day)])
        case .token(let token):
            let (staleBefore, hash, at) = tokenParameters(token, now: now)
            (sql, parameters) = (SQL.TodoDays.dayForToken(gzip: gzip), [staleBefore, .day(day), hash, at])
        }
        return try guarded {
            var items = Self.openArray()
            var gzipped: [UInt8]?
            var userID: Int64? = if case .user(let id) = owner { id } else { nil }
            var notStored = false, tokenUseStale = false
            let restart = { items = Self.openArray(); gzipped = nil }
            _ = try db.forEachRow(sql, parameters, restart: restart) { row throws(DatabaseError) in
                if case .token = owner {
                    userID = try row.int64(Column.tokenUserID.rawValue)
                    tokenUseStale = try row.int64(Column.tokenUseStale.rawValue) == 1
                }
                notStored = try row.int64(Column.notStored.rawValue) == 1
                if try row.int64(Column.isCompressed.rawValue) == 1, let crc = try row.int64(Column.crc.rawValue) {
                    _ = try row.withBytes(Column.list.rawValue) {
                        gzipped = GzipMember.fromCompress($0, crc32: UInt32(truncatingIfNeeded: crc))
                    }
                    // Not a COMPRESS() value: the list rows are read, and compressed per request.
                    if gzipped == nil { notStored = true }
                } else if !row.isNull(Column.list.rawValue) {
                    try RowJSON.write(to: &items) { bytes throws(DatabaseError) in
                        try RowJSON.appendStoredJSON(row, Column.list.rawValue, to: &bytes)
                    }
                }
            }
            let owner = try settle(owner, found: userID, tokenUseStale: tokenUseStale, now: now)
            if notStored { return .notStored(userID: owner) }
            if let gzipped { return .list(RenderedList(userID: owner, json: [], gzippedItems: gzipped)) }
            items.endArray()
            return .list(RenderedList(userID: owner, json: items.bytes))
        }
    }

    /// The user's live daily stats from `from` to `to`, by date, as a JSON array of records
    /// written straight from the rows.
    public func dailyStatList(_ owner: Authentication, from: Day, to: Day) throws -> RenderedList {
        try renderedList(owner, user: SQL.DailyStats.liveInRangeForUser, token: SQL.DailyStats.liveInRangeForToken,
                         [.day(from), .day(to)]) {
            row, items throws(DatabaseError) in try DailyStatRowJSON.write(row, to: &items)
        }
    }

    /// A JSON array from a list read by owner (`user` or `token` SQL, both taking the owner's
    /// parameters and then `parameters`, both ending each row with the owner's user id), each row
    /// written by `write` straight from the bind buffers. With a token, `unauthenticated` when the
    /// read finds nothing and the token is bad.
    /// A connection lost mid-result is retried from scratch.
    private func renderedList(
        _ owner: Authentication, user userSQL: String, token tokenSQL: String, _ parameters: [DatabaseValue],
        write: (RowCursor, inout JSONWriter) throws(DatabaseError) -> Void
    ) throws -> RenderedList {
        let sql: String, ownerParameters: [DatabaseValue]
        let now = Timestamp.now()
        switch owner {
        case .user(let userID):
            (sql, ownerParameters) = (userSQL, [.int(userID)])
        case .token(let token):
            let (staleBefore, hash, at) = tokenParameters(token, now: now)
            (sql, ownerParameters) = (tokenSQL, [staleBefore, hash, at])
        }
        return try guarded {
            var items = Self.openArray()
            var userID: Int64? = if case .user(let id) = owner { id } else { nil }
            // With a token, whether its last use is due to be recorded (the column before the user id).
            var tokenUseStale = false
            _ = try db.forEachRow(sql, ownerParameters + parameters, restart: { items = Self.openArray() }) {
                row throws(DatabaseError) in
                if userID == nil {
                    userID = try row.int64(row.count - 1)
                    tokenUseStale = try row.int64(row.count - 2) == 1
                }
                try write(row, &items)
            }
            let owner = try settle(owner, found: userID, tokenUseStale: tokenUseStale, now: now)
            items.endArray()
            return RenderedList(userID: owner, json: items.bytes)
        }
    }

    private static func openArray() -> JSONWriter {
        var items = JSONWriter(reservingCapacity: 8192)
        items.beginArray()
        return items
    }

    /// A token read's parameters (`SQL.ReadOwner.token`): stale-before, the token's hash, now.
    private func tokenParameters(_ token: String, now: Timestamp) -> (DatabaseValue, DatabaseValue, DatabaseValue) {
        (Self.tokenUseStaleBefore(now), .blob(tokenHash(token)), .timestamp(now))
    }

    /// The owner's user id after a read by owner. `found`: the user id the read's rows named (nil:
    /// no row). A token whose read found no row is checked on its own: `unauthenticated` when it
    /// is bad, the user otherwise (a good token with nothing in the range); a found token whose
    /// last use is stale is touched.
    private func settle(_ owner: Authentication, found: Int64?, tokenUseStale: Bool, now: Timestamp) throws -> Int64 {
        switch owner {
        case .user(let userID):
            return userID
        case .token(let token):
            guard let found else {
                guard let id = try authenticate(token: token) else { throw DomainError.unauthenticated }
                return id
            }
            if tokenUseStale { touchToken(hash: tokenHash(token), now: now) }
            return found
        }
    }
}

extension SQL {
    /// `columns` with each name qualified by `alias` (for joins).
    static func qualified(_ columns: String, _ alias: String) -> String {
        columns.split(separator: ",").map { "\(alias).\($0.trimmingWhitespace())" }
            .joined(separator: ", ")
    }

    /// How a hot list read names its user (`Authentication`): by id, or by a bearer token checked
    /// in the same statement, `auth_tokens` read as a constant table (primary-key lookup on the
    /// hash) joined to the user's rows, which saves the separate token round trip. With a token,
    /// no rows means no records *or* a bad token; only then is the token checked on its own.
    ///
    /// With a token, each row also says whether the token's last use is older than the first
    /// parameter (the column before the user id), so the read can keep `last_used_at` (at most
    /// one write a minute, `Tokens.touch`) without a round trip of its own.
    enum ReadOwner {
        /// Parameters start with the user id.
        case user
        /// Parameters start with stale-before, token hash, now.
        case token
        /// A friend's rows (docs/FRIENDS.md): the table joined to the reader's friendship row and
        /// the friend's live account, so a read that is not a current friend's finds none.
        /// Parameters start with the reader's user id, then the friend's.
        case friend

        /// The FROM clause over `table` (with its alias and hints), `alias` being its alias.
        func from(_ table: String, alias: String) -> String {
            switch self {
            case .user: table
            case .token: "auth_tokens a JOIN \(table) ON \(alias).user_id = a.user_id"
            case .friend:
                "friendships fr JOIN users fu ON fu.id = fr.friend_id AND fu.deleted_at IS NULL "
                    + "JOIN \(table) ON \(alias).user_id = fr.friend_id"
            }
        }

        /// The owner's user id, selected as each row's last column (the request log names the
        /// user even when the read checked the token).
        func userID(alias: String) -> String {
            switch self {
            case .user, .friend: "\(alias).user_id"
            case .token: "\(Tokens.lastUsed("a")) < ?, a.user_id"
            }
        }

        /// The WHERE condition that picks the owner's rows.
        func condition(alias: String) -> String {
            switch self {
            case .user: "\(alias).user_id = ?"
            case .token: "a.token_hash = ? AND a.expires_at > ?"
            case .friend: "fr.user_id = ? AND fr.friend_id = ?"
            }
        }
    }
}
