import TodoSyncCore
import TodoSyncStore

extension Application {
    /// The contract's Friends section (docs/FRIENDS.md): the nickname, requests by email,
    /// friendships and a friend's month.
    func registerFriendRoutes() {
        router.add("GET", "/api/v1/account") { context in
            let userID = try context.requireUser()
            let profile = try context.store.accountProfile(userID: userID)
            return .json(200, Self.body(profile.write))
        }
        router.add("PATCH", "/api/v1/account") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let input = try NicknameInput.parse(&reader)
            let (profile, change) = try context.store.setNickname(userID: userID, input)
            context.friendListChange = change
            return .json(200, Self.body(profile.write))
        }
        router.add("POST", "/api/v1/friends/requests") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let input = try FriendRequestInput.parse(&reader)
            context.friendListChange = try context.store.sendFriendRequest(userID: userID, input)
            return .json(202, Array("{}".utf8))
        }
        router.add("GET", "/api/v1/friends/requests") { context in
            let userID = try context.requireUser()
            return .json(200, Self.body(try context.store.friendRequests(userID: userID).write))
        }
        router.add("POST", "/api/v1/friends/requests/:id/accept", takesBody: false) { context in
            let userID = try context.requireUser()
            let (friend, change) = try context.store.acceptFriendRequest(userID: userID, requestID: try context.id())
            context.friendListChange = change
            return .json(200, Self.body(friend.write))
        }
        router.add("POST", "/api/v1/friends/requests/:id/decline", takesBody: false) { context in
            let userID = try context.requireUser()
            context.friendListChange = try context.store.declineFriendRequest(userID: userID, requestID: try context.id())
            return .noContent
        }
        router.add("DELETE", "/api/v1/friends/requests/:id") { context in
            let userID = try context.requireUser()
            context.friendListChange = try context.store.cancelFriendRequest(userID: userID, requestID: try context.id())
            return .noContent
        }
        router.add("GET", "/api/v1/friends") { context in
            let userID = try context.requireUser()
            let friends = try context.store.friends(userID: userID)
            return .json(200, itemsBody(friends) { $0.write(to: &$1) })
        }
        router.add("DELETE", "/api/v1/friends/:id") { context in
            let userID = try context.requireUser()
            context.friendListChange = try context.store.unfriend(userID: userID, friendID: try context.id())
            return .noContent
        }
        router.add("GET", "/api/v1/friends/:id/todos") { context in
            let (from, to) = try MonthQuery.parse(context.request.query["month"]) // checked first (contract)
            let userID = try context.requireUser()
            let items = try context.store.friendTodoList(userID: userID, friendID: try context.id(), from: from, to: to)
            return .json(200, member: "items", items)
        }
        router.add("GET", "/api/v1/friends/:id/daily-stats") { context in
            let (from, to) = try MonthQuery.parse(context.request.query["month"]) // checked first (contract)
            let userID = try context.requireUser()
            let items = try context.store.friendDailyStatList(userID: userID, friendID: try context.id(),
                                                              from: from, to: to)
            return .json(200, member: "items", items)
        }
    }

    private static func body(_ write: (inout JSONWriter) -> Void) -> [UInt8] {
        var writer = JSONWriter(reservingCapacity: 512)
        write(&writer)
        return writer.bytes
    }
}
