import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// What became of the snapshot a first sync asked for (API.md "Sync: snapshot").
public enum SnapshotOutcome: Sendable, Equatable {
    /// Installed (`records` rows; `bytes` downloaded by this sync, 0 when a download an earlier
    /// run finished was installed), then pulled from its cursor.
    case installed(records: Int, bytes: Int64)
    /// The server has no snapshot to give: no route (404), or none now (429/502/503/504 after
    /// the usual retries; 503 with a long `Retry-After` for an account too large to build). The
    /// paged pull did the first sync.
    case unavailable
    /// Downloaded and refused (a failed check, or its cursor answered 410): nothing of it was
    /// installed, the paged pull did the first sync.
    case refused(String)
}

/// The files of a snapshot download, next to the store: the bytes so far (`data`) and what the
/// server said of them (`head`: ETag, digest, length), so that another run resumes with `Range`.
struct SnapshotFiles: Sendable {
    let data: String
    let head: String

    init(storePath: String) {
        data = storePath + ".snapshot-partial"
        head = data + ".json"
    }

    struct Head: Codable, Equatable {
        var etag: String?
        /// The `Repr-Digest` header as the server sent it.
        var digest: String
        var length: Int64?
    }

    var size: Int64 {
        ((try? FileManager.default.attributesOfItem(atPath: data))?[.size] as? NSNumber)?.int64Value ?? 0
    }

    func readHead() -> Head? {
        guard let bytes = FileManager.default.contents(atPath: head) else { return nil }
        return try? JSONDecoder().decode(Head.self, from: bytes)
    }

    func start(_ new: Head) throws {
        remove()
        guard FileManager.default.createFile(atPath: data, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown)
        }
        try JSONEncoder().encode(new).write(to: URL(fileURLWithPath: head), options: .atomic)
    }

    /// Appends one range of the file; it must continue the partial file exactly.
    func append(_ bytes: Data, at offset: Int64) throws {
        guard let handle = FileHandle(forWritingAtPath: data) else { throw CocoaError(.fileWriteUnknown) }
        defer { try? handle.close() }
        guard try handle.seekToEnd() == UInt64(offset) else { throw CocoaError(.fileWriteUnknown) }
        try handle.write(contentsOf: bytes)
    }

    func remove() {
        unlink(data)
        unlink(head)
    }
}

