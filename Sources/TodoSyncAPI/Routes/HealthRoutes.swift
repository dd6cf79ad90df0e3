import TodoSyncCore

extension Application {
    /// `GET /healthz`; with test hooks (`ApplicationOptions.testHooks`, the `todosync-test` build
    /// only) the hooks register it with their parameters, and the test and benchmark routes.
    func registerHealthRoutes() {
        let health: RouteHandler = { context in
            try context.store.ping()
            return .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
        guard let hooks = options.testHooks else { return router.add("GET", "/healthz", limit: .notCounted, health) }
        hooks.registerRoutes(on: self, health: health)
    }
}
