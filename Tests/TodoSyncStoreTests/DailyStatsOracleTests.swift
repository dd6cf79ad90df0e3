import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// The incremental daily stats (each write applies its todos' changes as deltas to the stored
/// aggregates, Sql/023) against the full recompute (`recomputeDailyStats`, which rebuilds every
/// aggregate and stat from the todos) and against the contract's formulas over the todos read
/// back: after random histories of creates, edits that move deadlines, completes, tag changes,
/// deletes, tag renames and deletes, and pushes that change a date and change it back, every
/// user's every stat — rounding, `tagStats` names and colors, versions — is what they give.
final class DailyStatsOracleTests: StoreTestCase {

    /// Every stat row of the user with its aggregate, as text, by date.
    private func statRows() throws -> [String] {
        try db.query("""
            SELECT day, id, version, deleted_at, todo_count, completed_count, productivity_hundredths, balance_num,
                   center_x_hundredths, center_y_hundredths, tag_stats, weighted_minutes, life_minutes,
                   work_minutes, tag_counts
              FROM daily_stats WHERE user_id = ? ORDER BY day
            """, [.int(userID)]).map { row in (0..<15).map { row.string($0) ?? "NULL" }.joined(separator: " | ") }
    }

    /// The contract's formulas over the live todos as stored, with their tags' current names.
    private func expectedContents() throws -> [Day: DailyStatContent] {
        var inputs: [Day: [StatInput]] = [:]
        for row in try db.query("""
            SELECT t.deadline, t.is_completed, t.is_life, t.difficulty, t.estimated_time, t.tag_id, g.name, g.color
              FROM todos t LEFT JOIN tags g ON g.id = t.tag_id
             WHERE t.user_id = ? AND t.deleted_at IS NULL
            """, [.int(userID)]) {
            let tag = row.int64(5).map { StatInput.TagRef(id: $0, name: row.string(6) ?? "", color: row.string(7) ?? "") }
            inputs[Day(row.string(0)!)!, default: []].append(StatInput(
                isCompleted: row.bool(1)!, isLife: row.bool(2)!, difficulty: row.int(3)!, estimatedTime: row.int(4)!,
                tag: tag))
        }
        return inputs.compactMapValues(DailyStatContent.compute)
    }

    /// The incremental stats equal both oracles; the recompute changes nothing, versions included.
    private func assertIncrementalEqualsRecomputed(_ step: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let expected = try expectedContents()
        var live: [Day: DailyStatContent] = [:]
        for row in try db.query("SELECT \(SQL.DailyStats.columns) FROM daily_stats WHERE user_id = ? AND deleted_at IS NULL",
                                [.int(userID)]) {
            let stat = DailyStat(row: row)
            live[stat.date] = stat.content
        }
        for day in Set(expected.keys).union(live.keys).sorted() {
            XCTAssertEqual(live[day], expected[day], "\(step): the stat of \(day)", file: file, line: line)
        }
        let before = try statRows()
        try store.recomputeDailyStats(userID: userID)
        let after = try statRows()
        XCTAssertEqual(before.count, after.count, "\(step): stat rows", file: file, line: line)
        for (incremental, recomputed) in zip(before, after) where incremental != recomputed {
            XCTFail("\(step): incremental \(incremental)\n  recomputed \(recomputed)", file: file, line: line)
        }
    }

    private func push(_ operations: [String]) throws {
        let json = #"{"deviceId": "oracle", "operations": ["# + operations.joined(separator: ",") + "]}"
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        _ = try store.push(userID: userID, try PushRequest.parse(&reader))
    }

    private func update(_ id: Int64, _ data: String) -> String {
        #"{"opId": "\#(UUID().uuidString)", "entity": "todo", "action": "update", "id": \#(id), "data": {\#(data)}}"#
    }

    func testIncrementalStatsEqualTheFullRecomputeAfterRandomHistories() throws {
        for seed: UInt64 in [1, 2, 3] {
            if seed > 1 {  // a new user of its own for each history
                try tearDownWithError()
                try setUpWithError()
            }
            try randomHistory(seed: seed)
        }
    }

