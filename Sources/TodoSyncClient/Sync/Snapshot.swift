import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What became of the snapshot a first sync asked for (API.md "Sync: snapshot").
public enum SnapshotOutcome: Sendable, Equatable {
    /// Installed (`records` rows; `bytes` downloaded by this sync, 0 when a download an earlier
    /// run finished was installed), then pulled from its cursor.
    case installed(records: Int, bytes: Int64)
    /// The server has no snapshot route (404): the paged pull did the first sync.
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

    func remove() {
        unlink(data)
        unlink(head)
    }
}

/// Writes a snapshot answer to the partial file as it arrives: a 200 starts it over, a 206 must
/// continue it exactly where it ends; any other answer's body is kept (small) for the error.
final class SnapshotSink: HTTPBodySink, @unchecked Sendable {
    /// A 206 that does not continue the partial file (another representation, another offset).
    struct Mismatch: Error {}

    private let lock = NSLock()
    private let files: SnapshotFiles
    private let resumeFrom: Int64
    private let known: SnapshotFiles.Head?
    private let onBytes: @Sendable (Int64, Int64?) -> Void
    private var handle: FileHandle?
    private(set) var status = 0
    private(set) var headers: [String: String] = [:]
    private(set) var received: Int64 = 0
    private(set) var total: Int64?
    private(set) var errorBody = Data()

    init(files: SnapshotFiles, resumeFrom: Int64, known: SnapshotFiles.Head?, onBytes: @escaping @Sendable (Int64, Int64?) -> Void) {
        self.files = files
        self.resumeFrom = resumeFrom
        self.known = known
        self.onBytes = onBytes
    }

    deinit { try? handle?.close() }

    func begin(_ response: HTTPURLResponse) throws {
        lock.lock()
        defer { lock.unlock() }
        status = response.statusCode
        for (name, value) in response.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        switch status {
        case 200:
            guard let digest = headers["repr-digest"], SHA256Digest.fromReprDigest(digest) != nil else {
                throw SnapshotRefusal("the answer has no SHA-256 Repr-Digest")
            }
            if let encoding = headers["content-encoding"], encoding.lowercased() != "identity" {
                throw SnapshotRefusal("the answer is \(encoding)-encoded, though identity was asked for")
            }
            total = headers["content-length"].flatMap { Int64($0) }
            try files.start(SnapshotFiles.Head(etag: headers["etag"], digest: digest, length: total))
            handle = FileHandle(forWritingAtPath: files.data)
        case 206:
            // `Content-Range: bytes START-END/LENGTH`: the rest of the file we hold the start of.
            guard let known, let range = headers["content-range"], range.hasPrefix("bytes "),
                  let dash = range.firstIndex(of: "-"), let slash = range.firstIndex(of: "/"),
                  Int64(range[range.index(range.startIndex, offsetBy: 6)..<dash]) == resumeFrom,
                  headers["repr-digest"].map({ $0 == known.digest }) ?? true,
                  headers["etag"].map({ $0 == known.etag }) ?? true
            else { throw Mismatch() }
            total = Int64(range[range.index(after: slash)...]) ?? known.length
            handle = FileHandle(forWritingAtPath: files.data)
            guard try handle?.seekToEnd() == UInt64(resumeFrom) else { throw Mismatch() }
            received = resumeFrom
        default:
            break
        }
        if handle == nil && (status == 200 || status == 206) { throw CocoaError(.fileWriteUnknown) }
    }

    func write(_ chunk: Data) throws {
        lock.lock()
        guard let handle else {
            if errorBody.count < 16_384 { errorBody.append(chunk) }
            lock.unlock()
            return
        }
        do {
            try handle.write(contentsOf: chunk)
        } catch {
            lock.unlock()
            throw error
        }
        received += Int64(chunk.count)
        let (received, total) = (self.received, self.total)
        lock.unlock()
        onBytes(received, total)
    }

    func close() {
        lock.lock()
        try? handle?.close()
        handle = nil
        lock.unlock()
    }

    var response: APIResponse {
        lock.lock()
        defer { lock.unlock() }
        return APIResponse(status: status, headers: headers, body: errorBody)
    }
}

