import TodoSyncCore

extension Application {
    func registerAuthRoutes() {
        router.add("POST", "/api/v1/auth/register", limit: .notCounted) { context in
            var reader = try context.bodyReader()
            let input = try CredentialsInput.parseForRegister(&reader)
            return .json(201, try context.store.register(input, client: context.request.clientAddress).jsonBody)
        }
        router.add("POST", "/api/v1/auth/login", limit: .notCounted) { context in
            var reader = try context.bodyReader()
            let input = try CredentialsInput.parseForLogin(&reader)
            return .json(200, try context.store.login(input, client: context.request.clientAddress).jsonBody)
        }
        router.add("POST", "/api/v1/auth/logout", limit: .takesTheAccountBack, takesBody: false) { context in
            _ = try context.requireUser()
            try context.store.logout(token: context.bearerToken()!)
            // The token's live stream ends with it: the account's streams are closed (nchan keeps
            // one channel per account), and the other devices' reconnect, authorized anew.
            context.closesLiveStreams = true
            return .noContent
        }
    }
}
