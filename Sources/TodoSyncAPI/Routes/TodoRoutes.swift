import TodoSyncCore

extension Application {
    func registerTodoRoutes() {
        router.add("GET", "/api/v1/todos") { context in
            let owner = try context.authenticationInRead()
            let (from, to) = try context.parseBeforeAuthentication { try DateRangeQuery.parse(context.request.query) }
            return context.items(try context.store.todoList(owner, from: from, to: to, gzip: context.acceptsGzip))
        }
        router.add("POST", "/api/v1/todos") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let draft = try TodoDraft.parse(&reader)
            let created = try context.store.createTodo(userID: userID, draft)
            return .record(created.isNew ? 201 : 200, version: created.record.version, write: created.record.write)
        }
        router.add("POST", "/api/v1/todos/quick-add") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let text = reader.string("text", required: true, length: 0...200_000)
            let date = reader.day("date", required: true)
            try reader.finish()
            let todos = try context.store.quickAdd(userID: userID, text: text!, deadline: date!)
            return .json(201, itemsBody(todos) { $0.write(to: &$1) })
        }
        router.add("GET", "/api/v1/todos/:id") { context in
            let userID = try context.requireUser()
            guard let todo = try context.store.todo(userID: userID, id: try context.id()) else { throw DomainError.notFound }
            return .record(200, version: todo.version, write: todo.write)
        }
        router.add("PATCH", "/api/v1/todos/:id") { context in
            let userID = try context.requireUser()
            let id = try context.id()
            var reader = try context.bodyReader()
            let patch = try TodoPatch.parse(&reader)
            let todo = try context.store.updateTodo(userID: userID, id: id, patch, ifMatch: context.ifMatch)
            return .record(200, version: todo.version, write: todo.write)
        }
        router.add("DELETE", "/api/v1/todos/:id") { context in
            let userID = try context.requireUser()
            try context.store.deleteTodo(userID: userID, id: try context.id(), ifMatch: context.ifMatch)
            return .noContent
        }
    }
}

/// The `date` / `from`+`to` query of `GET /todos`.
enum DateRangeQuery {
    /// The longest allowed `to − from`, in days.
    static let maximumSpanDays = 365

    static func parse(_ query: [String: String]) throws -> (Day, Day) {
        let date = query["date"], from = query["from"], to = query["to"]
        if let date {
            guard from == nil, to == nil else { throw APIError.badRequest("Give either `date` or `from` and `to`, not both.") }
            let day = try parseDay(date, name: "date")
            return (day, day)
        }
        guard let from, let to else { throw APIError.badRequest("Give `date`, or both `from` and `to`.") }
        let start = try parseDay(from, name: "from")
        let end = try parseDay(to, name: "to")
        guard start <= end else { throw APIError.badRequest("`from` must not be after `to`.") }
        guard end.daysSinceEpoch - start.daysSinceEpoch <= maximumSpanDays else {
            throw APIError.badRequest("`to` − `from` must be at most \(maximumSpanDays) days.")
        }
        return (start, end)
    }

    private static func parseDay(_ text: String, name: String) throws -> Day {
        guard let day = Day(text) else {
            throw APIError.badRequest("`\(name)` must be a real date YYYY-MM-DD between 2000-01-01 and 2999-12-31.")
        }
        return day
    }
}
