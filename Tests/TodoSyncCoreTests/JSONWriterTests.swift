import TodoSyncCore
import XCTest

final class JSONWriterTests: XCTestCase {
    func testWritesObjectsArraysAndNulls() {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("a", Int64(1))
        writer.field("b", nil as String?)
        writer.key("c")
        writer.beginArray()
        writer.bool(true)
        writer.string("x")
        writer.beginObject()
        writer.endObject()
        writer.endArray()
        writer.field("d", "e")
        writer.endObject()
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self), #"{"a":1,"b":null,"c":[true,"x",{}],"d":"e"}"#)
    }

    func testEscapesOnlyWhatJSONRequires() {
        var bytes: [UInt8] = []
        JSONWriter.appendQuoted("a\"b\\c/d\n\u{01}😀한", to: &bytes)
        XCTAssertEqual(String(decoding: bytes, as: UTF8.self), "\"a\\\"b\\\\c/d\\n\\u0001😀한\"")
    }

    func testRoundTripsThroughTheParser() throws {
        let text = "Emoji 👩‍👩‍👧 Korean 안녕하세요 RTL שלום combining é \u{0}"
        var writer = JSONWriter()
        writer.string(text)
        XCTAssertEqual(try JSONParser.parse(writer.bytes), .string(text))
    }

    func testFormatsHundredths() {
        XCTAssertEqual(JSONWriter.formatHundredths(0), "0")
        XCTAssertEqual(JSONWriter.formatHundredths(150), "1.5")
        XCTAssertEqual(JSONWriter.formatHundredths(105), "1.05")
        XCTAssertEqual(JSONWriter.formatHundredths(-25), "-0.25")
        XCTAssertEqual(JSONWriter.formatHundredths(-100), "-1")
    }

    func testTodoShapeIsTheContractsKeyOrder() {
        let todo = Todo(id: 7, clientID: nil, title: "t", raw: "r", isImportant: true, isLife: false, tagID: nil,
                        difficulty: 2, estimatedTime: 30, deadline: Day("2026-11-21")!, isCompleted: false,
                        version: 9, createdAt: "2026-11-21T09:30:00.123Z", updatedAt: "2026-11-21T09:30:00.123Z",
                        deletedAt: nil)
        var writer = JSONWriter()
        todo.write(to: &writer)
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self),
                       #"{"id":7,"clientId":null,"title":"t","raw":"r","notes":null,"remindAt":null,"isImportant":true,"isLife":false,"tagId":null,"#
                       + #""difficulty":2,"estimatedTime":30,"deadline":"2026-11-21","isCompleted":false,"version":9,"#
                       + #""createdAt":"2026-11-21T09:30:00.123Z","updatedAt":"2026-11-21T09:30:00.123Z","deletedAt":null}"#)
        // Schema version 1: the same object without `notes`.
        var old = JSONWriter()
        todo.write(to: &old, schemaVersion: 1)
        XCTAssertEqual(String(decoding: old.bytes, as: UTF8.self),
                       #"{"id":7,"clientId":null,"title":"t","raw":"r","isImportant":true,"isLife":false,"tagId":null,"#
                       + #""difficulty":2,"estimatedTime":30,"deadline":"2026-11-21","isCompleted":false,"version":9,"#
                       + #""createdAt":"2026-11-21T09:30:00.123Z","updatedAt":"2026-11-21T09:30:00.123Z","deletedAt":null}"#)
    }

    func testErrorObject() {
        var writer = JSONWriter()
        DomainError.validation(field: "title", "is required").writeErrorObject(to: &writer)
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self),
                       #"{"code":"validation_failed","message":"Some fields are invalid; see `details`.","details":[{"field":"title","problem":"is required"}]}"#)
    }

    func testIntegersAndDaysAreWrittenExactly() {
        var writer = JSONWriter()
        writer.beginArray()
        for value: Int64 in [0, 7, -7, 10, 1_000_000, Int64.max, Int64.min] { writer.int(value) }
        writer.day(Day("2026-01-05")!)
        writer.endArray()
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self),
                       "[0,7,-7,10,1000000,9223372036854775807,-9223372036854775808,\"2026-01-05\"]")
    }

    func testADocumentDrainedInPiecesIsTheSameBytesAsOneWrittenWhole() {
        func write(_ writer: inout JSONWriter, drainInto pieces: inout [[UInt8]]?) {
            writer.beginObject()
            writer.field("user", "ada")
            writer.key("items")
            writer.beginArray()
            for index in 0..<5 {
                writer.beginObject()
                writer.field("id", index)
                writer.endObject()
                if pieces != nil { writer.drain { pieces!.append(Array($0)) } }  // a comma is still due
            }
            writer.endArray()
            writer.endObject()
        }
        var whole = JSONWriter()
        var none: [[UInt8]]? = nil
        write(&whole, drainInto: &none)
        var pieced = JSONWriter()
        var pieces: [[UInt8]]? = []
        write(&pieced, drainInto: &pieces)
        pieced.drain { pieces!.append(Array($0)) }
        XCTAssertTrue(pieced.bytes.isEmpty)
        XCTAssertEqual(pieces!.count, 6)
        XCTAssertEqual(pieces!.flatMap { $0 }, whole.bytes)
        XCTAssertEqual(String(decoding: whole.bytes, as: UTF8.self),
                       #"{"user":"ada","items":[{"id":0},{"id":1},{"id":2},{"id":3},{"id":4}]}"#)
    }
}
