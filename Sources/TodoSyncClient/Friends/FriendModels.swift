import Foundation
import TodoSyncCore

/// A calendar month (`YYYY-MM`, API.md "Conventions"), as the friends routes take it.
public struct CalendarMonth: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int

    /// `YYYY-MM` with a year of 2000–2999 and a month of 01–12; nil otherwise.
    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].count == 4, parts[1].count == 2,
              parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let year = Int(parts[0]), let month = Int(parts[1]) else { return nil }
        self.init(year: year, month: month)
    }

    public init?(year: Int, month: Int) {
        guard (2000...2999).contains(year), (1...12).contains(month) else { return nil }
        self.year = year
        self.month = month
    }

    /// The month of `day`.
    public init(_ day: Day) {
        year = day.year
        month = day.month
    }

    /// Every day of the month, in order.
    public var days: [Day] {
        (1...Day.daysIn(month: month, year: year)).compactMap { Day(year: year, month: month, day: $0) }
    }

    public var description: String { String(format: "%04d-%02d", year, month) }

    public static func < (lhs: CalendarMonth, rhs: CalendarMonth) -> Bool {
        (lhs.year, lhs.month) < (rhs.year, rhs.month)
    }
}

/// Someone as the friends routes show them (API.md "Friends", Person): `id` is the user's id.
public struct Person: Sendable, Equatable {
    public var id: Int64
    public var email: String
    public var nickname: String?

    /// The nickname, or the email when there is none.
    public var displayName: String { nickname ?? email }

    public init(id: Int64, email: String, nickname: String?) {
        self.id = id
        self.email = email
        self.nickname = nickname
    }
}

/// A friend: the person and when the friendship began (RFC 3339 UTC, as sent).
public struct Friend: Sendable, Equatable {
    public var person: Person
    public var since: String

    public var id: Int64 { person.id }

    public init(person: Person, since: String) {
        self.person = person
        self.since = since
    }
}

/// The pending requests of this user, each list newest first (`GET /friends/requests`).
public struct FriendRequests: Sendable, Equatable {
    /// A request someone sent this user: accept or decline it by `id`.
    public struct Incoming: Sendable, Equatable {
        public var id: Int64
        public var from: Person
        public var createdAt: String
    }

    /// A request this user sent, to an email (whether it names an account is never told): it
    /// stays listed until accepted, cancelled or expired; cancel it by `id`.
    public struct Outgoing: Sendable, Equatable {
        public var id: Int64
        public var email: String
        public var createdAt: String
    }

    public var incoming: [Incoming]
    public var outgoing: [Outgoing]
}

/// The signed-in user's account (`GET /api/v1/account`).
public struct AccountProfile: Sendable, Equatable {
    public var id: Int64
    public var email: String
    /// Null until set; what friends see beside the email.
    public var nickname: String?
    public var createdAt: String
}

/// One of a friend's todos as the friend routes show it (FriendTodo): no `raw`, `notes`,
/// `remindAt`, `clientId` or tag id; the tag by name and color.
public struct FriendTodo: Sendable, Equatable {
    public struct Tag: Sendable, Equatable {
        public var name: String
        public var color: String
    }

    public var id: Int64
    public var title: String
    public var deadline: Day
    public var isCompleted: Bool
    public var isImportant: Bool
    public var isLife: Bool
    public var difficulty: Int
    public var estimatedTime: Int
    public var tag: Tag?
}

/// A friend's month: their todos with a deadline in it (in the order of `GET /todos?from&to`)
/// and their daily stats (by date), read together from the server. A value: it is never stored
/// with the user's own records.
public struct FriendMonth: Sendable, Equatable {
    /// One day of the month: its todos, in order, and its stat (nil: no live todo that day).
    public struct DayEntry: Sendable, Equatable {
        public var day: Day
        public var todos: [FriendTodo]
        public var stat: LocalDailyStat?
    }

    public var friendID: Int64
    public var month: CalendarMonth
    public var todos: [FriendTodo]
    public var stats: [LocalDailyStat]

    public init(friendID: Int64, month: CalendarMonth, todos: [FriendTodo], stats: [LocalDailyStat]) {
        self.friendID = friendID
        self.month = month
        self.todos = todos
        self.stats = stats
    }

    /// Every day of the month with its todos and stat (days with neither included, empty).
    public var days: [DayEntry] {
        let todosByDay = Dictionary(grouping: todos, by: \.deadline)
        let statsByDay = Dictionary(stats.map { ($0.date, $0) }, uniquingKeysWith: { first, _ in first })
        return month.days.map { DayEntry(day: $0, todos: todosByDay[$0] ?? [], stat: statsByDay[$0]) }
    }

    /// The days that have a todo or a stat.
    public var busyDays: [DayEntry] { days.filter { !$0.todos.isEmpty || $0.stat != nil } }
}

/// What went wrong on a friends or account route, typed (API.md "Friends"). Offline, timeouts,
/// a refused token and 503 stay `SyncError` (`.offline`, `.timedOut`, `.unauthorized`,
/// `.unavailable`), as for every other call.
public enum FriendsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// 404: not a current friend (on `/friends/{id}` routes: a stranger, a former friend,
    /// yourself, an unknown or deleted user, all alike), or not a pending request of this user.
    case notFound
    /// 409 `friend_limit`: accepting would give one of the two more friends than allowed.
    case friendLimit
    /// 422: your own email, or a nickname outside the rules; `details` name the field.
    case invalid(message: String, details: [ServerProblem])
    /// 429: 20 requests in the last 60 minutes (or another limit); try again after `retryAfter` s.
    case rateLimited(retryAfter: Double?)

    public var description: String {
        switch self {
        case .notFound: return "not found: no such friend or pending request"
        case .friendLimit: return "friend limit: one of you already has the most friends allowed"
        case .invalid(let message, let details):
            return message + (details.isEmpty ? "" : " (" + details.map(\.description).joined(separator: "; ") + ")")
        case .rateLimited(let after):
            return "too many requests" + (after.map { "; try again in \(SyncError.seconds($0)) s" } ?? "")
        }
    }

    /// The contract's error code of the answer.
    public var code: String {
        switch self {
        case .notFound: return "not_found"
        case .friendLimit: return "friend_limit"
        case .invalid: return "validation_failed"
        case .rateLimited: return "rate_limited"
        }
    }
}
