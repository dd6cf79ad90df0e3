import TodoSyncCore
import XCTest

final class DailyStatTests: XCTestCase {
    private func todo(_ completed: Bool, life: Bool = false, difficulty: Int = 0, minutes: Int = 0,
                      tag: Int64? = nil) -> StatInput {
        StatInput(isCompleted: completed, isLife: life, difficulty: difficulty, estimatedTime: minutes,
                  tag: tag.map { StatInput.TagRef(id: $0, name: "tag\($0)", color: "#00000\($0 % 10)") })
    }

    func testNoTodosMeansNoStat() {
        XCTAssertNil(DailyStatContent.compute([]))
    }

    func testEmptyBalanceWhenNothingCompleted() throws {
        let stat = try XCTUnwrap(DailyStatContent.compute([todo(false, minutes: 60)]))
        XCTAssertEqual(stat.todoCount, 1)
        XCTAssertEqual(stat.completedCount, 0)
        XCTAssertEqual(stat.productivityHundredths, 0)
        XCTAssertEqual(stat.balanceNum, 50)
        XCTAssertEqual(stat.balanceText.title, "Balanced")
        XCTAssertEqual(stat.centerXHundredths, 0)
        XCTAssertEqual(stat.centerYHundredths, 0)
    }

    func testProductivityRoundsHalfAwayFromZero() throws {
        // 1 × 1 / 60 = 0.01666… → 0.02; 3 × 1 / 60 = 0.05; 1 × 3 / 60 = 0.05 exactly.
        XCTAssertEqual(DailyStatContent.compute([todo(true, difficulty: 1, minutes: 1)])?.productivityHundredths, 2)
        // 5 × 45 + 3 × 20 = 285 → 4.75
        XCTAssertEqual(DailyStatContent.compute([todo(true, difficulty: 5, minutes: 45),
                                                 todo(true, difficulty: 3, minutes: 20)])?.productivityHundredths, 475)
        // 0.125 → 0.13 (half away from zero): 1 × 7.5 / 60 is impossible, so check the helper directly.
        XCTAssertEqual(roundedQuotient(125, 1000), 0)
        XCTAssertEqual(roundedQuotient(1250, 100), 13)
        XCTAssertEqual(roundedQuotient(-1250, 100), -13)
        XCTAssertEqual(roundedQuotient(-1249, 100), -12)
    }

    func testBalanceEdges() throws {
        func balance(life: Int, work: Int) -> (Int, String) {
            let stat = DailyStatContent.compute([todo(true, life: true, minutes: life), todo(true, minutes: work)])!
            return (stat.balanceNum, stat.balanceText.title)
        }
        XCTAssertEqual(balance(life: 29, work: 71).1, "Work-heavy")
        XCTAssertEqual(balance(life: 29, work: 71).0, 29)
        XCTAssertEqual(balance(life: 30, work: 70).1, "Balanced")
        XCTAssertEqual(balance(life: 70, work: 30).1, "Balanced")
        XCTAssertEqual(balance(life: 71, work: 29).1, "Life-heavy")
        // 1 / 3 → 33.33 → 33; 2 / 3 → 66.67 → 67; 1 / 200 → 0.5 → 1 (half away from zero)
        XCTAssertEqual(balance(life: 1, work: 2).0, 33)
        XCTAssertEqual(balance(life: 2, work: 1).0, 67)
        XCTAssertEqual(balance(life: 1, work: 199).0, 1)
    }

    func testCenter() throws {
        let stat = try XCTUnwrap(DailyStatContent.compute([
            todo(true, life: true, minutes: 10), todo(true, minutes: 20), todo(false, minutes: 999),
        ]))
        XCTAssertEqual(stat.centerXHundredths, -33)  // (10 − 20) / 30 = −0.333…
        XCTAssertEqual(stat.centerYHundredths, 67)   // 2 / 3
    }

    func testTagStatsOrderAndCompletedOnly() throws {
        let stat = try XCTUnwrap(DailyStatContent.compute([
            todo(true, tag: 5), todo(true, tag: 3), todo(true, tag: 5), todo(true, tag: 9), todo(false, tag: 9),
            todo(true, tag: nil),
        ]))
        XCTAssertEqual(stat.tagIDs, [5, 3, 9])
        XCTAssertEqual(stat.tagStatsJSON,
                       ##"[{"tagId":5,"name":"tag5","color":"#000005","count":2},"##
                       + ##"{"tagId":3,"name":"tag3","color":"#000003","count":1},"##
                       + ##"{"tagId":9,"name":"tag9","color":"#000009","count":1}]"##)
    }

    func testJSONShape() {
        let content = DailyStatContent.compute([todo(true, life: true, difficulty: 2, minutes: 45, tag: 1)])!
        let stat = DailyStat(id: 3, date: Day("2026-11-21")!, content: content, version: 12,
                             createdAt: "2026-11-21T09:30:00.000Z", updatedAt: "2026-11-21T09:30:00.000Z",
                             deletedAt: nil)
        var writer = JSONWriter()
        stat.write(to: &writer)
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self),
                       #"{"id":3,"date":"2026-11-21","todoCount":1,"completedCount":1,"productivityNum":1.5,"#
                       + #""balance":{"num":100,"title":"Life-heavy","message":"Plenty of life today; remember your goals."},"#
                       + ##""tagStats":[{"tagId":1,"name":"tag1","color":"#000001","count":1}],"center":{"x":1,"y":1},"##
                       + #""version":12,"createdAt":"2026-11-21T09:30:00.000Z","updatedAt":"2026-11-21T09:30:00.000Z","deletedAt":null}"#)
    }

    /// An aggregate is plain sums: a todo added and taken away again leaves it exactly as it was
    /// (what lets a date changed and changed back within one push keep its version), and the tag
    /// counts survive their stored text.
    func testAggregateDeltasCancelAndTagCountsRoundTrip() throws {
        let todos = [todo(true, life: true, difficulty: 3, minutes: 45, tag: 7), todo(true, minutes: 20, tag: 2),
                     todo(false, difficulty: 5, minutes: 60, tag: 7), todo(true, difficulty: 1, minutes: 5, tag: 7)]
        var aggregate = DailyAggregate(todos)
        let before = aggregate
        aggregate.add(todos[0], sign: -1)
        aggregate.add(todos[0])
        XCTAssertEqual(aggregate, before)
        XCTAssertEqual(before.tagCountsText, "2:1,7:2")
        XCTAssertEqual(DailyAggregate.tagCounts(fromText: before.tagCountsText), before.tagCounts)
        XCTAssertEqual(DailyAggregate.tagCounts(fromText: ""), [:])
        XCTAssertNil(DailyAggregate.tagCounts(fromText: "7:"))
        var emptied = before
        for todo in todos { emptied.add(todo, sign: -1) }
        XCTAssertEqual(emptied, .zero, "no zero tag entries left behind")
        XCTAssertNil(emptied.render { _ in ("", "") })
    }
}