    private func randomHistory(seed: UInt64) throws {
        var rng = SplitMix(seed: seed)
        let days = (1...5).map { Day("2026-03-0\($0)")! }
        var tags: [Int64] = []
        var todos: [Int64] = []
        func color() -> String { String(format: "#%06X", Int(rng.next() % 0x1000000)) }
        func someTag() -> Int64? { tags.isEmpty || rng.next() % 3 == 0 ? nil : tags[Int(rng.next() % UInt64(tags.count))] }
        func someDay() -> Day { days[Int(rng.next() % UInt64(days.count))] }
        func someTodo() -> Int64? { todos.isEmpty ? nil : todos[Int(rng.next() % UInt64(todos.count))] }
        for step in 1...240 {
            switch rng.next() % 20 {
            case 0, 1:
                guard tags.count < 5 else { continue }
                tags.append(try store.createTag(userID: userID, TagDraft(clientID: nil, name: "tag \(step)", color: color())).record.id)
            case 2:
                guard let tag = someTag() else { continue }
                let patch = rng.next() % 2 == 0 ? TagPatch(name: "renamed \(step)") : TagPatch(color: color())
                _ = try store.updateTag(userID: userID, id: tag, patch, ifMatch: nil)
            case 3:
                guard let tag = someTag() else { continue }
                try store.deleteTag(userID: userID, id: tag, ifMatch: nil)
                tags.removeAll { $0 == tag }
            case 4...8:
                let draft = TodoDraft(title: "todo \(step)", isLife: rng.next() % 3 == 0, tagID: someTag(),
                                      difficulty: Int(rng.next() % 6), estimatedTime: Int(rng.next() % 97) * 5,
                                      deadline: someDay(), isCompleted: rng.next() % 2 == 0)
                todos.append(try store.createTodo(userID: userID, draft).record.id)
            case 9...13:
                guard let todo = someTodo() else { continue }
                var patch = TodoPatch()
                if rng.next() % 2 == 0 { patch.deadline = someDay() }
                if rng.next() % 2 == 0 { patch.isCompleted = rng.next() % 2 == 0 }
                if rng.next() % 3 == 0 { patch.tagID = .some(someTag()) }
                if rng.next() % 3 == 0 { patch.isLife = rng.next() % 2 == 0 }
                if rng.next() % 3 == 0 { patch.difficulty = Int(rng.next() % 6) }
                if rng.next() % 3 == 0 { patch.estimatedTime = Int(rng.next() % 97) * 5 }
                _ = try store.updateTodo(userID: userID, id: todo, patch, ifMatch: nil)
            case 14, 15:
                guard let todo = someTodo() else { continue }
                try store.deleteTodo(userID: userID, id: todo, ifMatch: nil)
                todos.removeAll { $0 == todo }
            default:
                // One push: a todo moved away and back, completed and un-completed, plus other edits
                // and a create, some of them rejected (a todo that does not exist, a bad field).
                guard let todo = someTodo(), let other = someTodo() else { continue }
                let away = someDay()
                let current = try XCTUnwrap(try store.todo(userID: userID, id: todo))
                var operations = [
                    update(todo, #""deadline": "\#(away)", "isCompleted": \#(!current.isCompleted)"#),
                    update(other, #""deadline": "\#(someDay())", "estimatedTime": \#(Int(rng.next() % 97) * 5)"#),
                    update(999_999_999, #""title": "gone""#),
                    update(other, #""difficulty": 99"#),
                    update(todo, #""deadline": "\#(current.deadline)", "isCompleted": \#(current.isCompleted)"#),
                ]
                if rng.next() % 2 == 0 {
                    operations.append(#"{"opId": "\#(UUID().uuidString)", "entity": "todo", "action": "create", "data": {"title": "pushed \#(step)", "deadline": "\#(someDay())", "isCompleted": true, "estimatedTime": 25, "difficulty": 3}}"#)
                }
                try push(operations)
            }
            if step % 60 == 0 { try assertIncrementalEqualsRecomputed("seed \(seed), step \(step)") }
        }
        // The histories must have exercised what they claim to.
        XCTAssertGreaterThan(try db.queryOne("SELECT COUNT(*) FROM daily_stats WHERE user_id = ? AND tag_stats <> '[]'",
                                             [.int(userID)])?.int64(0) ?? 0, 0, "seed \(seed): no stat counted a tag")
    }

    /// A date changed and changed back within one push keeps its stat and its version; the
    /// date the todo passed through gets no stat.
    func testADateChangedAndChangedBackInOnePushKeepsItsVersion() throws {
        let tag = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Work", color: "#112233")).record
        let todo = try store.createTodo(userID: userID, TodoDraft(title: "a", tagID: tag.id, difficulty: 3, estimatedTime: 50,
                                                                  deadline: Day("2026-04-01")!, isCompleted: true)).record
        let before = try statRows()
        try push([
            update(todo.id, #""deadline": "2026-04-02", "isCompleted": false"#),
            update(todo.id, #""deadline": "2026-04-01", "isCompleted": true"#),
        ])
        XCTAssertEqual(try statRows(), before)
        try assertIncrementalEqualsRecomputed("after the push")
    }

    /// The migration's back-fill gives the aggregates the full recompute gives.
    func testTheMigrationBackFillMatchesTheRecompute() throws {
        try randomHistory(seed: 9)
        let incremental = try statRows()
        try db.execute("UPDATE daily_stats SET weighted_minutes = 0, life_minutes = 0, work_minutes = 0, tag_counts = '' WHERE user_id = ?",
                       [.int(userID)])
        let file = try String(contentsOf: StoreTestDatabase.sqlDirectory.appendingPathComponent("023_daily_stat_aggregates.sql"),
                              encoding: .utf8)
        for statement in Migrator.splitStatements(file) where statement.hasPrefix("UPDATE") {
            try db.execute(statement + " AND s.user_id = \(userID)")
        }
        XCTAssertEqual(try statRows(), incremental)
    }
}
