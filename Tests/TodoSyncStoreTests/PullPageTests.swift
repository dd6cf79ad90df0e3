import Foundation
import MariaDB
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncStore

/// A pull page's body must be, byte for byte, the page the contract's rules make from the feed's
/// rows one record at a time (the oracle below, with the member filter that parses each record,
/// `JSONMemberFilter.removing`, where pages search each record only up to its newer fields): the same
/// records in the same arrays and order, the same parent tags after the page's tags, the same
/// cursor and `hasMore`, for every page of a pull, with and without a device and at every
/// schema version.
final class PullPageTests: StoreTestCase {
    private func push(_ device: String, _ operations: String) throws {
        var reader = try FieldReader(try JSONParser.parse(Array(#"{"deviceId": "\#(device)", "operations": [\#(operations)]}"#.utf8)))
        _ = try store.push(userID: userID, try PushRequest.parse(&reader))
    }

    /// Tags, todos (some with notes long enough to be fetched past their bind buffer), stats,
    /// tombstones of every kind, a device's changes and tags renamed after the todos that name them.
    private func history() throws {
        let day = Day("2026-05-01")!
        let work = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Work", color: "#112233")).record
        let home = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Home \"q\"", color: "#445566")).record
        var todos: [Int64] = []
        for index in 0..<12 {
            // Long enough to be fetched past a bind buffer; a key inside a string, a final backslash.
            let notes = index % 3 == 0 ? String(repeating: "ünïcødé \n\u{1}", count: 200 + index) + #","notes":"x\"# : nil
            todos.append(try store.createTodo(userID: userID, TodoDraft(
                title: "todo \(index)", notes: notes, tagID: index % 2 == 0 ? work.id : home.id,
                deadline: Day("2026-05-0\(1 + index % 4)")!, isCompleted: index % 4 == 0)).record.id)
        }
        _ = try store.updateTag(userID: userID, id: work.id, TagPatch(name: "Office"), ifMatch: nil)
        try store.deleteTodo(userID: userID, id: todos[1], ifMatch: nil)
        try push("phone", """
            {"opId": "1", "entity": "todo", "action": "create", "clientId": "8091a2b3-4d5e-4f60-8b1c-3d4e5f607182",
             "data": {"title": "pushed", "deadline": "2026-05-02", "tagId": \(home.id), "isCompleted": true}},
            {"opId": "2", "entity": "todo", "action": "update", "id": \(todos[2]), "data": {"title": "by phone"}},
            {"opId": "3", "entity": "tag", "action": "create", "clientId": "9091a2b3-4d5e-4f60-8b1c-3d4e5f607182",
             "data": {"name": "Phone", "color": "#778899"}}
            """)
        _ = try store.updateTodo(userID: userID, id: todos[4], TodoPatch(title: "later"), ifMatch: nil)
        _ = try store.updateTag(userID: userID, id: home.id, TagPatch(color: "#000000"), ifMatch: nil)
        try store.deleteTodo(userID: userID, id: todos[7], ifMatch: nil)
        _ = try store.createTodo(userID: userID, TodoDraft(title: "last", deadline: day))
    }

    private struct FeedRow {
        let kind: Int, recordID: Int64, version: Int64, deleted: Bool, device: Int64?, parents: [Int64], body: [UInt8]
    }

    /// The page the contract's rules make from the feed's rows, rendered one record at a time.
    private func oracle(after position: Int64, skipThrough: Int64, limit: Int, device: Int64, schemaVersion: Int,
                        cursor: SyncCursor) throws -> (body: [UInt8], hasMore: Bool, last: Int64) {
        let all = try db.query(SQL.Feed.ofUser, [.int(userID)]).map { row in
            FeedRow(kind: Int(row.int64(0)!), recordID: row.int64(1)!, version: row.int64(2)!,
                    deleted: row.string(3) != nil, device: row.int64(4),
                    parents: row.string(5)!.split(separator: ",").map { Int64($0)! }, body: row.bytes(6)!)
        }.sorted { $0.version < $1.version }
        let after = all.filter { $0.version > position && (!$0.deleted || $0.version > skipThrough) }
        let page = Array(after.prefix(limit))
        var arrays: [[[UInt8]]] = Array(repeating: [], count: 6)
        func hidden(_ kind: Int, _ deleted: Bool) -> [String] {
            deleted || kind == 3 ? [] : SchemaVersion.fieldsNewerThan(schemaVersion, todo: kind == 2)
        }
        var referenced: [Int64] = []
        for row in page where row.device != device || device == 0 {
            arrays[(row.kind - 1) * 2 + (row.deleted ? 1 : 0)].append(
                JSONMemberFilter.removing(hidden(row.kind, row.deleted), from: row.body))
            if !row.deleted { referenced += row.parents }
        }
        let held = Set(page.filter { $0.kind == 1 }.map(\.recordID))
        for tag in all where tag.kind == 1 && !tag.deleted && tag.version > position && referenced.contains(tag.recordID)
            && !held.contains(tag.recordID) && (tag.device != device || device == 0) {
            arrays[0].append(JSONMemberFilter.removing(hidden(1, false), from: tag.body))
        }
        var body = Array(#"{"changes":{"#.utf8)
        for (index, key) in ["tags", "todos", "dailyStats"].enumerated() {
            if index > 0 { body += Array(",".utf8) }
            body += Array(#""\#(key)":{"upserted":["#.utf8) + Array(arrays[index * 2].joined(separator: [UInt8(ascii: ",")]))
            body += Array(#"],"deleted":["#.utf8) + Array(arrays[index * 2 + 1].joined(separator: [UInt8(ascii: ",")]))
            body += Array("]}".utf8)
        }
        let hasMore = after.count > limit
        body += Array(#"},"cursor":"\#(cursor.encoded)","hasMore":\#(hasMore),"schemaVersion":\#(schemaVersion)}"#.utf8)
        return (body, hasMore, page.last?.version ?? position)
    }

    fileprivate func assertEveryPageEqualsTheOracle(start: SyncCursor?, limit: Int, deviceID: String?, schemaVersion: Int) throws {
        let device = try deviceID.flatMap {
            try db.queryOne("SELECT id FROM sync_devices WHERE user_id = ? AND device_key = ?", [.int(userID), .text($0)])?.int64(0)
        } ?? 0
        let snapshot = try db.queryOne("SELECT change_seq FROM users WHERE id = ?", [.int(userID)])!.int64(0)!
        var cursor = start
        for index in 0..<100 {
            let page = try store.pull(userID: userID, cursor: cursor, limit: limit, deviceID: deviceID,
                                      schemaVersion: schemaVersion)
            let position = cursor?.position ?? 0
            let skip = cursor?.skipTombstonesThrough ?? snapshot
            let expected = try oracle(after: position, skipThrough: skip, limit: limit,
                                      device: device, schemaVersion: schemaVersion, cursor: page.cursor)
            XCTAssertEqual(String(decoding: page.jsonBody, as: UTF8.self), String(decoding: expected.body, as: UTF8.self),
                           "page \(index) after \(position), limit \(limit), device \(deviceID ?? "none"), schema \(schemaVersion)")
            XCTAssertEqual(page.hasMore, expected.hasMore)
            XCTAssertEqual(page.cursor.position, expected.hasMore ? expected.last : max(expected.last, snapshot))
            XCTAssertEqual(page.cursor.skipTombstonesThrough, skip)
            if !page.hasMore { return }
            cursor = page.cursor
        }
        XCTFail("more than 100 pages")
    }

    func testEveryPageIsByteForByteThePageRenderedFromTheFeedRows() throws {
        try history()
        let epoch = UInt64(bitPattern: try db.queryOne("SELECT epoch FROM sync_epoch WHERE id = 1")!.int64(0)!)
        let middle = SyncCursor(position: 9, skipTombstonesThrough: 9, userID: userID, epoch: epoch)
        for schemaVersion in 1...SchemaVersion.current {
            for deviceID in [nil, "phone"] {
                for limit in [1, 3, 7, 1000] {
                    try assertEveryPageEqualsTheOracle(start: nil, limit: limit, deviceID: deviceID, schemaVersion: schemaVersion)
                    try assertEveryPageEqualsTheOracle(start: middle, limit: limit, deviceID: deviceID, schemaVersion: schemaVersion)
                }
            }
        }
    }
}

/// The page's set of tag ids (parent tags) across its growth: every id once, in any order.
final class IDSetTests: XCTestCase {
    func testEveryIDIsInsertedOnceAcrossGrowth() {
        var set = IDSet()
        var ids = (1...5_000).map { Int64($0) * 7919 } + [1, Int64.max, 1 << 40]
        ids.shuffle()
        for id in ids { XCTAssertTrue(set.insert(id), "\(id)") }
        ids.shuffle()
        for id in ids { XCTAssertFalse(set.insert(id), "\(id)") }
    }
}

/// The parent-tag lookup's skip (Sql/024): a page whose start is at or above the user's latest
/// tag version (`users.tag_seq`) does not look parent tags up, and every page around that boundary
/// is still the oracle's, with the tag that changed after the page's start.
extension PullPageTests {
    /// Prepared statements this connection has executed (the store's statements are all prepared).
    private func statementsExecuted() throws -> Int64 {
        Int64(try db.queryOne("SHOW SESSION STATUS LIKE 'Com_stmt_execute'")!.string(1)!)!
    }

    private func cursor(at position: Int64) throws -> SyncCursor {
        let epoch = UInt64(bitPattern: try db.queryOne("SELECT epoch FROM sync_epoch WHERE id = 1")!.int64(0)!)
        return SyncCursor(position: position, skipTombstonesThrough: position, userID: userID, epoch: epoch)
    }

    private func tags(of page: PullPage) throws -> [String] {
        guard case .object(let top) = try JSONParser.parse(page.jsonBody), case .object(let changes)? = top["changes"],
              case .object(let tags)? = changes["tags"], case .array(let live)? = tags["upserted"]
        else { XCTFail("not a pull page"); return [] }
        return live.map { record in
            guard case .object(let tag) = record, case .string(let name)? = tag["name"] else { return "?" }
            return name
        }
    }

    func testATagChangedAfterTheStartComesWithThePageAndTheLookupIsSkippedFromTheLatestTagVersionOn() throws {
        let work = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Work", color: "#112233")).record
        let home = try store.createTag(userID: userID, TagDraft(clientID: nil, name: "Home", color: "#445566")).record
        let first = try store.createTodo(userID: userID, TodoDraft(title: "a", tagID: work.id, deadline: Day("2026-05-01")!)).record
        _ = try store.createTodo(userID: userID, TodoDraft(title: "b", tagID: home.id, deadline: Day("2026-05-02")!))
        // The tags change after the todos that name them: their versions lie beyond those todos' pages.
        _ = try store.updateTag(userID: userID, id: work.id, TagPatch(name: "Office"), ifMatch: nil)
        let latestTag = try store.updateTag(userID: userID, id: home.id, TagPatch(color: "#000000"), ifMatch: nil).version
        XCTAssertEqual(try db.queryOne("SELECT tag_seq FROM users WHERE id = ?", [.int(userID)])?.int64(0), latestTag)
        // Todos naming the tags after their last change: their pages start at or above tag_seq.
        let later = try store.createTodo(userID: userID, TodoDraft(title: "c", tagID: work.id, deadline: Day("2026-05-03")!)).record
        _ = try store.createTodo(userID: userID, TodoDraft(title: "d", tagID: home.id, deadline: Day("2026-05-04")!))

        // A device whose cursor precedes the first todo gets "Office" with that todo's page.
        var before = try statementsExecuted()
        let needed = try store.pull(userID: userID, cursor: try cursor(at: first.version - 1), limit: 1)
        let lookedUp = try statementsExecuted() - before
        XCTAssertEqual(try tags(of: needed), ["Office"], String(decoding: needed.jsonBody, as: UTF8.self))
        XCTAssertTrue(needed.hasMore)

        // From the latest tag version on, the page's todo names a tag the device holds: no lookup.
        XCTAssertEqual(later.version, latestTag + 1, "the todo is the first record after the latest tag version")
        before = try statementsExecuted()
        let held = try store.pull(userID: userID, cursor: try cursor(at: latestTag), limit: 1)
        XCTAssertEqual(try statementsExecuted() - before, lookedUp - 1, "the parent-tag lookup ran")
        XCTAssertEqual(try tags(of: held), [], String(decoding: held.jsonBody, as: UTF8.self))

        // Every page from every position around the boundary (tag_seq - 2 ... tag_seq + 2) and from
        // the start, with and without a device, is the oracle's.
        for position in [0] + Array((latestTag - 2)...(latestTag + 2)) {
            for limit in [1, 2, 3] {
                try assertEveryPageEqualsTheOracle(start: try cursor(at: position), limit: limit, deviceID: nil,
                                                   schemaVersion: SchemaVersion.current)
            }
        }
    }
}
