import Credentials
import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// `GET /todos` (rendered todos from `todo_list`) and the row-to-JSON fast path `DailyStatRowJSON`
/// for `GET /daily-stats` must write exactly the bytes of the record path (`Todo(row:)` then
/// `Todo.write(to:)`, likewise for stats), for every kind of value the records hold. Runs against
/// the real schema (migrations from `Sql/`) and the real write path.
final class RowJSONTests: StoreTestCase {
    private var token = ""
    private let day = Day("2026-03-14")!
    private let emptyDay = Day("2026-03-15")!

    override func setUpWithError() throws {
        try super.setUpWithError()
        token = try addToken(expiresInSeconds: 3600)
    }

    /// A new bearer token of the test user.
    private func addToken(expiresInSeconds seconds: Int) throws -> String {
        let token = "token-\(UUID().uuidString)"
        try db.execute(
            "INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?, ?, NOW(3), NOW(3) + INTERVAL ? SECOND)",
            [.blob(BearerToken.hash(token)), .int(userID), .int(Int64(seconds))])
        return token
    }

    /// Todos covering every column shape: NULL and non-NULL clientId and tagId, escapes and
    /// control characters, emoji and Hangul, a `raw` of 2,100 bytes, longer than the 1,024-byte bind buffer (the truncated
    /// fetch path), extreme integers, and tombstones.
    private func seedTodos() throws -> [Int64] {
        let tag = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Work 🧰", color: "#A1B2C3")).record
        let drafts = [
            TodoDraft(title: "plain", deadline: day),
            TodoDraft(clientID: UUID().uuidString.lowercased(), title: #"quote " backslash \ slash /"#,
                      raw: "tab\tnewline\nreturn\r bell\u{07} nul-ish\u{01} del\u{7F}", isImportant: true,
                      isLife: true, tagID: tag.id, difficulty: 5, estimatedTime: 1440, deadline: day,
                      isCompleted: true),
            TodoDraft(title: "이모지 😀 and RTL \u{202E}abc", raw: String(repeating: "long ✓ text ", count: 150),
                      deadline: day),
            TodoDraft(clientID: UUID().uuidString.lowercased(), title: "to delete", tagID: tag.id, deadline: day),
        ]
        var ids: [Int64] = []
        for draft in drafts { ids.append(try store.createTodo(userID: userID, draft).record.id) }
        try store.deleteTodo(userID: userID, id: ids[3], ifMatch: nil)
        return ids
    }

    func testListBodyIsTheContractShapeInOrder() throws {
        let ids = try seedTodos()
        let list = try store.todoList(.token(token), from: day, to: day)
        let body = list.json
        XCTAssertEqual(list.userID, userID, "the token's owner, for the request log")
        XCTAssertEqual(try store.todoList(.user(userID), from: day, to: day).json, body, "by user id or by token: the same list")
        guard case .array(let items) = try JSONParser.parse(body)
        else { return XCTFail("not a JSON array: \(String(decoding: body, as: UTF8.self))") }
        // The tombstone is not listed; important first, then newest first (all created in one
        // millisecond at most, so ties fall to title, then id).
        let listed = items.compactMap { item -> Int64? in
            guard case .object(let fields) = item, case .number(let id)? = fields["id"] else { return nil }
            return id.int64
        }
        XCTAssertEqual(Set(listed), Set(ids[0..<3]))
        XCTAssertEqual(listed.first, ids[1], "the important todo comes first")

        // The list's rows are rendered at write time by the record writer, in the contract's order.
        let reference = try db.query(SQL.Feed.todosOfUser, [.int(userID)]).map(Todo.init(row:))
            .filter { $0.deletedAt == nil && $0.deadline == day }
            .sorted { a, b in
                if a.isImportant != b.isImportant { return a.isImportant }
                if a.createdAt != b.createdAt { return a.createdAt > b.createdAt }
                let (ka, kb) = (TitleOrder.key(a.title), TitleOrder.key(b.title))
                if ka != kb { return ka.lexicographicallyPrecedes(kb) }
                return a.id < b.id
            }
        XCTAssertEqual(itemsBody(body), itemsBody(reference) { $0.write(to: &$1) })
    }

