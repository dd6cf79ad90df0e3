import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// The social side (API.md "Friends"; docs/CLIENT-CLI.md "Friends"): `friends [list]`,
/// `friends requests`, `friends add EMAIL`, `friends accept|decline|cancel ID`,
/// `friends remove ID`, `friends month ID [--month YYYY-MM]` and `nickname [NAME | --clear]`.
/// Online only: nothing of it is stored. A refusal exits 1 with the contract's code
/// (`not_found`, `friend_limit`, `validation_failed`, `rate_limited` with `retryAfter`);
/// offline exits 3.
struct Friends: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Friends: list them, handle requests, see a friend's month (online only).",
        discussion: "A friend's month: `friends month ID`. Live updates: `watch --friends`.",
        subcommands: [FriendList.self, FriendRequestList.self, FriendAdd.self, FriendAccept.self, FriendDecline.self,
                      FriendCancel.self, FriendRemove.self, FriendMonthCommand.self],
        defaultSubcommand: FriendList.self)
}

struct FriendList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "Your friends, by when each friendship began.")
    @OptionGroup var options: StoreOptions

    func run() async throws {
        let friends = try await options.client(try options.openStore()).friends()
        if friends.isEmpty { options.output.say("No friends yet (`todosync-client friends add EMAIL`).") }
        for friend in friends {
            options.output.say("\(friend.id)  \(FriendText.person(friend.person))  since \(friend.since)")
        }
        options.output.finish(json: .object(["friends": .array(friends.map(FriendText.json))]))
    }
}

struct FriendRequestList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "requests", abstract: "Pending friend requests, incoming and outgoing.")
    @OptionGroup var options: StoreOptions

    func run() async throws {
        let requests = try await options.client(try options.openStore()).friendRequests()
        options.output.say("Incoming (accept or decline by id):" + (requests.incoming.isEmpty ? " none" : ""))
        for request in requests.incoming {
            options.output.say("  \(request.id)  from \(FriendText.person(request.from))  \(request.createdAt)")
        }
        options.output.say("Outgoing (cancel by id):" + (requests.outgoing.isEmpty ? " none" : ""))
        for request in requests.outgoing {
            options.output.say("  \(request.id)  to \(request.email)  \(request.createdAt)")
        }
        options.output.finish(json: .object([
            "incoming": .array(requests.incoming.map {
                .object(["id": .int($0.id), "from": FriendText.json($0.from), "createdAt": .string($0.createdAt)])
            }),
            "outgoing": .array(requests.outgoing.map {
                .object(["id": .int($0.id), "email": .string($0.email), "createdAt": .string($0.createdAt)])
            }),
        ]))
    }
}

struct FriendAdd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Ask EMAIL to be friends.",
        discussion: """
            The answer never says whether an account has that email: the request is listed under \
            `friends requests` either way, until it is accepted, cancelled or expires (30 days). If \
            EMAIL had asked you, you are friends at once. At most 20 requests an hour.
            """)
    @OptionGroup var options: StoreOptions
    @Argument(help: "Their email.") var email: String

    func run() async throws {
        try await options.client(try options.openStore()).sendFriendRequest(to: email)
        options.output.finish(human: "Asked \(email) to be friends (see `friends requests`).",
                              json: .object(["requested": .string(email)]))
    }
}

struct FriendAccept: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "accept", abstract: "Accept an incoming request (its id from `friends requests`).")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The request's id.") var id: Int64

    func run() async throws {
        let friend = try await options.client(try options.openStore()).acceptFriendRequest(id)
        options.output.finish(human: "You and \(FriendText.person(friend.person)) are friends (friend \(friend.id)).",
                              json: .object(["friend": FriendText.json(friend)]))
    }
}

struct FriendDecline: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "decline", abstract: "Decline an incoming request (its sender is not told).")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The request's id.") var id: Int64

    func run() async throws {
        try await options.client(try options.openStore()).declineFriendRequest(id)
        options.output.finish(human: "Declined request \(id).", json: .object(["declined": .int(id)]))
    }
}

