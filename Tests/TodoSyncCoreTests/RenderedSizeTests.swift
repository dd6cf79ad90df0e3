import TodoSyncCore
import XCTest

/// `Todo.maximumRenderedBytes` (issue 34, item 3): derived from the fields' rules, and no valid
/// todo renders longer.
final class RenderedSizeTests: XCTestCase {
    private func rendered(_ todo: Todo, schema: Int = SchemaVersion.current) -> Int {
        var writer = JSONWriter()
        todo.write(to: &writer, schemaVersion: schema)
        return writer.bytes.count
    }

    /// No scalar takes more than `maximumBytesPerScalar` inside a string, and the widest scalar
    /// takes exactly that: checked over every Unicode scalar.
    func testNoScalarRendersWiderThanTheBound() {
        var widest = 0
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            var bytes: [UInt8] = []
            JSONWriter.appendQuoted(String(Character(scalar)), to: &bytes)
            widest = max(widest, bytes.count - 2)
        }
        XCTAssertEqual(widest, JSONWriter.maximumBytesPerScalar)
        var bytes: [UInt8] = []
        JSONWriter.appendQuoted(String(JSONWriter.widestScalar), to: &bytes)
        XCTAssertEqual(bytes.count - 2, JSONWriter.maximumBytesPerScalar)
    }

    /// The todo (raw 2,000 × U+0001, notes 10,000 × U+0001) is within the bound, which
    /// is its strings' escapes plus the rest of the widest object; no other todo at the limits
    /// (4-byte scalars, quotes, older schema versions) renders longer.
    func testTheWidestTodoBoundsEveryTodoAtTheLimits() throws {
        let maximum = Todo.maximumRenderedBytes
        let textScalars = TodoField.titleLength.upperBound + TodoField.rawLength.upperBound + TodoField.notesLength.upperBound
        XCTAssertGreaterThan(maximum, textScalars * JSONWriter.maximumBytesPerScalar)
        XCTAssertLessThan(maximum, textScalars * JSONWriter.maximumBytesPerScalar + 1_000)
        XCTAssertEqual(rendered(Todo.widest), maximum)
        for filler in ["\u{1}", "\u{10FFFF}", "😀", "\"", "\\", "\n", "a"] as [Character] {
            var todo = Todo.widest
            todo.title = String(repeating: filler, count: TodoField.titleLength.upperBound)
            todo.raw = String(repeating: filler, count: TodoField.rawLength.upperBound)
            todo.notes = String(repeating: filler, count: TodoField.notesLength.upperBound)
            for schema in SchemaVersion.first...SchemaVersion.current {
                XCTAssertLessThanOrEqual(rendered(todo, schema: schema), maximum, "filler \(filler), schema \(schema)")
            }
            XCTAssertLessThanOrEqual(rendered(todo), todo.renderedBytesBound)
        }
        // A live todo (deletedAt null), small ids, no clientId: shorter still, and bounded.
        var small = Todo.widest
        small.id = 1
        small.version = 1
        small.clientID = nil
        small.deletedAt = nil
        small.tagID = nil
        XCTAssertLessThan(rendered(small), maximum)
        XCTAssertLessThanOrEqual(rendered(small), small.renderedBytesBound)
    }

    /// The widest todo passes the server's own validation: the bound is of valid todos.
    func testTheWidestTodoIsValid() throws {
        let widest = Todo.widest
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("title", widest.title)
        writer.field("raw", widest.raw)
        writer.field("notes", widest.notes)
        writer.key("tagId")
        writer.int(1)
        writer.field("difficulty", widest.difficulty)
        writer.field("estimatedTime", widest.estimatedTime)
        writer.key("deadline")
        writer.day(widest.deadline)
        writer.field("clientId", "3f2c1d4e-5b6a-4c7d-8e9f-0a1b2c3d4e5f")
        writer.endObject()
        guard case .object(let object) = try JSONParser.parse(writer.bytes) else { return XCTFail("an object") }
        var reader = FieldReader(object: object)
        XCTAssertNoThrow(try TodoDraft.parse(&reader))
    }

    /// A stat's `tagStats` is bounded per tag: no tag at the name limit renders a longer entry.
    func testATagStatEntryIsBoundedPerTag() {
        for filler in ["\u{1}", "\u{10FFFF}", "\"", "a"] as [Character] {
            let name = String(repeating: filler, count: TagField.nameLength.upperBound)
            let entries = (0..<3).map { DailyStatContent.TagStat(tagID: Int64.max - Int64($0), name: name, color: "#FFFFFF",
                                                                 count: Int.max) }
            XCTAssertLessThanOrEqual(DailyStatContent.encode(entries).utf8.count,
                                     DailyStatContent.maximumTagStatsBytes(tags: 3), "filler \(filler)")
        }
        XCTAssertEqual(DailyStatContent.maximumTagStatsBytes(tags: 0), 2)
    }
}
