import TodoSyncCore

extension Application {
    func registerSyncRoutes() {
        router.add("GET", "/api/v1/sync/pull") { context in
            let userID = try context.requireUser()
            let query = context.request.query
            var limit = 500
            if let text = query["limit"] {
                guard let value = Int(text), (1...1000).contains(value) else {
                    throw APIError.badRequest("`limit` must be an integer from 1 to 1000.")
                }
                limit = value
            }
            var cursor: SyncCursor?
            if let text = query["cursor"], !text.isEmpty {
                guard let decoded = SyncCursor(encoded: text, userID: userID) else {
                    throw APIError.badRequest("`cursor` is not a cursor this server issued to you.")
                }
                cursor = decoded
            }
            var deviceID: String?
            if let text = query["deviceId"] {
                // The same rule as push's `deviceId`: 1–100 characters (Unicode scalars).
                guard (1...100).contains(text.unicodeScalars.count) else {
                    throw APIError.badRequest("`deviceId` must be 1–100 characters long.")
                }
                deviceID = text
            }
            let page = try context.store.pull(userID: userID, cursor: cursor, limit: limit, deviceID: deviceID)
            return .json(200, page.jsonBody)
        }
        router.add("POST", "/api/v1/sync/push") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let request = try PushRequest.parse(&reader)
            return .json(200, member: "results", try context.store.push(userID: userID, request))
        }
    }
}