struct FriendCancel: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "cancel", abstract: "Cancel a request you sent.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The request's id.") var id: Int64

    func run() async throws {
        try await options.client(try options.openStore()).cancelFriendRequest(id)
        options.output.finish(human: "Cancelled request \(id).", json: .object(["cancelled": .int(id)]))
    }
}

struct FriendRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "End a friendship: neither of you sees the other's month.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The friend's id (from `friends`).") var id: Int64

    func run() async throws {
        try await options.client(try options.openStore()).removeFriend(id)
        options.output.finish(human: "Removed friend \(id).", json: .object(["removed": .int(id)]))
    }
}

struct FriendMonthCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "month", abstract: "A friend's month: their todos day by day and each day's stat.",
        discussion: """
            One block per day that has todos: the day's stat (done of all, productivity, the \
            work/life balance) and its todos ([x] done, ! important, the tag, @life, the \
            estimate, *difficulty). --json: {"friendId", "month", "days": [{"date", "todos", "stat"}]}.
            With --watch it stays open (until Ctrl-C) as a live view: the month again each time \
            it changes (the live stream with friends events; with --json one document per line, \
            and {"error": …} lines when a refresh fails, e.g. not_found once unfriended). It also \
            syncs this store on pokes meanwhile, as `watch` does.
            """)
    @OptionGroup var options: StoreOptions
    @Argument(help: "The friend's id (from `friends`).") var id: Int64
    @Option(help: "The month, YYYY-MM (default: this month).") var month: String?
    @Flag(help: "Keep showing the month as it changes, until Ctrl-C.") var watch = false

    func run() async throws {
        let month = try month.map { text in
            guard let month = CalendarMonth(text) else { throw ValidationError("not a month (YYYY-MM): \(text)") }
            return month
        } ?? CalendarMonth(today())
        let client = try options.client(try options.openStore())
        guard watch else {
            show(try await client.friendMonth(id, month: month))
            return
        }
        // The view needs the engine's live stream; the engine also syncs this store as `watch`
        // does (at once, on pokes), with its periodic pull out of the way.
        let engine = SyncEngine(client: client, settings: SyncEngine.Settings(interval: 365 * 86400))
        let view = engine.friendMonthView(friendID: id, month: month)
        // Stopping the engine ends the view's events (and so the loop below) without reopening
        // the stream first, as stopping the view would.
        let signals = StopSignals { Task { await engine.stop() } }
        defer { signals.cancel() }
        await engine.start()
        Task { await view.start() }
        for await state in view.states {
            switch state {
            case .loading: continue
            case .loaded(let value): show(value)
            case .failed(let error, _):
                let failure = ClientFailure(error, parser: TodoSyncClientCommand.self) ?? ClientFailure(.error, "\(error)")
                if options.json { print(JSONText.encode(failure.json)) } else { print("error: \(failure.message)") }
            }
            fflush(nil)
        }
        await engine.stop()
    }

    private func show(_ value: FriendMonth) {
        if watch { options.output.say("— \(WatchPrinter.seconds.string(from: Date()))") }
        if value.busyDays.isEmpty { options.output.say("Nothing due in \(value.month) for friend \(id).") }
        for entry in value.busyDays {
            options.output.say(FriendText.dayLine(entry))
            for todo in entry.todos { options.output.say("    " + FriendText.todoLine(todo)) }
        }
        options.output.finish(json: FriendText.json(value))
    }
}

struct Nickname: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show or set the nickname your friends see (1-40 characters), or clear it.")
    @OptionGroup var options: StoreOptions
    @Argument(help: "The new nickname (none: show the account).") var name: String?
    @Flag(help: "Remove the nickname.") var clear = false

    func validate() throws {
        if clear && name != nil { throw ValidationError("give a NAME or --clear, not both") }
    }

    func run() async throws {
        let client = try options.client(try options.openStore())
        let account = if clear || name != nil { try await client.setNickname(clear ? nil : name) } else { try await client.account() }
        let shown = account.nickname.map { "Nickname: \($0)" } ?? "No nickname (friends see \(account.email))."
        options.output.finish(human: shown, json: .object([
            "id": .int(account.id), "email": .string(account.email), "nickname": .optionalString(account.nickname),
            "createdAt": .string(account.createdAt),
        ]))
    }
}