extension TodoSyncClient {
    /// The first sync of an empty store: download the snapshot (resuming a partial one), check
    /// it, pull its cursor's first page (a cursor of another database epoch is 410: refused), and
    /// install it with that page. Any refusal leaves the store as it was and the sync goes on
    /// with the paged pull; a network failure, a timeout or a refused login end the sync (the
    /// partial file stays, the next sync resumes it).
    func bootstrapFromSnapshot(pageSize: Int, report: inout SyncReport, deadline: SyncDeadline,
                               progress: (@Sendable (SyncProgress) -> Void)?) async throws {
        let files = SnapshotFiles(storePath: store.path)
        guard try store.isEmptyForSnapshot() else {
            // A download a failed sync left before the store got its first record: of no use now.
            files.remove()
            return
        }
        do {
            let before = files.size
            guard let head = try await downloadSnapshot(files, deadline: deadline, progress: progress) else {
                files.remove()
                report.snapshot = .unavailable
                return
            }
            let downloaded = max(0, files.size - before)
            guard let digest = SHA256Digest.fromReprDigest(head.digest) else { throw SnapshotRefusal("no SHA-256 Repr-Digest") }
            let snapshot = try SnapshotFile.check(path: files.data, digest: digest, userID: try store.userID(),
                                                  schemaVersion: schemaVersion)
            // Before installing: pull the first page after the snapshot's cursor. A cursor of
            // another history of the database (a restore, a new epoch) is 410, and then nothing
            // of the snapshot may be installed.
            let response = try await authorized("GET", "/api/v1/sync/pull", query: [
                URLQueryItem(name: "limit", value: String(pageSize)), URLQueryItem(name: "schemaVersion", value: String(schemaVersion)),
                URLQueryItem(name: "cursor", value: snapshot.cursor),
            ], deadline: deadline)
            if response.status == 410 { throw SnapshotRefusal("its cursor is of another history of the server's database (410)") }
            guard response.status == 200 else { throw Self.failure(response) }
            let page: DecodedPage
            do {
                page = try PageDecoder.decode(Array(response.body))
            } catch {
                throw SyncError.protocolError(String(describing: error))
            }
            try store.installSnapshot(atPath: files.data, snapshot, whileOpen: hooks.snapshotInstalling)
            files.remove()
            report.snapshot = .installed(records: snapshot.recordCount, bytes: downloaded)
            report.fullPull = true
            let applied = try store.applyPullPage(page)
            report.pages += 1
            report.recordsPulled += applied.records
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

    /// Downloads the snapshot to `files.data`, resuming what is there (`Range` + `If-Range`, so
    /// a file that changed on the server starts over); retries broken downloads like any request.
    /// Returns what the server said of the file, or nil when it has no snapshot route (404).
    func downloadSnapshot(_ files: SnapshotFiles, deadline: SyncDeadline,
                          progress: (@Sendable (SyncProgress) -> Void)?) async throws -> SnapshotFiles.Head? {
        var attempt = 0
        var refreshed = false
        while true {
            attempt += 1
            var known = files.readHead()
            var size = files.size
            if let head = known, let length = head.length, size == length { return head }  // an earlier run finished it
            if known == nil || known?.etag == nil || (known?.length).map({ size > $0 }) == true || size == 0 {
                // Nothing that can be resumed safely (no ETag to make If-Range of).
                files.remove()
                known = nil
                size = 0
            }
            guard let token = try store.token() else { throw SyncError.notLoggedIn }
            var components = URLComponents(url: api.baseURL.appendingPathComponent("/api/v1/sync/snapshot"), resolvingAgainstBaseURL: false)!
            components.queryItems = [URLQueryItem(name: "schemaVersion", value: String(schemaVersion))]
            var request = URLRequest(url: components.url!)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("application/vnd.sqlite3", forHTTPHeaderField: "Accept")
            // The digest and the ranges are then of the file itself (API.md: with gzip they
            // would be of the encoded copy).
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
            if let known, let etag = known.etag, size > 0 {
                request.setValue("bytes=\(size)-", forHTTPHeaderField: "Range")
                request.setValue(etag, forHTTPHeaderField: "If-Range")
            }
            request.timeoutInterval = api.timeouts.request
            let hook = hooks.snapshotBytesWritten
            let sink = SnapshotSink(files: files, resumeFrom: size, known: known) { received, total in
                hook?(received)
                progress?(SyncProgress(phase: .downloading, operationsSent: 0, operationsTotal: 0, recordsPulled: 0, pages: 0,
                                       bytesReceived: received, bytesTotal: total))
            }
            do {
                try await streamSnapshot(request, into: sink, deadline: deadline)
                sink.close()
            } catch let error as SyncError {
                throw error
            } catch let refusal as SnapshotRefusal {
                throw refusal
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                sink.close()
                if error is SnapshotSink.Mismatch { files.remove() }
                guard attempt < api.retry.maxAttempts else { throw SyncError.offline(APIClient.describe(error)) }
                try await api.wait(api.retry.delay(afterAttempt: attempt, retryAfter: nil), before: deadline)
                continue
            }
            let response = sink.response
            switch response.status {
            case 200, 206:
                if let total = sink.total, sink.received != total {
                    // The connection ended early: resume.
                    guard attempt < api.retry.maxAttempts else { throw SyncError.offline("the snapshot download ended early") }
                    try await api.wait(api.retry.delay(afterAttempt: attempt, retryAfter: nil), before: deadline)
                    continue
                }
                guard let head = files.readHead() else { throw SnapshotRefusal("the download's head was lost") }
                return head
            case 404:
                return nil
            case 401 where !refreshed:
                refreshed = true
                guard let tokenRefresh, let fresh = try await tokenRefresh() else { throw SyncError.unauthorized }
                try store.setToken(fresh)
            case 416 where attempt < api.retry.maxAttempts:
                files.remove()  // the partial file is longer than what the server has now
            case let status where [429, 502, 503, 504].contains(status) && attempt < api.retry.maxAttempts:
                let retryAfter = response.headers["retry-after"].flatMap(Double.init)
                guard (retryAfter ?? 0) <= api.retry.maxDelay else { throw Self.failure(response) }
                try await api.wait(api.retry.delay(afterAttempt: attempt, retryAfter: retryAfter), before: deadline)
            default:
                throw Self.failure(response)
            }
        }
    }

    /// One streamed request, bounded by what is left of the sync's time.
    private func streamSnapshot(_ request: URLRequest, into sink: SnapshotSink, deadline: SyncDeadline) async throws {
        let remaining = deadline.at - api.clock.now
        guard remaining > 0 else { throw SyncError.timedOut(.sync, seconds: deadline.seconds, queued: nil) }
        let transport = api.transport
        try await withThrowingTaskGroup(of: Bool.self) { group in
            group.addTask {
                try await transport.stream(request, into: sink)
                return true
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(remaining * 1e9))
                return false
            }
            let finished = try await group.next() ?? false
            group.cancelAll()
            if !finished { throw SyncError.timedOut(.sync, seconds: deadline.seconds, queued: nil) }
        }
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