extension TodoSyncClient {
    /// The first sync of an empty store: download the snapshot (resuming a partial one), check
    /// it, pull its cursor's first page (a cursor of another database epoch is 410: refused), and
    /// install it with that page. Any refusal leaves the store as it was and the sync goes on
    /// with the paged pull; a network failure, a timeout or a refused login end the sync (the
    /// partial file stays, the next sync resumes it).
    func bootstrapFromSnapshot(pageSize: Int, window: SyncWindow, report: inout SyncReport, deadline: SyncDeadline,
                               progress: (@Sendable (SyncProgress) -> Void)?) async throws {
        let files = SnapshotFiles(storePath: store.path)
        guard try store.isEmptyForSnapshot() else {
            // A download a failed sync left before the store got its first record: of no use now.
            files.remove()
            return
        }
        var phases = SnapshotPhases()
        defer { report.snapshotPhases = phases.done }
        do {
            guard let (head, downloaded, fileDigest) = try await downloadSnapshot(files, window: window, deadline: deadline,
                                                                                  progress: progress) else {
                files.remove()
                report.snapshot = .unavailable
                return
            }
            phases.end("download")
            guard let digest = SHA256Digest.fromReprDigest(head.digest) else { throw SnapshotRefusal("no SHA-256 Repr-Digest") }
            let snapshot = try SnapshotFile.check(path: files.data, digest: digest, userID: try store.userID(),
                                                  schemaVersion: schemaVersion, fileDigest: fileDigest)
            // A window's snapshot names its window; one of other dates (or an older server's
            // whole-account file) would leave the device holding what it did not ask for.
            guard snapshot.window == window else {
                throw SnapshotRefusal("it holds \(snapshot.window), not \(window)")
            }
            phases.end("check")
            // Before installing: pull the first page after the snapshot's cursor. A cursor of
            // another history of the database (a restore, a new epoch) is 410, and then nothing
            // of the snapshot may be installed.
            let response = try await authorized("GET", "/api/v1/sync/pull", query: [
                URLQueryItem(name: "limit", value: String(pageSize)), URLQueryItem(name: "schemaVersion", value: String(schemaVersion)),
                URLQueryItem(name: "cursor", value: snapshot.cursor),
            ] + window.queryItems, deadline: deadline)
            if response.status == 410 { throw SnapshotRefusal("its cursor is of another history of the server's database (410)") }
            guard response.status == 200 else { throw Self.failure(response) }
            let page: DecodedPage
            do {
                page = try PageDecoder.decode(Array(response.body))
            } catch {
                throw SyncError.protocolError(String(describing: error))
            }
            phases.end("epoch_check")
            // The ranges' buffers, freed, stay in the C heap: handed back before the install's
            // page cache and index sorter take theirs, they do not add to the peak RSS.
            Self.returnFreedMemory()
            try store.installSnapshot(atPath: files.data, snapshot, phaseEnded: { phases.end($0) },
                                      whileOpen: hooks.snapshotInstalling)
            phases.end("install_commit")
            files.remove()
            report.snapshot = .installed(records: snapshot.recordCount, bytes: downloaded)
            report.fullPull = true
            let applied = try store.applyPullPage(page)
            report.pages += 1
            report.recordsPulled += applied.records
            phases.end("first_page")
            progress?(SyncProgress(phase: .pulling, operationsSent: 0, operationsTotal: 0, recordsPulled: report.recordsPulled,
                                   pages: report.pages))
        } catch let error as SyncError where error.keepsSnapshotDownload {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            files.remove()
            report.snapshot = .refused(String(describing: error))
        }
    }

