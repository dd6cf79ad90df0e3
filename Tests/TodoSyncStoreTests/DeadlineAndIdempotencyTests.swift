import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore
import TodoSyncTestHooks

/// `RequestDeadline` (nginx's `$msec`), the store's deadline checks in `Store.write`, and the
/// `Idempotency-Key` records, against the real schema.
final class DeadlineAndIdempotencyTests: StoreTestCase {
    private let day = Day("2026-04-01")!

    private func todoCount() throws -> Int64 {
        try db.queryOne("SELECT COUNT(*) FROM todos WHERE user_id = ?", [.int(userID)])!.int64(0)!
    }

    func testNoWriteStartsPastTheDeadline() throws {
        store.deadline = RequestDeadline(millisecondsSinceEpoch: Timestamp.now().millisecondsSinceEpoch - 1)
        XCTAssertThrowsError(try store.createTodo(userID: userID, TodoDraft(title: "late", deadline: day))) {
            XCTAssertEqual($0 as? DomainError, .unavailable)
        }
        XCTAssertEqual(try todoCount(), 0)
    }

    func testAWriteThatRunsPastItsDeadlineIsRolledBack() throws {
        store.deadline = RequestDeadline(millisecondsSinceEpoch: Timestamp.now().millisecondsSinceEpoch + 100)
        XCTAssertThrowsError(try store.createTodoHoldingLock(
            userID: userID, TodoDraft(title: "slow", deadline: day), holdMilliseconds: 300)) {
            XCTAssertEqual($0 as? DomainError, .unavailable)
        }
        XCTAssertEqual(try todoCount(), 0)
        store.deadline = RequestDeadline(start: nil, budgetMilliseconds: 20_000)
        _ = try store.createTodo(userID: userID, TodoDraft(title: "in time", deadline: day))
        XCTAssertEqual(try todoCount(), 1)
    }

    func testKeyIsClaimedCompletedReplayedAndReusedOnlyForTheSameRequest() throws {
        let key = "key-\(UUID().uuidString)"
        let print = Store.idempotencyFingerprint(method: "POST", path: "/api/v1/todos", body: Array("{}".utf8))
        guard case .claimed(let ticket) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("a new key is claimed")
        }
        let answer = StoredResponse(status: 201, headers: [("ETag", "\"7\"")], body: Array("{\"id\":1}".utf8))
        _ = try store.runIdempotent(ticket, {
            try store.createTodo(userID: userID, TodoDraft(title: "once", deadline: day))
        }, answer: { _ in answer })
        guard case .completed(let stored) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("a completed key replays")
        }
        XCTAssertEqual(stored, answer)
        let other = Store.idempotencyFingerprint(method: "POST", path: "/api/v1/todos", body: Array("{ }".utf8))
        guard case .reused = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: other) else {
            return XCTFail("another request with the key is reused")
        }
        XCTAssertEqual(try todoCount(), 1)
    }

    /// A running request holds its user's row lock for its whole transaction: while it does, a
    /// repeat is 409 with `Retry-After: 1`; once its responder is gone (the database rolled its
    /// transaction back, the lock is free) a repeat takes the key over at once instead of waiting
    /// out the request budget (issue 19: ~30 s of 409s after a responder crash), and the first,
    /// were it still alive, could no longer store its answer: exactly one of the two commits.
    func testARunningKeyIsInProgressAndOneWhoseRequestIsGoneIsTakenOverAtOnce() throws {
        let key = "key-\(UUID().uuidString)"
        let print = Store.idempotencyFingerprint(method: "POST", path: "/api/v1/todos", body: Array("{}".utf8))
        guard case .claimed(let first) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("a new key is claimed")
        }
        let running = Connection(configuration: try StoreTestDatabase.configuration())
        defer { running.close() }
        try running.inTransaction {
            _ = try running.queryOne("SELECT id FROM users WHERE id = ? FOR UPDATE", [.int(userID)])
            guard case .inProgress(let retryAfter) = try store.claimIdempotencyKey(
                userID: userID, key: key, fingerprint: print) else {
                return XCTFail("a key whose request runs is in progress")
            }
            XCTAssertEqual(retryAfter, 1)
        }
        let started = Date()
        guard case .claimed(let second) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("a key whose request is gone is taken over")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        let answer = StoredResponse(status: 201, headers: [], body: Array("{}".utf8))
        XCTAssertThrowsError(try store.runIdempotent(first, {
            try store.createTodo(userID: userID, TodoDraft(title: "first", deadline: day))
        }, answer: { _ in answer })) { XCTAssertEqual($0 as? DomainError, .unavailable) }
        _ = try store.runIdempotent(second, {
            try store.createTodo(userID: userID, TodoDraft(title: "second", deadline: day))
        }, answer: { _ in answer })
        XCTAssertEqual(try todoCount(), 1)
        guard case .completed(let stored) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("the second's answer replays")
        }
        XCTAssertEqual(stored, answer)
    }

    func testAFailedRunStoresNothingAndFreesTheKey() throws {
        let key = "key-\(UUID().uuidString)"
        let print = Store.idempotencyFingerprint(method: "POST", path: "/x", body: [])
        guard case .claimed(let ticket) = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("claimed")
        }
        XCTAssertThrowsError(try store.runIdempotent(ticket, { () throws -> Int in
            _ = try store.createTodo(userID: userID, TodoDraft(title: "undone", deadline: day))
            throw DomainError.validation(field: "title", "fails after the write")
        }, answer: { _ in nil }))
        store.releaseIdempotencyKey(ticket)
        XCTAssertEqual(try todoCount(), 0, "the write inside rolls back with the request")
        guard case .claimed = try store.claimIdempotencyKey(userID: userID, key: key, fingerprint: print) else {
            return XCTFail("the key is free again")
        }
    }
}