    /// Stats with a tag breakdown, balances in all three bands, fractional and negative centers,
    /// and one emptied day (a stat tombstone).
    func testEveryStatRowEncodesLikeTheRecordPath() throws {
        _ = try seedTodos()
        let days = (0..<4).map { Day(year: 2026, month: 4, day: 1 + $0)! }
        _ = try store.createTodo(userID: userID, TodoDraft(title: "walk", isLife: true, difficulty: 2,
                                                                  estimatedTime: 45, deadline: days[0], isCompleted: true))
        _ = try store.createTodo(userID: userID, TodoDraft(title: "gym", isLife: true, difficulty: 3, estimatedTime: 60,
                                                           deadline: days[0]))
        _ = try store.createTodo(userID: userID, TodoDraft(title: "report", difficulty: 4, estimatedTime: 90,
                                                           deadline: days[1], isCompleted: true))
        _ = try store.createTodo(userID: userID, TodoDraft(title: "mixed a", isLife: true, estimatedTime: 10, deadline: days[2]))
        _ = try store.createTodo(userID: userID, TodoDraft(title: "mixed b", estimatedTime: 20, deadline: days[2],
                                                           isCompleted: true))
        let gone = try store.createTodo(userID: userID, TodoDraft(title: "gone", deadline: days[3])).record
        try store.deleteTodo(userID: userID, id: gone.id, ifMatch: nil)

        var checked = 0, tombstones = 0
        try db.forEachRow(SQL.Feed.dailyStatsOfUser, [.int(userID)]) { row throws(DatabaseError) in
            let values = try (0..<row.count).map { (i: Int) throws(DatabaseError) -> DatabaseValue in try row.value(i) }
            let stat = DailyStat(row: Row(values))
            var expected = JSONWriter()
            stat.write(to: &expected)
            var actual: [UInt8] = []
            try DailyStatRowJSON.appendRecord(row, to: &actual)
            XCTAssertEqual(String(decoding: actual, as: UTF8.self), String(decoding: expected.bytes, as: UTF8.self))
            checked += 1
            if stat.deletedAt != nil { tombstones += 1 }
        }
        XCTAssertEqual(checked, 5, "the seeded day and four April days")
        XCTAssertEqual(tombstones, 1)

        let list = try store.dailyStatList(.token(token), from: days[0], to: days[3])
        let body = list.json
        XCTAssertEqual(list.userID, userID, "the token's owner, for the request log")
        XCTAssertEqual(try store.dailyStatList(.user(userID), from: days[0], to: days[3]).json, body)
        let reference = try db.query(SQL.DailyStats.liveInRangeForUser, [.int(userID), .day(days[0]), .day(days[3])])
            .map(DailyStat.init(row:))
        XCTAssertEqual(reference.count, 3)
        XCTAssertEqual(String(decoding: itemsBody(body), as: UTF8.self), String(decoding: itemsBody(reference) { $0.write(to: &$1) }, as: UTF8.self))
    }

    func testEmptyListIsAnEmptyArray() throws {
        for owner in [Authentication.token(token), .user(userID)] {
            XCTAssertEqual(String(decoding: try store.todoList(owner, from: day, to: day).json, as: UTF8.self), "[]")
            XCTAssertEqual(String(decoding: try store.dailyStatList(owner, from: day, to: day).json, as: UTF8.self), "[]")
        }
    }

    /// The list reads given a token check it in their own statement: a bad token is `unauthenticated` whether or not
    /// the user has records in the range, and never shows them.
    func testListsRejectUnknownAndExpiredTokens() throws {
        _ = try seedTodos()
        XCTAssertNotEqual(
            String(decoding: try store.dailyStatList(.token(token), from: day, to: day).json, as: UTF8.self), "[]",
            "a stat exists for the day")
        let expired = try addToken(expiresInSeconds: -1)
        for bad in [expired, "no-such-token", ""] {
            for range in [(day, day), (emptyDay, emptyDay)] {
                XCTAssertThrowsError(try store.todoList(.token(bad), from: range.0, to: range.1)) {
                    XCTAssertEqual($0 as? DomainError, .unauthenticated)
                }
                XCTAssertThrowsError(try store.dailyStatList(.token(bad), from: range.0, to: range.1)) {
                    XCTAssertEqual($0 as? DomainError, .unauthenticated)
                }
            }
        }
    }
}

/// The MariaDB server these tests run against (env `TODOSYNC_TEST_DB_SOCKET`; skipped without it),
/// in a database of their own, `<TODOSYNC_TEST_DB_NAME>_store`.
enum StoreTestDatabase {
    static let sqlDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sql")

    static func configuration() throws -> ConnectionConfiguration {
        let environment = ProcessInfo.processInfo.environment
        guard let socket = environment["TODOSYNC_TEST_DB_SOCKET"], !socket.isEmpty else {
            throw XCTSkip("TODOSYNC_TEST_DB_SOCKET is not set: no MariaDB to test against")
        }
        let user = environment["TODOSYNC_TEST_DB_USER"] ?? "root"
        let password = environment["TODOSYNC_TEST_DB_PASSWORD"] ?? ""
        let name = (environment["TODOSYNC_TEST_DB_NAME"] ?? "todosync_test") + "_store"
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else {
            XCTFail("TODOSYNC_TEST_DB_NAME must be [A-Za-z0-9_]+")
            throw XCTSkip("invalid database name")
        }
        let bootstrap = Connection(
            configuration: ConnectionConfiguration(unixSocket: socket, user: user, password: password, database: "mysql"))
        defer { bootstrap.close() }
        try bootstrap.execute("CREATE DATABASE IF NOT EXISTS `\(name)` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci")
        return ConnectionConfiguration(unixSocket: socket, user: user, password: password, database: name)
    }
}

/// `{"items": <array>}`, as the API wraps a list the store rendered.
private func itemsBody(_ array: [UInt8]) -> [UInt8] {
    Array(#"{"items":"#.utf8) + array + Array("}".utf8)
}