/// How the friends commands write people, todos and days.
enum FriendText {
    static func person(_ person: Person) -> String {
        person.nickname.map { "\($0) <\(person.email)>" } ?? person.email
    }

    static func json(_ person: Person) -> JSONValue {
        .object(["id": .int(person.id), "email": .string(person.email), "nickname": .optionalString(person.nickname)])
    }

    static func json(_ friend: Friend) -> JSONValue {
        .object(["id": .int(friend.id), "email": .string(friend.person.email), "nickname": .optionalString(friend.person.nickname),
                 "since": .string(friend.since)])
    }

    static func json(_ month: FriendMonth) -> JSONValue {
        .object([
            "friendId": .int(month.friendID), "month": .string(month.month.description),
            "days": .array(month.busyDays.map { entry in
                .object([
                    "date": .string(entry.day.description),
                    "todos": .array(entry.todos.map(json)),
                    "stat": entry.stat.flatMap { try? JSONParser.parse(Array($0.json.utf8)) } ?? .null,
                ])
            }),
        ])
    }

    static func json(_ todo: FriendTodo) -> JSONValue {
        .object([
            "id": .int(todo.id), "title": .string(todo.title), "deadline": .string(todo.deadline.description),
            "isCompleted": .bool(todo.isCompleted), "isImportant": .bool(todo.isImportant), "isLife": .bool(todo.isLife),
            "difficulty": .int(todo.difficulty), "estimatedTime": .int(todo.estimatedTime),
            "tag": todo.tag.map { .object(["name": .string($0.name), "color": .string($0.color)]) } ?? .null,
        ])
    }

    /// `2026-11-24 Tue  ◆ 2/3 done  productivity 1.5  Balanced (50)`
    static func dayLine(_ entry: FriendMonth.DayEntry) -> String {
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][((entry.day.daysSinceEpoch % 7) + 7) % 7]
        guard let stat = entry.stat else { return "\(entry.day) \(weekday)" }
        let diamond = stat.completedCount == stat.todoCount ? "◆" : (stat.completedCount == 0 ? "◇" : "◈")
        return "\(entry.day) \(weekday)  \(diamond) \(stat.completedCount)/\(stat.todoCount) done  "
            + "productivity \(number(stat.productivityNum))  \(stat.balanceTitle) (\(stat.balanceNum))"
    }

    /// `[x] ! Write report  #Work  @life  1h30m  *3`
    static func todoLine(_ todo: FriendTodo) -> String {
        var parts = [(todo.isCompleted ? "[x]" : "[ ]") + (todo.isImportant ? " !" : "  ") + " " + todo.title]
        if let tag = todo.tag { parts.append("#" + tag.name) }
        if todo.isLife { parts.append("@life") }
        if todo.estimatedTime > 0 {
            let (hours, minutes) = (todo.estimatedTime / 60, todo.estimatedTime % 60)
            parts.append((hours > 0 ? "\(hours)h" : "") + (minutes > 0 || hours == 0 ? "\(minutes)m" : ""))
        }
        if todo.difficulty > 0 { parts.append("*\(todo.difficulty)") }
        return parts.joined(separator: "  ")
    }

    static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int64(value)) : String(format: "%.2f", value)
    }
}

extension ClientFailure {
    /// A refusal of a friends or account route: exit 1 with the contract's code (and, for 429,
    /// `retryAfter` in the --json error).
    init(friends error: FriendsError) {
        switch error {
        case .invalid(_, let details):
            self.init(.error, code: error.code, "\(error)", details: details)
        case .rateLimited(let after):
            self.init(.error, code: error.code, "\(error)", extra: after.map { ["retryAfter": .int(Int64($0.rounded(.up)))] } ?? [:])
        default:
            self.init(.error, code: error.code, "\(error)")
        }
    }
}
