import TodoSyncCore
import XCTest

/// Schema versions: how a requested version is read and served, and how a record rendered at the
/// current version is cut down to an older one.
final class SchemaVersionTests: XCTestCase {
    func testOnlyIntegersAreVersions() {
        XCTAssertEqual(SchemaVersion.integer("2"), 2)
        XCTAssertEqual(SchemaVersion.integer("0"), 0)
        XCTAssertEqual(SchemaVersion.integer("-3"), -3)
        XCTAssertEqual(SchemaVersion.integer("99999999999999999999"), Int.max)
        XCTAssertEqual(SchemaVersion.integer("-99999999999999999999"), Int.min)
        for text in ["", "-", "1.0", "1e0", "+2", " 2", "2 ", "two", "0x2", "٢"] {
            XCTAssertNil(SchemaVersion.integer(text), text)
        }
    }

    func testBelowTheMinimumIsRefusedAboveTheCurrentIsServedAtIt() {
        let current = SchemaVersion.current
        XCTAssertNil(SchemaVersion.served(1, minimum: 2))
        XCTAssertNil(SchemaVersion.served(0, minimum: 1))
        XCTAssertNil(SchemaVersion.served(Int.min, minimum: 1))
        XCTAssertEqual(SchemaVersion.served(2, minimum: 2), 2)
        XCTAssertEqual(SchemaVersion.served(1, minimum: 1), 1)
        XCTAssertEqual(SchemaVersion.served(current + 1, minimum: 1), current)
        XCTAssertEqual(SchemaVersion.served(Int.max, minimum: 2), current)
    }

    func testAVersionOneTodoLacksExactlyTheNewerFields() {
        XCTAssertEqual(SchemaVersion.fieldsNewerThan(1, todo: true), TodoField.allCases.filter { $0.since > 1 }.map(\.rawValue))
        XCTAssertEqual(SchemaVersion.fieldsNewerThan(SchemaVersion.current, todo: true), [])
        XCTAssertEqual(SchemaVersion.fieldsNewerThan(1, todo: false), [])
        let todo = Todo(id: 1, clientID: nil, title: #"a "quoted", \ title"#, raw: "r", isImportant: true, isLife: false,
                        tagID: 3, difficulty: 2, estimatedTime: 5, deadline: Day("2030-01-02")!, isCompleted: false,
                        version: 7, createdAt: "2030-01-01T00:00:00.000Z", updatedAt: "2030-01-01T00:00:00.000Z",
                        deletedAt: nil)
        var current = JSONWriter()
        todo.write(to: &current)
        var old = JSONWriter()
        todo.write(to: &old, schemaVersion: 1)
        XCTAssertEqual(JSONMemberFilter.removing(SchemaVersion.fieldsNewerThan(1, todo: true), from: current.bytes), old.bytes)
    }

    func testTheFilterSkipsStringsAndNestedValuesWhole() {
        let json = #"{"a":"x\",\"b\":1","b":{"c":[1,{"b":2}],"d":"}"},"e":null,"f":[],"g":true}"#
        func removing(_ keys: [String]) -> String {
            String(decoding: JSONMemberFilter.removing(keys, from: Array(json.utf8)), as: UTF8.self)
        }
        XCTAssertEqual(removing(["b"]), #"{"a":"x\",\"b\":1","e":null,"f":[],"g":true}"#)
        XCTAssertEqual(removing(["a", "g"]), #"{"b":{"c":[1,{"b":2}],"d":"}"},"e":null,"f":[]}"#)
        XCTAssertEqual(removing(["e", "f"]), #"{"a":"x\",\"b\":1","b":{"c":[1,{"b":2}],"d":"}"},"g":true}"#)
        XCTAssertEqual(removing(["a", "b", "e", "f", "g"]), "{}")
        XCTAssertEqual(removing(["zz"]), json)
        XCTAssertEqual(removing([]), json)
        // A quote after an even number of backslashes ends the string; after an odd number it is escaped.
        let backslashes = Array(#"{"a":"\\","b":"\\\"\\\\","c":1}"#.utf8)
        XCTAssertEqual(String(decoding: JSONMemberFilter.removing(["a"], from: backslashes), as: UTF8.self),
                       #"{"b":"\\\"\\\\","c":1}"#)
        XCTAssertEqual(JSONMemberFilter.members(of: backslashes).map(\.key), ["a", "b", "c"])
    }

    /// The pull page's filter (keys in the object's order, the search stopping at the last one)
    /// makes the bytes of the parsing filter for every set of keys of a flat object, appended
    /// after what the array already holds.
    func testTheFlatObjectFilterEqualsTheParsingFilterForEveryKeySet() {
        let object = Array(#"{"a":"x\",\"b\":1","b":2,"c":"\\","d":null,"e":"\"e\":"}"#.utf8)
        let keys = ["a", "b", "c", "d", "e"]
        for mask in 0..<(1 << keys.count) {
            var chosen = keys.indices.filter { mask & (1 << $0) != 0 }.map { keys[$0] }
            if mask % 3 == 0 { chosen.insert("zz", at: chosen.count / 2) }  // a key the object lacks
            var bytes = Array("[".utf8)
            object.withUnsafeBytes {
                JSONMemberFilter.appendFlatObject($0, removing: chosen.map(JSONMemberFilter.memberPattern), to: &bytes)
            }
            XCTAssertEqual(String(decoding: bytes, as: UTF8.self),
                           "[" + String(decoding: JSONMemberFilter.removing(chosen, from: object), as: UTF8.self),
                           "\(chosen)")
        }
    }
}
