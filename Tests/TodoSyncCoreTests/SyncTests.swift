@testable import TodoSyncCore
import XCTest

final class SyncCursorTests: XCTestCase {
    func testRoundTrip() {
        for epoch: UInt64 in [1, 0xfeed_beef, .max] {
            let cursor = SyncCursor(position: 1234, skipTombstonesThrough: 99, userID: 7, epoch: epoch)
            XCTAssertEqual(SyncCursor(encoded: cursor.encoded, userID: 7), cursor)
            XCTAssertTrue(cursor.encoded.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
        }
    }

    /// Cursors issued before epochs existed still decode (so the server can answer 410 rather
    /// than 400), with epoch 0, which no database has.
    func testFirstFormatCursorDecodesWithEpochZero() {
        let payload = "1:7:5:3"
        let text = Base64URL.encode(Array("\(payload):\(String(SyncCursor.checksum(payload), radix: 16))".utf8))
        XCTAssertEqual(SyncCursor(encoded: text, userID: 7),
                       SyncCursor(position: 5, skipTombstonesThrough: 3, userID: 7, epoch: 0))
        XCTAssertNil(SyncCursor(encoded: text, userID: 8))
    }

    func testRejectsAnotherUsersCursor() {
        let cursor = SyncCursor(position: 5, skipTombstonesThrough: 0, userID: 7, epoch: 42)
        XCTAssertNil(SyncCursor(encoded: cursor.encoded, userID: 8))
    }

    func testRejectsTamperedAndMalformedCursors() {
        let encoded = SyncCursor(position: 5, skipTombstonesThrough: 0, userID: 7, epoch: 42).encoded
        var tampered = Array(encoded)
        tampered[tampered.count / 2] = tampered[tampered.count / 2] == "A" ? "B" : "A"
        for text in [String(tampered), String(encoded.dropLast()), "", "abc", "!!!!", "1:7:5:0:0",
                     Base64URL.encode(Array("1:7:5:0:deadbeef".utf8)), Base64URL.encode(Array("2:7:5:0".utf8)),
                     Base64URL.encode(Array("2:7:5:0:zz:0".utf8)), Base64URL.encode(Array("3:7:5:0:1:0".utf8))] {
            XCTAssertNil(SyncCursor(encoded: text, userID: 7), text)
        }
    }

    /// A window cursor keeps its window (open sides too) and its first pull's scan position.
    func testWindowCursorRoundTrip() {
        let windows = [SyncWindow(from: Day("2031-03-01"), to: Day("2031-03-31"))!,
                       SyncWindow(from: Day("2031-03-01"), to: nil)!, SyncWindow(from: nil, to: Day("2031-03-01"))!]
        for window in windows {
            for scan in [nil, WindowScan.start, WindowScan(day: Day("2031-03-09"), version: 77)] {
                let cursor = SyncCursor(position: 90, skipTombstonesThrough: 90, userID: 7, epoch: 42, window: window,
                                        scan: scan)
                let decoded = SyncCursor(encoded: cursor.encoded, userID: 7)
                XCTAssertEqual(decoded, cursor)
                XCTAssertEqual(decoded?.window, window)
                XCTAssertEqual(decoded?.scan, scan)
            }
        }
        // A whole pull's cursor has no window; it is not a window cursor of any window.
        let whole = SyncCursor(position: 5, skipTombstonesThrough: 5, userID: 7, epoch: 42)
        XCTAssertNil(SyncCursor(encoded: whole.encoded, userID: 7)?.window)
        XCTAssertNil(SyncWindow(from: Day("2031-03-02"), to: Day("2031-03-01")))
    }

    func testRejectsMalformedWindowCursors() {
        func encoded(_ payload: String) -> String {
            Base64URL.encode(Array("\(payload):\(String(SyncCursor.checksum(payload), radix: 16))".utf8))
        }
        XCTAssertNotNil(SyncCursor(encoded: encoded("3:7:5:5:2a:2031-03-01:2031-03-31::"), userID: 7))
        for payload in ["3:7:5:5:2a:2031-03-02:2031-03-01::", "3:7:5:5:2a:::tags:0", "3:7:5:5:2a:2031-02-30:2031-03-01::",
                        "3:7:5:5:2a:2031-03-01:2031-03-31:tags:", "3:7:5:5:2a:2031-03-01:2031-03-31:2031-3-1:4",
                        "3:7:5:5:2a:2031-03-01:2031-03-31::4", "3:7:5:5:2a:2031-03-01:2031-03-31:tags:-1",
                        "3:7:5:5:2a:2031-03-01:2031-03-31"] {
            XCTAssertNil(SyncCursor(encoded: encoded(payload), userID: 7), payload)
        }
    }

    func testBase64URL() {
        for length in 0..<10 {
            let bytes = (0..<length).map { UInt8(($0 * 77 + 13) % 256) }
            XCTAssertEqual(Base64URL.decode(Base64URL.encode(bytes)), bytes)
        }
    }
}

final class PushRequestTests: XCTestCase {
    private func parse(_ json: String) throws -> PushRequest {
        var reader = try FieldReader(try JSONParser.parse(Array(json.utf8)))
        return try PushRequest.parse(&reader)
    }

