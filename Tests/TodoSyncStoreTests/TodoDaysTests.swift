import Credentials
import Deflate
import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// GET /todos?date= reads each date's list stored as one row (`todo_days`, Sql/025), which a write
/// of a few dates rebuilds and a write of many marks not stored. The answer must stay byte for
/// byte the range read of the list rows (`todo_list`) whatever the history: creates, edits that
/// move a todo between dates, reorder it or change its bytes, deletes and restores, tag deletes
/// that un-tag todos, pushes of more dates than the rebuild limit and than one statement takes,
/// and a date too long for its row.
final class TodoDaysTests: StoreTestCase {
    private var token = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        token = "token-\(UUID().uuidString)"
        try db.execute(
            "INSERT INTO auth_tokens (token_hash, user_id, created_at, expires_at) VALUES (?, ?, NOW(3), NOW(3) + INTERVAL 1 HOUR)",
            [.blob(BearerToken.hash(token)), .int(userID)])
    }

    /// The date's list as the range read of `todo_list` answers it (the reference).
    private func listRowsRead(_ day: Day) throws -> String {
        let bodies = try db.query(SQL.TodoList.bodiesInRangeForUser, [.int(userID), .day(day), .day(day)])
            .map { String(decoding: $0.bytes(0)!, as: UTF8.self) }
        return "[" + bodies.joined(separator: ",") + "]"
    }

    private func dayRead(_ owner: Authentication, _ day: Day) throws -> String {
        String(decoding: try store.todoList(owner, from: day, to: day).json, as: UTF8.self)
    }

    /// The date's row: nil without one, `.some(nil)` when not stored (a NULL body).
    private func storedRow(_ day: Day) throws -> [UInt8]?? {
        guard let row = try db.queryOne("SELECT body FROM todo_days WHERE user_id = ? AND deadline = ?",
                                        [.int(userID), .day(day)]) else { return nil }
        return .some(row.bytes(0))
    }

    private func isStored(_ day: Day) throws -> Bool {
        if case .some(.some) = try storedRow(day) { return true }
        return false
    }

    /// Every date answers its list rows' bytes, by token and by user, and to a client that
    /// accepts gzip a stored list long enough is sent as compressed when written (Sql/026), which
    /// decompresses to the same response; check-feed (which compares every stored date with its
    /// list rows joined, and its compressed response with that) finds nothing. Answers how many
    /// reads were sent compressed.
    @discardableResult
    private func assertEveryDateMatches(_ days: [Day], _ context: String, file: StaticString = #filePath,
                                        line: UInt = #line) throws -> Int {
        var compressed = 0
        for day in days {
            let reference = try listRowsRead(day)
            // What the route answers with the list (`HTTPResponse.json(_:member:_:)`).
            let response = Array(#"{"items":\#(reference)}"#.utf8)
            for (owner, name) in [(Authentication.token(token), "token"), (.user(userID), "user")] {
                XCTAssertEqual(try dayRead(owner, day), reference, "\(context): \(day) by \(name)", file: file, line: line)
                let gzipRead = try store.todoList(owner, from: day, to: day, gzip: true)
                if let member = gzipRead.gzippedItems {
                    compressed += 1
                    XCTAssertEqual(gunzip(member), response, "\(context): \(day) by \(name), gzip", file: file, line: line)
                    XCTAssertGreaterThanOrEqual(response.count, GzipMember.worthwhileLength, file: file, line: line)
                } else {
                    XCTAssertEqual(String(decoding: gzipRead.json, as: UTF8.self), reference,
                                   "\(context): \(day) by \(name), gzip accepted", file: file, line: line)
                    XCTAssertFalse(try isStored(day) && response.count >= GzipMember.worthwhileLength,
                                   "\(context): \(day) is stored but not sent compressed", file: file, line: line)
                }
            }
        }
        XCTAssertEqual(try store.checkFeed(userID: userID).map(\.description), [], context, file: file, line: line)
        return compressed
    }

    private func push(_ operations: [String]) throws {
        let json = #"{"deviceId": "phone", "operations": ["# + operations.joined(separator: ",") + "]}"
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        _ = try store.push(userID: userID, try PushRequest.parse(&reader))
    }

    /// A seeded random history over six dates through REST and push, checked after every step.
    func testEveryDateAnswersItsListRowsAfterARandomHistory() throws {
        var random = SplitMix(seed: 25)
        let days = (0..<6).map { Day(year: 2026, month: 7, day: 1 + $0)! }
        let tags = try (0..<2).map { index in
            try store.createTag(userID: userID, TagDraft(clientID: nil, name: "tag \(index)", color: "#10203\(index)")).record
        }
        // Titles that sort differently by code point than by collation, and equal title keys.
        let titles = ["apfel", "Äpfel", "Apfel", "zebra", "éclair", "b", "B", "Ω"]
        var live: [Int64] = [], deleted: [Int64] = []
        var sentCompressed = 0
        for step in 0..<120 {
            let roll = random.next(100)
            if live.isEmpty || roll < 35 {
                let todo = try store.createTodo(userID: userID, TodoDraft(
                    title: titles[random.next(titles.count)], isImportant: random.next(4) == 0,
                    tagID: random.next(3) == 0 ? tags[random.next(2)].id : nil, deadline: days[random.next(days.count)])).record
                live.append(todo.id)
            } else if roll < 70 {
                let id = live[random.next(live.count)]
                let patch: TodoPatch = switch random.next(4) {
                case 0: TodoPatch(deadline: days[random.next(days.count)])
                case 1: TodoPatch(title: titles[random.next(titles.count)])
                case 2: TodoPatch(isImportant: random.next(2) == 0)
                default: TodoPatch(notes: .some("notes \(step)\nline two"))
                }
                _ = try store.updateTodo(userID: userID, id: id, patch, ifMatch: nil)
            } else if roll < 82 {
                let id = live.remove(at: random.next(live.count))
                try store.deleteTodo(userID: userID, id: id, ifMatch: nil)
                deleted.append(id)
            } else if roll < 90, !deleted.isEmpty {
                // A push's update of a tombstone restores it (on whatever date the push names).
                let id = deleted.remove(at: random.next(deleted.count))
                try push([#"{"opId": "restore-\#(step)", "entity": "todo", "action": "update", "id": \#(id), "data": {"deadline": "\#(days[random.next(days.count)])", "isCompleted": true}}"#])
                if try db.queryOne("SELECT deleted_at IS NULL FROM todos WHERE id = ?", [.int(id)])?.bool(0) == true {
                    live.append(id)
                } else {
                    deleted.append(id)
                }
            } else {
                // One push moving two todos between dates and creating one.
                let a = live[random.next(live.count)], b = live[random.next(live.count)]
                try push([
                    #"{"opId": "a-\#(step)", "entity": "todo", "action": "update", "id": \#(a), "data": {"deadline": "\#(days[random.next(days.count)])"}}"#,
                    #"{"opId": "b-\#(step)", "entity": "todo", "action": "update", "id": \#(b), "data": {"title": "pushed \#(step)", "isImportant": true}}"#,
                    #"{"opId": "c-\#(step)", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "new \#(step)", "deadline": "\#(days[random.next(days.count)])"}}"#,
                ])
                live.append(try db.queryOne("SELECT MAX(id) FROM todos WHERE user_id = ?", [.int(userID)])!.int64(0)!)
            }
            if step % 10 == 9 { sentCompressed += try assertEveryDateMatches(days, "after step \(step)") }
        }
        XCTAssertGreaterThan(sentCompressed, 20, "lists long enough are sent as compressed when written")
        // Every write above touched at most 3 dates, within the rebuild limit: every date with
        // todos is stored whole.
        for day in days where try listRowsRead(day) != "[]" {
            XCTAssertTrue(try isStored(day), "\(day) is stored")
        }
        // A tag delete un-tags its todos: their bytes change on every date they are on.
        try store.deleteTag(userID: userID, id: tags[0].id, ifMatch: nil)
        try assertEveryDateMatches(days, "after the tag delete")
        // Every todo of one date deleted: the date has no row and answers [].
        for id in try db.query("SELECT id FROM todos WHERE user_id = ? AND deadline = ? AND deleted_at IS NULL",
                               [.int(userID), .day(days[0])]).map({ $0.int64(0)! }) {
            try store.deleteTodo(userID: userID, id: id, ifMatch: nil)
        }
        XCTAssertEqual(try dayRead(.token(token), days[0]), "[]")
        XCTAssertNil(try storedRow(days[0]), "an emptied date has no row")
        try assertEveryDateMatches(days, "after emptying a date")
    }

    /// A write of more dates than `SQL.TodoDays.rebuildLimit` marks them not stored (they read
    /// the list rows); the next write of a few of them stores those again.
    func testAWriteOfManyDatesMarksThemAndASmallOneStoresThemAgain() throws {
        let limit = SQL.TodoDays.rebuildLimit
        let days = (0...limit).map { Day(year: 2026, month: 11, day: 1 + $0)! }
        for day in days { _ = try store.createTodo(userID: userID, TodoDraft(title: "first", deadline: day)) }
        XCTAssertTrue(try days.allSatisfy(isStored), "one date per write: stored")
        // One push touching limit + 1 dates: one more todo on each, one of them then deleted.
        try push(days.enumerated().map { index, day in
            #"{"opId": "p\#(index)", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "pushed", "deadline": "\#(day)"}}"#
        } + [#"{"opId": "gone", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "gone", "deadline": "2026-12-25"}}"#])
        let gone = try db.queryOne("SELECT id FROM todos WHERE user_id = ? AND title = 'gone'", [.int(userID)])!.int64(0)!
        for day in days { XCTAssertEqual(try storedRow(day), .some(nil), "\(day): marked not stored") }
        try assertEveryDateMatches(days + [Day("2026-12-25")!], "after the push of many dates")
        // A push of limit + 1 dates whose last todo leaves a date: a marked date without todos reads [].
        try push((0...limit).map { index in
            #"{"opId": "d\#(index)", "entity": "todo", "action": "update", "id": \#(gone), "data": {"title": "gone \#(index)"}}"#
        } + days.dropFirst(limit).enumerated().map { index, day in
            #"{"opId": "e\#(index)", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "more", "deadline": "\#(day)"}}"#
        } + (0..<limit).map { index in
            #"{"opId": "f\#(index)", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "spread", "deadline": "2027-02-0\#(1 + index)"}}"#
        } + [#"{"opId": "g", "entity": "todo", "action": "delete", "id": \#(gone)}"#])
        XCTAssertEqual(try storedRow(Day("2026-12-25")!), .some(nil), "marked, and emptied")
        XCTAssertEqual(try dayRead(.token(token), Day("2026-12-25")!), "[]")
        XCTAssertEqual(try dayRead(.user(userID), Day("2026-12-25")!), "[]")
        // A small write stores its dates again.
        _ = try store.createTodo(userID: userID, TodoDraft(title: "small", deadline: days[0]))
        XCTAssertTrue(try isStored(days[0]))
        XCTAssertFalse(try isStored(days[1]), "untouched: still marked")
        try assertEveryDateMatches(days + [Day("2026-12-25")!], "after a small write")
        try store.rebuildFeed(userID: userID)
        XCTAssertTrue(try days.allSatisfy(isStored), "rebuild-feed stores every date")
        XCTAssertNil(try storedRow(Day("2026-12-25")!), "and drops the row of a date without todos")
        try assertEveryDateMatches(days + [Day("2026-12-25")!], "after rebuild-feed")
    }

    /// `store-days` (`storeUnstoredDays`) stores again every date writes of many dates marked,
    /// across users and pages, in batches of `rebuildLimit` dates: each answers its list rows,
    /// and a marked date whose todos left has no row any more. A list too long to store is
    /// not found again until a write marks it; a deleted account's dates are left alone.
    func testTheStoreDaysPassStoresWhatWritesOfManyDatesMarked() throws {
        let limit = SQL.TodoDays.rebuildLimit
        let days = (0..<(2 * limit + 3)).map { Day(year: 2028, month: 3, day: 1 + $0)! }
        let notes = String(repeating: "long enough to be worth compressing ", count: 8)
        func create(_ index: Int, _ day: Day, _ title: String) -> String {
            #"{"opId": "\#(title)\#(index)", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "\#(title) \#(index)", "notes": "\#(notes)", "deadline": "\#(day)"}}"#
        }
        try push(days.enumerated().flatMap { index, day in (0..<3).map { create(index * 3 + $0, day, "a") } })
        let leaving = try store.createTodo(userID: userID, TodoDraft(title: "leaving", deadline: Day("2028-04-30")!)).record.id
        try push(days.enumerated().map { create($0, $1, "b") }
            + [#"{"opId": "gone", "entity": "todo", "action": "delete", "id": \#(leaving)}"#])
        XCTAssertFalse(try days.contains(where: isStored), "a push of \(days.count) dates marks them")
        XCTAssertEqual(try storedRow(Day("2028-04-30")!), .some(nil), "marked, and emptied")
        let long = Day("2028-05-05")!
        var longIDs: [Int64] = []
        while try listRowsRead(long).utf8.count <= SQL.TodoDays.maxBodyBytes + 2 {
            longIDs.append(try store.createTodo(userID: userID, TodoDraft(title: "long", notes: String(repeating: "n", count: 10_000),
                                                                        deadline: long)).record.id)
        }
        // Two more accounts with a marked date each: a live one after this user, a deleted one.
        var others: [Int64] = []
        for deleted in [false, true] {
            let email = "store-days-\(UUID().uuidString.lowercased())@example.com"
            let other = Int64(try db.execute(
                "INSERT INTO users (email, email_key, password_hash, created_at) VALUES (?, ?, 'x', NOW(3))",
                [.text(email), .text(email)]).lastInsertID)
            _ = try store.createTodo(userID: other, TodoDraft(title: "other", deadline: days[0]))
            try db.execute("UPDATE todo_days SET body = NULL, unstored = 1 WHERE user_id = ?", [.int(other)])
            if deleted { try db.execute("UPDATE users SET deleted_at = NOW(3) WHERE id = ?", [.int(other)]) }
            others.append(other)
        }
        let unstoredOfUser = "SELECT COUNT(*) FROM todo_days WHERE user_id = ? AND unstored = 1"
        func unstored(_ user: Int64) throws -> Int64? { try db.queryOne(unstoredOfUser, [.int(user)])?.int64(0) }
        XCTAssertEqual(try unstored(userID), Int64(days.count + 1), "the marked dates; not the long one")

        // Pages of 2 × limit + 1 rows: a batch of `limit` dates, one user's dates over two pages,
        // a page over two users.
        let report = try store.storeUnstoredDays(pageRows: 2 * limit + 1)
        XCTAssertGreaterThanOrEqual(report.rebuilt, days.count + 2, "\(report)")
        XCTAssertGreaterThanOrEqual(report.skipped, 1, "\(report)")
        XCTAssertGreaterThanOrEqual(report.unstored, 1, "\(report): the deleted account's date")
        XCTAssertTrue(try days.allSatisfy(isStored), "every marked date stored again")
        XCTAssertNil(try storedRow(Day("2028-04-30")!), "a date without todos keeps no row")
        XCTAssertEqual(try storedRow(long), .some(nil), "too long: not stored")
        XCTAssertEqual(try unstored(userID), 0)
        XCTAssertEqual(try assertEveryDateMatches(days + [long], "after store-days"), 2 * days.count)
        XCTAssertEqual(try unstored(others[0]), 0, "the next account's date")
        XCTAssertEqual(try unstored(others[1]), 1, "the deleted account's date")

        // A push of many dates that shortens the long list marks it; the next pass stores it.
        try push(days.enumerated().map { create($0, $1, "c") } + longIDs.prefix(2).enumerated().map { index, id in
            #"{"opId": "short\#(index)", "entity": "todo", "action": "delete", "id": \#(id)}"#
        })
        XCTAssertEqual(try unstored(userID), Int64(days.count + 1), "the long date marked with the others")
        _ = try store.storeUnstoredDays(pageRows: 2 * limit + 1)
        XCTAssertTrue(try (days + [long]).allSatisfy(isStored), "short enough again: stored by the pass")
        try assertEveryDateMatches(days + [long], "after the second pass")
    }

    /// One push touching 300 dates (more than one statement takes: the marking's 128 rows, the
    /// rebuild's `rebuildLimit` dates, which rebuild-feed runs here), moving todos off some
    /// and onto others.
    func testAPushTouchingMoreDatesThanOneStatementTakes() throws {
        let days = Array((1...12).flatMap { month in
            (1...Day.daysIn(month: month, year: 2027)).map { Day(year: 2027, month: month, day: $0)! }
        }.prefix(300))
        var operations: [String] = []
        for (index, day) in days.enumerated() {
            operations.append(#"{"opId": "c\#(index)", "entity": "todo", "action": "create", "clientId": "\#(UUID().uuidString.lowercased())", "data": {"title": "todo \#(index)", "deadline": "\#(day)", "isImportant": \#(index % 3 == 0)}}"#)
        }
        try push(operations)
        let ids = try db.query("SELECT id FROM todos WHERE user_id = ? ORDER BY id", [.int(userID)]).map { $0.int64(0)! }
        XCTAssertEqual(ids.count, 300)
        // Odd todos move to the next date; every fifth is deleted.
        operations = []
        for (index, id) in ids.enumerated() where index % 2 == 1 || index % 5 == 0 {
            operations.append(index % 5 == 0
                ? #"{"opId": "d\#(index)", "entity": "todo", "action": "delete", "id": \#(id)}"#
                : #"{"opId": "m\#(index)", "entity": "todo", "action": "update", "id": \#(id), "data": {"deadline": "\#(days[(index + 1) % days.count])"}}"#)
        }
        try push(operations)
        try assertEveryDateMatches(days, "after the moves")
        XCTAssertFalse(try days.contains(where: isStored), "a push of 300 dates marks them all")
        try store.rebuildFeed(userID: userID)
        XCTAssertTrue(try days.filter { try listRowsRead($0) != "[]" }.allSatisfy(isStored))
        try assertEveryDateMatches(days, "after rebuild-feed")
    }

    /// A date whose list is longer than its row holds (`SQL.TodoDays.maxBodyBytes`) keeps a row
    /// without a body and is answered from the list rows; shortened again, it is stored whole.
    func testADateLongerThanItsRowIsReadFromTheListRows() throws {
        let day = Day("2026-09-09")!
        let notes = String(repeating: "n", count: 10_000)
        var ids: [Int64] = []
        while try listRowsRead(day).utf8.count <= SQL.TodoDays.maxBodyBytes + 2 {
            ids.append(try store.createTodo(userID: userID, TodoDraft(title: "long \(ids.count)", notes: notes, deadline: day)).record.id)
        }
        XCTAssertEqual(try storedRow(day), .some(nil), "too long: a row without a body")
        try assertEveryDateMatches([day], "too long")
        try store.deleteTodo(userID: userID, id: ids[0], ifMatch: nil)
        try store.deleteTodo(userID: userID, id: ids[1], ifMatch: nil)
        XCTAssertTrue(try isStored(day), "short enough again: stored whole")
        try assertEveryDateMatches([day], "shortened")
    }

    /// check-feed finds a stored date that differs from its list rows, a date with todos and no row
    /// (it would answer []), and a stored list for a date without todos; a date marked not stored
    /// is right (it reads the list rows, also for a client that accepts gzip). rebuild-feed
    /// repairs the three and stores the fourth.
    func testCheckFeedFindsWrongMissingExtraAndUnstoredDatesAndRebuildRepairsThem() throws {
        let days = (0..<4).map { Day(year: 2026, month: 8, day: 1 + $0)! }
        for day in days {
            for index in 0..<4 {
                _ = try store.createTodo(userID: userID, TodoDraft(title: "t\(index)", notes: "long enough to compress", deadline: day))
            }
        }
        XCTAssertEqual(try assertEveryDateMatches(days, "before tampering"), 2 * days.count)
        try db.execute("UPDATE todo_days SET body = '{}' WHERE user_id = ? AND deadline = ?", [.int(userID), .day(days[0])])
        try db.execute("DELETE FROM todo_days WHERE user_id = ? AND deadline = ?", [.int(userID), .day(days[1])])
        try db.execute("UPDATE todo_days SET body = NULL WHERE user_id = ? AND deadline = ?", [.int(userID), .day(days[2])])
        try db.execute("INSERT INTO todo_days (user_id, deadline, body) VALUES (?, '2026-08-20', '{}')", [.int(userID)])
        let problems = try store.checkFeed(userID: userID).map(\.description)
        XCTAssertEqual(problems.count, 3, "\(problems)")
        for (day, words) in [(days[0], "the list rows say"), (days[1], "no row"), (Day("2026-08-20")!, "no live todo")] {
            XCTAssertEqual(problems.filter { $0.hasPrefix("day \(day):") && $0.contains(words) }.count, 1, "\(day): \(problems)")
        }
        XCTAssertEqual(try dayRead(.user(userID), days[2]), try listRowsRead(days[2]), "a body-less row reads the list rows")
        let bodyLess = try store.todoList(.token(token), from: days[2], to: days[2], gzip: true)
        XCTAssertNil(bodyLess.gzippedItems)
        XCTAssertEqual(String(decoding: bodyLess.json, as: UTF8.self), try listRowsRead(days[2]))
        XCTAssertEqual(try dayRead(.token(token), days[1]), "[]", "what the missing row does wrong")
        try store.rebuildFeed(userID: userID)
        XCTAssertTrue(try days.allSatisfy(isStored))
        XCTAssertEqual(try assertEveryDateMatches(days + [Day("2026-08-20")!], "after rebuild-feed"), 2 * days.count)
    }

    /// Migration 025's back-fill gives every date with live todos a row without a body, which
    /// reads the list rows (as before the migration); the date's next small write stores it whole.
    func testTheMigrationBackFillReadsTheListRowsUntilTheDateIsWritten() throws {
        let days = (0..<2).map { Day(year: 2026, month: 10, day: 1 + $0)! }
        for day in days {
            for index in 0..<3 { _ = try store.createTodo(userID: userID, TodoDraft(title: "t\(index)", deadline: day)) }
        }
        let stored = try listRowsRead(days[0])
        try db.execute("DELETE FROM todo_days WHERE user_id = ?", [.int(userID)])
        let file = try String(contentsOf: StoreTestDatabase.sqlDirectory.appendingPathComponent("025_todo_days.sql"),
                              encoding: .utf8)
        let inserts = Migrator.splitStatements(file).filter { $0.hasPrefix("INSERT") }
        XCTAssertEqual(inserts.count, 1)
        for statement in inserts {
            let mine = statement.replacingOccurrences(of: "FROM todo_list", with: "FROM todo_list WHERE user_id = \(userID)")
            XCTAssertNotEqual(mine, statement)
            try db.execute(mine)
        }
        XCTAssertEqual(try db.queryOne("SELECT COUNT(*), SUM(body IS NULL) FROM todo_days WHERE user_id = ?",
                                       [.int(userID)]).map { [$0.int64(0)!, $0.int64(1)!] }, [2, 2])
        XCTAssertEqual(try dayRead(.token(token), days[0]), stored)
        _ = try store.createTodo(userID: userID, TodoDraft(title: "next", deadline: days[0]))
        XCTAssertTrue(try isStored(days[0]), "written: stored whole")
        XCTAssertFalse(try isStored(days[1]))
        XCTAssertEqual(try dayRead(.token(token), days[0]), try listRowsRead(days[0]))
        XCTAssertEqual(try dayRead(.token(token), days[1]), try listRowsRead(days[1]))
        try store.rebuildFeed(userID: userID)
        try assertEveryDateMatches(days, "after rebuild-feed")
    }
}