    /// Downloads the snapshot to `files.data` in ranges of `snapshotRangeBytes` (`Range` +
    /// `If-Range`), each appended to the file as it arrives, so that a broken download (a lost
    /// connection, a killed process) resumes after the last range on disk; a file that changed
    /// on the server meanwhile comes whole (200) and starts over. Each range is an ordinary
    /// request (retries, timeouts, token refresh). Returns what the server said of the file, the
    /// bytes this call downloaded and the SHA-256 of the whole file on disk (hashed while it
    /// downloaded; what an earlier run left is read back), or nil when the server has none to
    /// give (404, or 429/5xx after retries).
    func downloadSnapshot(_ files: SnapshotFiles, window: SyncWindow = .whole, deadline: SyncDeadline,
                          progress: (@Sendable (SyncProgress) -> Void)?)
        async throws -> (head: SnapshotFiles.Head, bytes: Int64, digest: [UInt8])? {
        var restarts = 0
        var downloaded: Int64 = 0
        var hashed = RunningFileDigest()
        func restart(_ why: String) throws {
            files.remove()
            hashed.reset()
            restarts += 1
            guard restarts <= api.retry.maxAttempts else { throw SnapshotRefusal(why) }
        }
        while true {
            var known = files.readHead()
            var size = files.size
            if let head = known, let length = head.length, size == length {  // complete (an earlier run's too)
                return (head, downloaded, try await hashed.finish(path: files.data, length: length))
            }
            if known?.etag == nil || known?.length == nil || size == 0 || size > (known?.length ?? 0) {
                // Nothing that can be resumed safely (no ETag to make If-Range of).
                files.remove()
                known = nil
                size = 0
            }
            var headers = [
                "Accept": "application/vnd.sqlite3",
                // The digest and the ranges are then of the file itself (with gzip they would be
                // of the encoded copy: API.md "Sync: snapshot").
                "Accept-Encoding": "identity",
                "Range": "bytes=\(size)-\(size + Int64(snapshotRangeBytes) - 1)",
            ]
            if let etag = known?.etag { headers["If-Range"] = etag }
            let response = try await authorized("GET", "/api/v1/sync/snapshot",
                                                query: [URLQueryItem(name: "schemaVersion", value: String(schemaVersion))] + window.queryItems,
                                                headers: headers, deadline: deadline)
            switch response.status {
            case 200, 206:
                if let encoding = response.headers["content-encoding"], encoding.lowercased() != "identity" {
                    throw SnapshotRefusal("the answer is \(encoding)-encoded, though identity was asked for")
                }
                let digest = response.headers["repr-digest"]
                let etag = response.headers["etag"]
                var start: Int64 = 0
                var length = Int64(response.body.count)
                if response.status == 206 {
                    // `Content-Range: bytes START-END/LENGTH`
                    guard let range = response.headers["content-range"], range.hasPrefix("bytes "),
                          let dash = range.firstIndex(of: "-"), let slash = range.firstIndex(of: "/"),
                          let first = Int64(range[range.index(range.startIndex, offsetBy: 6)..<dash]),
                          let total = Int64(range[range.index(after: slash)...])
                    else { throw SnapshotRefusal("a 206 without a usable Content-Range") }
                    start = first
                    length = total
                }
                if let known, start > 0 {
                    // The next range of the file we hold the start of, or else start over.
                    guard start == size, length == known.length, (digest ?? known.digest) == known.digest, (etag ?? known.etag) == known.etag else {
                        try restart("the snapshot's ranges do not continue the partial file")
                        continue
                    }
                } else {
                    guard start == 0 else {
                        try restart("the server sent a range the client did not ask for")
                        continue
                    }
                    guard let digest, SHA256Digest.fromReprDigest(digest) != nil else {
                        throw SnapshotRefusal("the answer has no SHA-256 Repr-Digest")
                    }
                    try files.start(SnapshotFiles.Head(etag: etag, digest: digest, length: length))
                }
                try files.append(response.body, at: start)
                try await hashed.add(response.body, at: start, of: files.data)
                downloaded += Int64(response.body.count)
                let written = start + Int64(response.body.count)
                hooks.snapshotBytesWritten?(written)
                progress?(SyncProgress(phase: .downloading, operationsSent: 0, operationsTotal: 0, recordsPulled: 0, pages: 0,
                                       bytesReceived: written, bytesTotal: length))
                if response.body.isEmpty && written < length { try restart("an empty range before the end of the snapshot") }
            case 404, 429, 502, 503, 504:
                // No route, or no file now (an account too large to build within the server's
                // budget answers 503 with a long Retry-After): the paged pull works for any size.
                return nil
            case 416:
                try restart("the server has no such range (416)")
            default:
                throw Self.failure(response)
            }
        }
    }
}

extension TodoSyncClient {
    /// Hands memory the C heap holds free back to the system: glibc keeps freed blocks of the
    /// size of a range (its mmap threshold grows to the size of the first one freed), tens of
    /// megabytes after a download. `malloc_trim` is in <malloc.h>, which Swift's Glibc module
    /// leaves out: looked up by name. Elsewhere nothing.
    static func returnFreedMemory() {
        #if canImport(Glibc)
        typealias Trim = @convention(c) (Int) -> Int32
        if let trim = dlsym(nil, "malloc_trim") { _ = unsafeBitCast(trim, to: Trim.self)(0) }
        #endif
    }
}

/// Where a snapshot first sync spends its time (`SyncReport.snapshotPhases`), on the system's
/// monotonic clock.
struct SnapshotPhases {
    private(set) var done: [SyncPhaseTime] = []
    private var since = SystemSyncClock().now

    /// Ends the phase `name` (it began where the previous one ended).
    mutating func end(_ name: String) {
        let now = SystemSyncClock().now
        done.append(SyncPhaseTime(name: name, seconds: now - since))
        since = now
    }
}

extension SyncError {
    /// A failure that ends the sync and keeps a partial snapshot download for the next one
    /// (the network, the clock, the login); any other makes the first sync a paged pull.
    var keepsSnapshotDownload: Bool {
        switch self {
        case .offline, .unavailable, .timedOut, .unauthorized, .notLoggedIn, .alreadyRunning: return true
        default: return false
        }
    }
}
