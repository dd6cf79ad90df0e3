import TodoSyncCore
import TodoSyncStore

extension Application {
    /// The contract's Account section: what a signed-in user controls of their own account.
    func registerAccountRoutes() {
        router.add("POST", "/api/v1/account/password") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let input = try PasswordChangeInput.parse(&reader)
            try context.store.changePassword(userID: userID, token: context.bearerToken()!, input)
            context.closesLiveStreams = true
            return .noContent
        }
        router.add("GET", "/api/v1/account/sessions") { context in
            let userID = try context.requireUser()
            let sessions = try context.store.sessions(userID: userID, token: context.bearerToken()!)
            return .json(200, itemsBody(sessions) { $0.write(to: &$1) })
        }
        router.add("DELETE", "/api/v1/account/sessions/:id", limit: .takesTheAccountBack) { context in
            let userID = try context.requireUser()
            try context.store.revokeSession(userID: userID, id: context.pathParameters[0])
            context.closesLiveStreams = true
            return .noContent
        }
        router.add("GET", "/api/v1/account/export") { context in
            let userID = try context.requireUser()
            let store = context.store
            // Streamed: a million records never sit in the responder's memory at once.
            return .json(200, stream: ResponseStream { write in
                try store.exportAccount(userID: userID, write: write) ? .complete : .cutOff
            })
        }
        router.add("POST", "/api/v1/account/delete", limit: .takesTheAccountBack) { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let input = try AccountDeleteInput.parse(&reader)
            let told = try context.store.deleteAccount(userID: userID, token: context.bearerToken()!, input)
            // Its friends, and the recipients of its requests, see their lists change (FRIENDS.md).
            context.friendListChange = FriendListChange(users: told)
            context.closesLiveStreams = true
            return .noContent
        }
    }
}
