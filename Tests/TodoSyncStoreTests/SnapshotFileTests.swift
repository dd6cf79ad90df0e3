import Credentials
import Deflate
import Foundation
import SystemSQLite
import XCTest

@testable import TodoSyncCore
@testable import TodoSyncSnapshot
@testable import TodoSyncStore

/// The snapshot file's tables come from the record writers (docs/SNAPSHOT.md), and the cache finds
/// only fresh files of the right key, erases an account's files, and keeps within its limits.
final class SnapshotFileTests: XCTestCase {
    func testTablesAreTheRecordsAsPullRendersThem() {
        let current = SnapshotTable.tables(schemaVersion: 2)
        XCTAssertEqual(current.map(\.name), ["tags", "todos", "daily_stats"])
        XCTAssertEqual(current[0].columns.map(\.name), ["id", "clientId", "name", "color", "version", "createdAt", "updatedAt"])
        XCTAssertEqual(current[1].columns.map(\.name), [
            "id", "clientId", "title", "raw", "notes", "isImportant", "isLife", "tagId", "difficulty", "estimatedTime",
            "deadline", "isCompleted", "version", "createdAt", "updatedAt",
        ])
        let types = Dictionary(uniqueKeysWithValues: current[2].columns.map { ($0.name, $0.type) })
        XCTAssertEqual(types["productivityNum"], "REAL")
        XCTAssertEqual(types["balance"], "TEXT")
        XCTAssertEqual(types["todoCount"], "INTEGER")
        XCTAssertTrue(current[2].keepsJSON)
        XCTAssertFalse(SnapshotTable.tables(schemaVersion: 1)[1].columns.contains { $0.name == "notes" })
        XCTAssertTrue(current[1].createSQL.hasPrefix(#"CREATE TABLE todos ("id" INTEGER PRIMARY KEY, "clientId" TEXT"#))
    }

    /// The writer binds each member itself; SQLite's `json_extract` (what builds used before) is
    /// the reference: the same values, of the same storage classes, for awkward records.
    func testWriterGivesWhatJSONExtractGives() throws {
        let file = try SQLiteDatabase(path: ":memory:")
        let time = "2026-01-02T03:04:05.678Z"
        let awkward = "a \"quoted\" \\ back\\slash\nnew line\ttab\u{01}ctl é 🙂 /"
        var records: [FeedKind: [[UInt8]]] = [:]
        for (id, name) in [(5, "plain"), (-3, awkward), (9_007_199_254_740_993, "")] {
            var json = JSONWriter()
            Tag(id: Int64(id), clientID: id == 5 ? nil : "c\(id)", name: name, color: "#0a0B0c", version: Int64(id) * 7,
                createdAt: time, updatedAt: time, deletedAt: nil).write(to: &json, schemaVersion: 2)
            records[.tag, default: []].append(json.bytes)
        }
        for (id, title) in [(1, "buy milk"), (2, awkward)] {
            var json = JSONWriter()
            Todo(id: Int64(id), clientID: id == 1 ? "c" : nil, title: title, raw: id == 1 ? title : awkward + " !1",
                 notes: id == 1 ? nil : "line one\nline \"two\"", isImportant: id == 1, isLife: false,
                 tagID: id == 1 ? nil : 5, difficulty: id, estimatedTime: 0, deadline: Day("2026-02-28")!, isCompleted: id == 2, version: 40 + Int64(id),
                 createdAt: time, updatedAt: time, deletedAt: nil).write(to: &json, schemaVersion: 2)
            records[.todo, default: []].append(json.bytes)
        }
        for (id, productivity) in [(1, 0), (2, 150), (3, -25), (4, 12_345)] {
            var json = JSONWriter()
            DailyStat(id: Int64(id), date: Day("2026-01-0\(id)")!,
                      content: DailyStatContent(todoCount: id, completedCount: 1, productivityHundredths: Int64(productivity),
                                                balanceNum: id - 2, tagStatsJSON: #"[{"tagId":5,"name":"a \"b\" é"}]"#,
                                                centerXHundredths: -150, centerYHundredths: 5),
                      version: 90 + Int64(id), createdAt: time, updatedAt: time, deletedAt: nil).write(to: &json)
            records[.dailyStat, default: []].append(json.bytes)
        }
        for table in SnapshotTable.tables(schemaVersion: 2) {
            try file.execute(table.createSQL)
            try file.execute(table.createSQL.replacingOccurrences(of: "CREATE TABLE \(table.name) ",
                                                                  with: "CREATE TABLE reference_\(table.name) "))
            var names = table.columns.map { "\"\($0.name)\"" }
            var values = table.columns.map { "json_extract(?1, '$.\($0.name)')" }
            if table.keepsJSON {
                names.append("\"json\"")
                values.append("?1")
            }
            let reference = try file.prepare(
                "INSERT INTO reference_\(table.name) (\(names.joined(separator: ", "))) VALUES (\(values.joined(separator: ", ")))")
            let writer = try SnapshotTableWriter(table, in: file)
            for record in records[table.kind]! {
                try record.withUnsafeBytes { bytes in
                    try writer.insert(bytes)
                    try reference.run(text: [bytes])
                }
            }
            XCTAssertEqual(writer.rows, records[table.kind]!.count)
            let row = names.map { "quote(\($0))" }.joined(separator: " || ',' || ")
            let differing = try file.queryInt64("""
                SELECT count(*) FROM (SELECT \(row) FROM \(table.name) EXCEPT SELECT \(row) FROM reference_\(table.name))
                """)
            XCTAssertEqual(differing, 0, "\(table.name): rows that differ from json_extract's")
            XCTAssertEqual(try file.queryInt64("SELECT count(*) FROM \(table.name)"), Int64(records[table.kind]!.count))
        }
        XCTAssertEqual(try file.queryInt64("SELECT productivityNum = 123.45 AND typeof(productivityNum) = 'real' FROM daily_stats WHERE id = 4"), 1)
        XCTAssertEqual(try file.queryInt64("SELECT count(*) FROM todos WHERE title = '\(awkward.replacingOccurrences(of: "'", with: "''"))'"), 1)
    }

    /// Rows in increasing id order leave the table compact as written; one out of order does not.
    func testWriterNotesWhetherRowsCameInIDOrder() throws {
        let file = try SQLiteDatabase(path: ":memory:")
        let table = SnapshotTable.tables(schemaVersion: 2)[0]
        try file.execute(table.createSQL)
        let writer = try SnapshotTableWriter(table, in: file)
        for id in [2, 7, 3] {
            try Array(#"{"id":\#(id),"name":"t","version":1}"#.utf8).withUnsafeBytes { try writer.insert($0) }
            XCTAssertEqual(writer.inIDOrder, id != 3)
        }
        XCTAssertEqual(try file.queryInt64("SELECT count(*) FROM tags WHERE color IS NULL AND clientId IS NULL"), 3)
    }

    func testCacheLookupEraseAndSweep() throws {
        let directory = NSTemporaryDirectory() + "snapshot-cache-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = SnapshotCache(directory: directory, maximumBytes: 1 << 20, maximumAgeSeconds: 7200)
        XCTAssertEqual(cache.maximumAgeSeconds, 3600, "never older than an hour")
        let key = SnapshotCache.Key(userID: 7, epoch: 0xab, version: 10, schemaVersion: 2)
        XCTAssertNil(cache.lookup(key))
        try cache.prepareDirectory(7)
        let scratch = try cache.scratchPath(7, ".vacuum")
        FileManager.default.createFile(atPath: scratch, contents: Data("hello".utf8))
        let entry = try cache.install(scratch, key: key)
        XCTAssertEqual(entry.reprDigest, "sha-256=:LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=:")
        XCTAssertEqual(entry.etag, "\"2cf24dba5fb0a30e26e83b2ac5b9e29e\"")
        XCTAssertEqual(cache.lookup(key), entry)
        XCTAssertEqual(cache.lookup(SnapshotCache.Key(userID: 7, epoch: 0xab, version: 9, schemaVersion: 2)), entry,
                       "a newer file serves an older key")
        XCTAssertNil(cache.lookup(SnapshotCache.Key(userID: 7, epoch: 0xab, version: 11, schemaVersion: 2)))
        XCTAssertNil(cache.lookup(SnapshotCache.Key(userID: 7, epoch: 0xac, version: 10, schemaVersion: 2)))
        XCTAssertNil(cache.lookup(SnapshotCache.Key(userID: 7, epoch: 0xab, version: 10, schemaVersion: 1)))
        XCTAssertNil(cache.lookup(key, now: Int64(Date().timeIntervalSince1970) + 3601), "older than the age limit")
        XCTAssertEqual(cache.sweep(now: Int64(Date().timeIntervalSince1970) + 3601), 1)
        XCTAssertNil(cache.lookup(key))
        let again = try cache.scratchPath(7, ".vacuum")
        FileManager.default.createFile(atPath: again, contents: Data("hello".utf8))
        _ = try cache.install(again, key: key)
        cache.erase(userID: 7)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(directory)/7"))
    }

    /// A window's file is cached apart: found only for its own window, beside the whole account's
    /// file (a new build of one does not supersede the other), its window read back from its name.
    func testWindowFilesAreCachedApart() throws {
        let directory = NSTemporaryDirectory() + "snapshot-cache-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = SnapshotCache(directory: directory, maximumBytes: 1 << 20, maximumAgeSeconds: 3600)
        let march = SyncWindow(from: Day("2031-03-01"), to: Day("2031-03-31"))!
        let fromMarch = SyncWindow(from: Day("2031-03-01"), to: nil)!
        func install(_ text: String, window: SyncWindow?) throws -> SnapshotCache.Entry {
            try cache.prepareDirectory(7)
            let scratch = try cache.scratchPath(7, ".vacuum")
            FileManager.default.createFile(atPath: scratch, contents: Data(text.utf8))
            return try cache.install(scratch, key: SnapshotCache.key(userID: 7, epoch: 1, version: 10, schemaVersion: 2,
                                                                     window: window))
        }
        let whole = try install("whole", window: nil)
        let inMarch = try install("march", window: march)
        let open = try install("from march", window: fromMarch)
        XCTAssertTrue(inMarch.fileName.hasPrefix("1-10-2-w20310301_20310331-"), inMarch.fileName)
        XCTAssertTrue(open.fileName.hasPrefix("1-10-2-w20310301_x-"), open.fileName)
        XCTAssertEqual(cache.lookup(SnapshotCache.key(userID: 7, epoch: 1, version: 10, schemaVersion: 2)), whole)
        XCTAssertEqual(cache.lookup(SnapshotCache.key(userID: 7, epoch: 1, version: 10, schemaVersion: 2, window: march)),
                       inMarch)
        XCTAssertEqual(cache.lookup(SnapshotCache.key(userID: 7, epoch: 1, version: 9, schemaVersion: 2,
                                                      window: fromMarch)), open)
        XCTAssertNil(cache.lookup(SnapshotCache.key(userID: 7, epoch: 1, version: 10, schemaVersion: 2,
                                                    window: SyncWindow(from: nil, to: Day("2031-03-31"))!)))
        XCTAssertEqual(SnapshotCache.entry(userID: 7, fileName: inMarch.fileName)?.key.window, march)
        let february31 = inMarch.fileName.replacingOccurrences(of: "w20310301_20310331", with: "w20310301_20310231")
        XCTAssertNil(SnapshotCache.entry(userID: 7, fileName: february31), "not a real date: not a file of the cache")
    }

    /// The gzip companion: decodes to the file byte for byte, named by its own digest, made once,
    /// and counted with its file against the size limit (both go together, oldest first).
    func testGzipCompanionDecodesToTheFileAndCountsAgainstTheSizeLimit() throws {
        let directory = NSTemporaryDirectory() + "snapshot-cache-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let roomy = SnapshotCache(directory: directory, maximumBytes: 1 << 30, maximumAgeSeconds: 3600)
        func installed(_ user: Int64, _ bytes: [UInt8]) throws -> SnapshotCache.Entry {
            try roomy.prepareDirectory(user)
            let scratch = try roomy.scratchPath(user, ".vacuum")
            FileManager.default.createFile(atPath: scratch, contents: Data(bytes))
            return try roomy.install(scratch, key: SnapshotCache.Key(userID: user, epoch: 1, version: 5, schemaVersion: 2))
        }
        // 3 MiB: more than one read of the compressor's 1 MiB buffer.
        var rng = SystemRandomNumberGenerator()
        let bytes = (0..<(3 << 20)).map { UInt8(truncatingIfNeeded: $0 % 251 == 0 ? Int(rng.next() % 256) : $0 / 4096) }
        let old = try installed(8, bytes)
        XCTAssertNil(roomy.companion(of: old))
        let made = try XCTUnwrap(roomy.makeCompanion(of: old, deadline: nil))
        XCTAssertEqual(made.etag, String(old.etag.dropLast()) + "-gz\"")
        let path = "\(directory)/\(made.relativePath)"
        let encoded = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        XCTAssertEqual(gunzip(encoded, limit: 8 << 20), bytes, "the companion decodes to the file")
        XCTAssertEqual(made.digest, try FileDigest.sha256(ofFileAt: path))
        XCTAssertLessThan(encoded.count, bytes.count / 4)
        XCTAssertEqual(roomy.companion(of: old), made)
        XCTAssertEqual(try roomy.makeCompanion(of: old, deadline: nil), made, "made once")
        // A newer file of another user; the older pair is what goes when the pair no longer fits.
        let aged = Date(timeIntervalSinceNow: -600)
        for name in [old.relativePath, made.relativePath] {
            try FileManager.default.setAttributes([.modificationDate: aged], ofItemAtPath: "\(directory)/\(name)")
        }
        let newer = try installed(9, Array(bytes.prefix(1000)))
        let tight = SnapshotCache(directory: directory, maximumBytes: Int64(bytes.count + 1000 + encoded.count) - 1,
                                  maximumAgeSeconds: 3600)
        XCTAssertEqual(tight.sweep(), 2, "the companion counts: the older file and its companion go")
        XCTAssertNil(tight.lookup(old.key))
        XCTAssertNil(tight.companion(of: old))
        XCTAssertEqual(tight.lookup(newer.key), newer)
        // A companion whose file is gone goes at the next sweep.
        let orphan = try XCTUnwrap(roomy.makeCompanion(of: newer, deadline: nil))
        unlink("\(directory)/\(newer.relativePath)")
        XCTAssertEqual(roomy.sweep(), 1)
        XCTAssertNil(roomy.companion(of: orphan.entry))
    }
}
