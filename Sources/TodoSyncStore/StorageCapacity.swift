import TodoSyncCore

/// What the columns that keep renderings hold (issue 34, item 3), stated once and held to the real
/// schema by `StorageCapacityTests` (information_schema), which also holds each to the largest
/// valid record (`Todo.maximumRenderedBytes`): a field added or a limit raised fails that test
/// until the columns grow.
enum StorageCapacity {
    /// A MEDIUMBLOB's (or MEDIUMTEXT's) bytes.
    static let mediumBlob = 16_777_215

    /// The columns that keep one todo's JSON whole: the todo list's row (Sql/008, MEDIUMBLOB since
    /// Sql/028), the change feed's row (Sql/007) and a stored push result's record (Sql/019).
    static let todoRenderingColumns: [(table: String, column: String)] = [
        ("todo_list", "body"), ("sync_feed", "body"), ("sync_result_records", "record"),
    ]

    /// The least of their capacities: a todo rendered longer could not be written.
    static let todoRendering = mediumBlob

    /// The columns whose capacity `StorageCapacityTests` also checks: a stored push result (its
    /// record left out, Sql/019: what remains are its op's strings, none rendered longer than it
    /// was sent, in a request of at most 1 MiB, and fixed members), a date's stored list (at most `Connection.groupConcatMaxLength`,
    /// else not stored) and its compressed response, and a stored Idempotency-Key answer (at most
    /// `Store.maximumStoredAnswerBytes`).
    static let otherColumns: [(table: String, column: String, holds: Int)] = [
        ("sync_operations", "result", 2 << 20),
        ("todo_days", "body", SQL.TodoDays.maxBodyBytes),
        ("todo_days", "compressed", SQL.TodoDays.maxBodyBytes + 1_024),
        ("idempotency_keys", "response_body", Store.maximumStoredAnswerBytes),
        ("daily_stats", "tag_stats", DailyStatContent.maximumTagStatsBytes(tags: tagsPerDate)),
        ("daily_stats", "tag_counts", DailyStatContent.maximumTagCountsBytes(tags: tagsPerDate)),
    ]

    /// The tags one date's stat is sure to hold, at their widest (names of 50 escaped control
    /// characters): the contract sets no limit on tags, so this is a chosen figure, not a derived
    /// one. A TEXT column held 177 (Sql/028 made them MEDIUMTEXT); a stat's row in the change
    /// feed (MEDIUMBLOB) outgrows its column past about 43,000.
    static let tagsPerDate = 10_000
}

extension Store {
    /// Refuses a todo whose JSON would not fit the columns that keep it (a validation problem of
    /// the write that makes it, so a push rejects that operation alone instead of failing the
    /// batch on every retry). With the schema's capacities no valid todo is refused (checked by
    /// `StorageCapacityTests`); `StoreConfiguration.todoRenderingCapacity` lowers the capacity for
    /// tests. Costs nothing for a todo whose bound (`renderedBytesBound`) fits.
    func requireStorable(_ todo: Todo) throws {
        let capacity = configuration.todoRenderingCapacity
        guard todo.renderedBytesBound > capacity else { return }
        var writer = JSONWriter(reservingCapacity: 80_000)
        todo.write(to: &writer)
        // A new todo has no id yet: its id may take up to 19 digits.
        let rendered = writer.bytes.count + (todo.id > 0 ? 0 : 19)
        guard rendered > capacity else { return }
        // The longest text field is named (the first of equals, in `TodoField` order).
        let fields: [(String, Int)] = TodoField.allCases.filter { $0.kind == .text }.map { field in
            guard case .string(let text) = field.value(of: todo) else { return (field.key, 0) }
            return (field.key, text.utf8.count)
        }
        let field = fields.max { $0.1 < $1.1 }!.0
        throw DomainError.validation(
            field: field, "makes the todo \(rendered) bytes long once rendered, more than the \(capacity) bytes it can be stored in")
    }
}
