import TodoSyncCore
import XCTest

final class QuickAddParserTests: XCTestCase {
    private let tags: [String: Int64] = ["work": 4, "집": 7]

    private func parse(_ text: String) throws -> [QuickAddLine] {
        try QuickAddParser.parse(text) { self.tags[$0] }
    }

    func testMixedTokens() throws {
        let lines = try parse("!Write report #Work 1h30m *3 @life\n\n   \nbuy milk 30m #unknown")
        XCTAssertEqual(lines, [
            QuickAddLine(title: "Write report", raw: "!Write report #Work 1h30m *3 @life", isImportant: true,
                         isLife: true, tagID: 4, estimatedTime: 90, difficulty: 3),
            QuickAddLine(title: "buy milk #unknown", raw: "buy milk 30m #unknown", estimatedTime: 30),
        ])
    }

    func testOutOfRangeTokensAreWords() throws {
        let line = try XCTUnwrap(try parse("plan *0 *6 25h 1441m trip").first)
        XCTAssertEqual(line.title, "plan *0 *6 25h 1441m trip")
        XCTAssertNil(line.difficulty)
        XCTAssertNil(line.estimatedTime)
        XCTAssertEqual(try parse("x 24h").first?.estimatedTime, 1440)
    }

    func testLastTokenOfAKindWins() throws {
        let line = try XCTUnwrap(try parse("a *1 *4 2h 15m").first)
        XCTAssertEqual(line.difficulty, 4)
        XCTAssertEqual(line.estimatedTime, 15)
    }

    func testUnicodeTagAndTitle() throws {
        XCTAssertEqual(try parse("  장보기 #집 😀  ").first, QuickAddLine(title: "장보기 😀", raw: "장보기 #집 😀", tagID: 7))
    }

    func testImportantMarkerOnlyAtStart() throws {
        XCTAssertEqual(try parse("! call mom").first?.isImportant, true)
        XCTAssertEqual(try parse("! call mom").first?.title, "call mom")
        XCTAssertEqual(try parse("call mom!").first?.isImportant, false)
    }

    func testEmptyTitleRejectsTheWholeRequest() {
        XCTAssertThrowsError(try parse("ok line\n#work 30m")) { error in
            XCTAssertEqual((error as? DomainError)?.code, "validation_failed")
            XCTAssertEqual((error as? DomainError)?.details.first?.field, "text[1]")
        }
    }

    func testFiftyLinesMax() throws {
        let fifty = (1...50).map { "t\($0)" }.joined(separator: "\n")
        XCTAssertEqual(try parse(fifty + "\n\n").count, 50)
        XCTAssertThrowsError(try parse(fifty + "\nt51"))
    }

    func testCarriageReturns() throws {
        XCTAssertEqual(try parse("a\r\nb\rc").map(\.title), ["a", "b", "c"])
    }
}