    func testEnvelope() throws {
        let request = try parse(#"{"deviceId": "d1", "conflictPolicy": "merge", "operations": [{"opId": "a"}]}"#)
        XCTAssertEqual(request.deviceID, "d1")
        XCTAssertEqual(request.policy, .merge)
        XCTAssertEqual(request.operations.map(\.opID), ["a"])
        XCTAssertEqual(try parse(#"{"deviceId": "d1", "operations": []}"#).policy, .reject)
    }

    func testEnvelopeErrorsAre422() {
        let ops501 = "[" + (0...500).map { #"{"opId": "op\#($0)"}"# }.joined(separator: ",") + "]"
        for body in [#"{"operations": []}"#, #"{"deviceId": "", "operations": []}"#,
                     #"{"deviceId": "d", "conflictPolicy": "server-wins", "operations": []}"#,
                     #"{"deviceId": "d", "operations": {}}"#, #"{"deviceId": "d", "operations": [{"entity": "tag"}]}"#,
                     #"{"deviceId": "d", "operations": \#(ops501)}"#] {
            XCTAssertThrowsError(try parse(body), body) { XCTAssertEqual(($0 as? DomainError)?.code, "validation_failed") }
        }
    }

    func testOperationShape() throws {
        let request = try parse(#"""
            {"deviceId": "d", "operations": [
              {"opId": "1", "entity": "todo", "action": "update", "id": 4, "baseVersion": 3, "data": {"title": "x"}},
              {"opId": "2", "entity": "dailyStat", "action": "update", "id": 4},
              {"opId": "3", "entity": "tag", "action": "delete"},
              {"opId": "4", "entity": "tag", "action": "explode", "id": 1}]}
            """#)
        let update = try request.operations[0].parse()
        XCTAssertEqual(update.entity, .todo)
        XCTAssertEqual(update.baseVersion, 3)
        XCTAssertEqual(update.data["title"], .string("x"))
        for index in 1...3 {
            XCTAssertThrowsError(try request.operations[index].parse()) { XCTAssertEqual(($0 as? DomainError)?.code, "validation_failed") }
        }
    }
}

final class FieldMergeTests: XCTestCase {
    private let server = Todo(id: 1, clientID: nil, title: "server title", raw: "r", isImportant: false, isLife: false,
                              tagID: nil, difficulty: 2, estimatedTime: 30, deadline: Day("2026-11-21")!,
                              isCompleted: true, version: 5, createdAt: "", updatedAt: "", deletedAt: nil)

    func testThreeWayRules() {
        var client = server
        client.title = "client title"   // server changed title too (base differs from server) → conflict
        client.difficulty = 4           // server still at base → take
        client.isCompleted = true       // server and client agree → nothing
        client.estimatedTime = 45       // base lacks it → conflict
        let decision = FieldMerge.decide(
            server: server, client: client,
            changedFields: ["title", "difficulty", "isCompleted", "estimatedTime"],
            base: ["title": .string("old title"), "difficulty": .int(2), "isCompleted": .bool(false)])
        XCTAssertEqual(decision.take, ["difficulty"])
        XCTAssertEqual(decision.conflicting, ["title", "estimatedTime"])
    }

    func testBaseColorComparesCaseInsensitively() {
        let tag = Tag(id: 1, clientID: nil, name: "n", color: "#FF8800", version: 2, createdAt: "", updatedAt: "",
                      deletedAt: nil)
        var client = tag
        client.color = "#00FF00"
        let decision = FieldMerge.decide(server: tag, client: client, changedFields: ["color"],
                                         base: ["color": FieldValue(json: .string("#ff8800"), field: "color")])
        XCTAssertEqual(decision.take, ["color"])
    }

    func testOnlyColorComparesCaseInsensitively() {
        XCTAssertEqual(FieldValue(json: .string("#facade"), field: "title"), .string("#facade"))
        XCTAssertEqual(FieldValue(json: .string("#facade"), field: "color"), .string("#FACADE"))
    }
}

final class TitleOrderTests: XCTestCase {
    private func sorted(_ titles: [String]) -> [String] {
        titles.sorted { TitleOrder.key($0).lexicographicallyPrecedes(TitleOrder.key($1)) }
    }

    func testCodePointOrderAfterSimpleLowercasing() {
        XCTAssertEqual(sorted(["äpfel", "Zebra", "apfel", "Éclair", "eclair", "b"]),
                       ["apfel", "b", "eclair", "Zebra", "äpfel", "Éclair"])
        XCTAssertEqual(TitleOrder.key("ABC xyz"), Array("abc xyz".utf8))
        XCTAssertEqual(TitleOrder.key("ΩMEGA"), Array("ωmega".utf8))
        XCTAssertEqual(TitleOrder.key("Ǆ"), Array("ǆ".utf8))
    }

    /// Simple, not full, lowercasing: İ becomes plain i (full: i + combining dot), ß stays ß.
    func testSimpleMappingsOnly() {
        XCTAssertEqual(TitleOrder.key("İstanbul"), Array("istanbul".utf8))
        XCTAssertEqual(TitleOrder.key("ß"), Array("ß".utf8))
        XCTAssertEqual(TitleOrder.key("ﬃ"), Array("ﬃ".utf8))
        XCTAssertEqual(TitleOrder.key("😀"), Array("😀".utf8))
    }

    /// The UTF-8 entry points (the snapshot install's SQL functions) give what the String ones give.
    func testTheUTF8KeysAreTheStringKeys() {
        for title in ["ABC xyz", "Plain ascii 123 [@]^_`{~}", "", "İstanbul", "ΩMEGA äpfel", "ß ﬃ 😀 Ǆ", "mixed ÉCLAIR Zebra"] {
            let utf8 = Array(title.utf8)
            XCTAssertEqual(utf8.withUnsafeBufferPointer { TitleOrder.key(utf8: $0) }, TitleOrder.key(title), title)
        }
        for clientID in ["3F2504E0-4F89-11D3-9A0C-0305E82C3301", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "ÄB-not-a-uuid"] {
            let utf8 = Array(clientID.utf8)
            XCTAssertEqual(utf8.withUnsafeBufferPointer { ClientID.key(utf8: $0) }, Array(ClientID.key(clientID).utf8), clientID)
        }
    }
}
