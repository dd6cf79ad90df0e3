import Credentials
import Deflate
import Foundation
import XCTest

@testable import TodoSyncCore
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
