import TodoSyncCore

extension Application {
    /// Test hook, registered only with test hooks on (`--enable-test-hooks`):
    /// `POST /api/v1/__test/slow-todo?hold_ms=N` creates a todo like `POST /todos` but holds the
    /// user's row lock for N ms (1–120000) before committing.
    func registerSlowWriteTestRoute() {
        router.add("POST", "/api/v1/__test/slow-todo") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let draft = try TodoDraft.parse(&reader)
            guard let hold = context.request.query["hold_ms"].flatMap(Int.init), (1...120_000).contains(hold) else {
                throw APIError.badRequest("`hold_ms` must be 1 to 120000.")
            }
            let created = try context.store.createTodoHoldingLock(userID: userID, draft, holdMilliseconds: hold)
            return .record(created.isNew ? 201 : 200, version: created.record.version, write: created.record.write)
        }
    }
}
