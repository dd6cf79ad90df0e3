#if canImport(Glibc)
import Glibc
#endif
import TodoSyncCore

extension Store {
    /// Test hook (its route exists only with test hooks on): creates a todo like
    /// `createTodo(userID:_:)`, but keeps the transaction open, holding the user's row lock, for
    /// `holdMilliseconds` before it commits: a slow write, for the deadline and 504 tests.
    public func createTodoHoldingLock(userID: Int64, _ draft: TodoDraft, holdMilliseconds: Int) throws -> Created<Todo> {
        try write(userID: userID, operations: 1) { transaction in
            let created = try createTodo(draft, in: transaction)
            usleep(useconds_t(holdMilliseconds * 1000))
            return created
        }
    }
}
