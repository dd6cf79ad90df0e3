import Foundation
import TodoSyncCore
import XCTest

/// The validation limits live once on the server (`TodoField`, `TagField`); `openapi.yaml` holds
/// the published copy. This fails when the two disagree.
final class FieldLimitsTests: XCTestCase {
    private static let openAPI: String = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return (try? String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8)) ?? ""
    }()

    /// `minimum`/`maximum` (or `minLength`/`maxLength`) of the named schema under
    /// `components.schemas` (indented four spaces; its keywords six).
    private func bounds(of schema: String, _ lower: String, _ upper: String) -> ClosedRange<Int64>? {
        let lines = Self.openAPI.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(of: "    \(schema):"[...]) else { return nil }
        var low: Int64?
        var high: Int64?
        for line in lines[(start + 1)...] {
            guard line.hasPrefix("      ") else { break }
            let parts = line.trimmingCharacters(in: .whitespaces).split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let value = Int64(parts[1].trimmingCharacters(in: .whitespaces))
            if parts[0] == lower { low = value }
            if parts[0] == upper { high = value }
        }
        guard let low, let high else { return nil }
        return low...high
    }

    private func lengths(_ range: ClosedRange<Int>) -> ClosedRange<Int64> {
        Int64(range.lowerBound)...Int64(range.upperBound)
    }

    func testOpenAPIStatesTheServersLimits() {
        XCTAssertFalse(Self.openAPI.isEmpty, "openapi.yaml not found")
        XCTAssertEqual(bounds(of: "Title", "minLength", "maxLength"), lengths(TodoField.titleLength))
        XCTAssertEqual(bounds(of: "Raw", "minLength", "maxLength"), lengths(TodoField.rawLength))
        XCTAssertEqual(bounds(of: "Notes", "minLength", "maxLength"), lengths(TodoField.notesLength))
        XCTAssertEqual(bounds(of: "Difficulty", "minimum", "maximum"), TodoField.difficultyRange)
        XCTAssertEqual(bounds(of: "EstimatedTime", "minimum", "maximum"), TodoField.estimatedTimeRange)
        XCTAssertEqual(bounds(of: "TagName", "minLength", "maxLength"), lengths(TagField.nameLength))
        XCTAssertEqual(bounds(of: "DeviceId", "minLength", "maxLength"), lengths(PushRequest.deviceIDLength))
    }
}
