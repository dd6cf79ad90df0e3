import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Progress of a sync, reported as it goes.
public struct SyncProgress: Sendable, Equatable {
    /// `downloading`: a new device's snapshot (`bytesReceived` of `bytesTotal`).
    public enum Phase: String, Sendable { case downloading, pushing, pulling }
    public var phase: Phase
    /// Operations sent so far, of those queued when the sync began.
    public var operationsSent: Int
    public var operationsTotal: Int
    /// Records (and tombstones) applied from pull pages so far.
    public var recordsPulled: Int
    /// Pull pages applied so far.
    public var pages: Int
    /// The number of records the pull will bring, when known (the contract does not say).
    public var recordsTotal: Int?
    /// Bytes of the snapshot received so far, and its `Content-Length` (nil when not sent).
    public var bytesReceived: Int64 = 0
    public var bytesTotal: Int64?
}

/// What a sync did.
public struct SyncReport: Sendable, Equatable {
    public var operationsSent = 0
    public var results: [OperationStatus: Int] = [:]
    public var recordsPulled = 0
    public var pages = 0
    /// A full pull happened (first sync, or a resync after 410 `cursor_expired`).
    public var fullPull = false
    public var resyncedAfterExpiry = false
    /// The records an incremental pull brought, in page order: at most `changesKept` (a full
    /// pull's records are counted, not listed).
    public var changes: [PulledChange] = []
    public static let changesKept = 1000
    /// What became of the snapshot of a first sync (nil: the store was not empty, no snapshot tried).
    public var snapshot: SnapshotOutcome?
    /// How long each step of a snapshot first sync took, in order (empty when none was tried).
    public var snapshotPhases: [SyncPhaseTime] = []
    /// The window this sync pulled (`SyncWindow.whole` for the whole account).
    public var window = SyncWindow.whole
    /// The window differed from the one the cursor belonged to: the new window was pulled
    /// without a cursor, and what fell outside it was forgotten.
    public var windowChanged = false
    /// Bytes of pull answers received (bodies as decoded, after any gzip; a snapshot not counted).
    public var bytesPulled = 0
    /// Records of a window pull's `left` (still on the server, outside the window now: forgotten
    /// unless a change of theirs is on its way); counted in `recordsPulled` too.
    public var recordsLeft = 0
}

/// One step of a sync and its duration in seconds (for `todosync-client sync --timing`).
public struct SyncPhaseTime: Sendable, Equatable {
    public var name: String
    public var seconds: Double
}

/// One record (or tombstone) a pull brought: what `todosync-client watch` prints.
public struct PulledChange: Sendable, Equatable {
    public enum Kind: String, Sendable { case tag, todo, dailyStat }
    public var kind: Kind
    public var id: Int64?
    public var version: Int64?
    public var deleted: Bool
    /// In a window pull's `left`: outside the window now, forgotten by the device.
    public var left = false
    /// A todo's title, a tag's name, a stat's date (nil for a tombstone).
    public var label: String?
    /// The server's time of the change: `updatedAt`, or `deletedAt` for a tombstone.
    public var changedAt: String?

    init(_ kind: Kind, _ record: ServerRecord, deleted: Bool, left: Bool = false) {
        self.kind = kind
        id = record.id
        version = record.version
        self.deleted = deleted
        self.left = left
        label = deleted ? nil : (record.title ?? record.name ?? record.date)
        changedAt = deleted ? record.deletedAt : record.updatedAt
    }

    static func list(_ page: DecodedPage) -> [PulledChange] {
        let changed = page.tags.map { PulledChange(.tag, $0, deleted: false) }
            + page.tagTombstones.map { PulledChange(.tag, $0, deleted: true) }
            + page.todos.map { PulledChange(.todo, $0, deleted: false) }
            + page.todoTombstones.map { PulledChange(.todo, $0, deleted: true) }
            + page.stats.map { PulledChange(.dailyStat, $0, deleted: false) }
            + page.statTombstones.map { PulledChange(.dailyStat, $0, deleted: true) }
        let left = page.todoLeft.map { PulledChange(.todo, $0, deleted: false, left: true) }
            + page.statLeft.map { PulledChange(.dailyStat, $0, deleted: false, left: true) }
        return changed + left
    }
}

/// Test and diagnostics hooks at the points where a crash matters most.
public struct SyncHooks: Sendable {
    /// After a push response arrived, before its results are stored (batch index from 1).
    public var pushResponseReceived: (@Sendable (Int) -> Void)?
    /// Inside a pull page's transaction, after its records are written, before it commits.
    public var pageWritten: (@Sendable (Int) -> Void)?
    /// After a pull page and its cursor are committed.
    public var pageCommitted: (@Sendable (Int) -> Void)?
    /// After a range of a snapshot download is on disk (bytes of the partial file so far).
    public var snapshotBytesWritten: (@Sendable (Int64) -> Void)?
    /// Inside a snapshot's install transaction, after its rows are written, before it commits.
    public var snapshotInstalling: (@Sendable () -> Void)?

    public init(pushResponseReceived: (@Sendable (Int) -> Void)? = nil, pageWritten: (@Sendable (Int) -> Void)? = nil,
                pageCommitted: (@Sendable (Int) -> Void)? = nil, snapshotBytesWritten: (@Sendable (Int64) -> Void)? = nil,
                snapshotInstalling: (@Sendable () -> Void)? = nil) {
        self.pushResponseReceived = pushResponseReceived
        self.pageWritten = pageWritten
        self.pageCommitted = pageCommitted
        self.snapshotBytesWritten = snapshotBytesWritten
        self.snapshotInstalling = snapshotInstalling
    }
}

/// Offline-first sync for one account: the local store plus the protocol.
///
/// Local reads and writes go to `store` and never wait for the network. `sync()` pushes the
/// outbox (batches of ≤ 500, parents first, each operation's opId stored before it is sent),
/// applies every result, then pulls every page, each page with its cursor in one transaction.
/// It is safe to kill the process at any instant: the next `sync()` resends what was in flight
/// with the same opIds and resumes the pull from the last stored cursor.
///
/// One sync runs at a time per store file: concurrent `sync()` calls in one process (through
/// any client on that file) share one follow-up sync, and a sync in another process on the same
/// file makes this one fail at once with `SyncError.alreadyRunning`. Every request and every
/// sync is bounded in time (`SyncTimeouts`). Every setting: docs/CLIENT-SETTINGS.md.
///
/// Every sync request names `schemaVersion` (API.md "Schema versions"): the client gets and
/// sends exactly that version's fields. When the server answers 426 `upgrade_required`, sync
/// stops (`SyncError.upgradeRequired`, `LocalStore.Status.upgradeRequired`) until a client of a
/// version the server serves syncs the store; nothing local is touched.
public final class TodoSyncClient: Sendable {
    public let store: LocalStore
    /// The record shapes this client understands (`SchemaVersion.current` unless a test or an
    /// old build says otherwise).
    public let schemaVersion: Int
    let api: APIClient
    let tokenRefresh: (@Sendable () async throws -> String?)?
    let hooks: SyncHooks
    /// Whether the first sync of an empty store tries `GET /sync/snapshot` (docs/CLIENT.md).
    let useSnapshot: Bool
    /// Bytes asked for per snapshot request (`Range`): what a broken download can lose.
    /// The snapshot download's range: 16 MiB. Against 4 MiB it cut a cached 176 MB download from
    /// 0.77-0.89 s to 0.47-0.69 s (fewer requests) for about 30 MB more peak memory (two ranges).
    public static let defaultSnapshotRangeBytes = 16 << 20
    let snapshotRangeBytes: Int
    /// The window set by the app (nil: the one the store remembers).
    let window: WindowSetting?
    /// Today's date, for a window of the last N days.
    let today: @Sendable () -> Day

    /// - Parameters:
    ///   - retry: backoff for network errors and 429/502/503/504 answers.
    ///   - timeouts: how long one request, and one whole sync, may take.
    ///   - clock: the clock of backoff waits and of the sync's bound (tests pass a fake one).
    ///   - tokenRefresh: called when the server answers 401; return a new token (e.g. by logging
    ///     in again) or nil to give up. The outbox is kept either way.
    ///   - schemaVersion: the record shapes this client speaks (tests run version-1 clients).
    ///   - useSnapshot: the first sync of an empty store starts from the server's snapshot
    ///     (false: always the paged pull).
    ///   - snapshotRangeBytes: the snapshot is downloaded in ranges of this size, each written to
    ///     disk as it arrives (a broken download resumes after the last one).
    ///   - window: the part of the account this device holds (docs/CLIENT.md "Windows and
    ///     purge"); remembered by the store at the next sync. nil keeps the remembered one.
    ///   - today: today's date in the device's time zone (tests move it).
    public init(store: LocalStore, baseURL: URL, transport: any HTTPTransport = URLSessionTransport(),
                retry: RetryPolicy = RetryPolicy(), timeouts: SyncTimeouts = SyncTimeouts(),
                clock: any SyncClock = SystemSyncClock(), tokenRefresh: (@Sendable () async throws -> String?)? = nil,
                hooks: SyncHooks = SyncHooks(), schemaVersion: Int = SchemaVersion.current, useSnapshot: Bool = true,
                snapshotRangeBytes: Int = TodoSyncClient.defaultSnapshotRangeBytes, window: WindowSetting? = nil,
                today: @escaping @Sendable () -> Day = { Day.today() }) {
        self.window = window
        self.today = today
        self.useSnapshot = useSnapshot
        self.snapshotRangeBytes = max(1, snapshotRangeBytes)
        self.store = store
        self.schemaVersion = schemaVersion
        self.api = APIClient(baseURL: baseURL, transport: transport, retry: retry, timeouts: timeouts, clock: clock)
        self.tokenRefresh = tokenRefresh
        self.hooks = hooks
    }

    // MARK: Account

    /// Creates an account and logs this store in to it.
    public func register(email: String, password: String) async throws {
        try await authenticate("/api/v1/auth/register", email: email, password: password)
    }

    /// Logs this store in. A store holds one account: another account's login is refused.
    public func login(email: String, password: String) async throws {
        try await authenticate("/api/v1/auth/login", email: email, password: password)
    }

    /// Ends the session on the server and forgets the token (local data and the outbox stay).
    public func logout() async throws {
        if let token = try store.token() {
            _ = try? await api.send("POST", "/api/v1/auth/logout", token: token)
        }
        try store.setToken(nil)
    }

    private func authenticate(_ path: String, email: String, password: String) async throws {
        let response = try await api.send("POST", path, body: Self.jsonObject(["email": email, "password": password]), token: nil)
        guard response.status == 200 || response.status == 201 else { throw response.error }
        let body = try response.json()
        guard let token = body["token"]?.stringValue, let user = body["user"]?.objectValue,
              let userID = user["id"]?.int64Value, let canonical = user["email"]?.stringValue else {
            throw SyncError.protocolError("auth answer without token and user")
        }
        try store.signIn(userID: userID, email: canonical, token: token)
    }

    // MARK: Sync

    /// Pushes the outbox, then pulls everything new.
    ///
    /// Called while a sync of the same store file is in flight in this process, it waits for
    /// the one follow-up sync that starts when the current one ends, shared by every caller that
    /// arrives meanwhile with the same `policy` and `pageSize` (each gets its report and its
    /// progress). Throws `SyncError.alreadyRunning` when another process is syncing the file,
    /// and `SyncError.timedOut` when the server does not answer within `SyncTimeouts.request`
    /// or the sync does not end within `SyncTimeouts.sync`. The outbox keeps every change on
    /// every error.
    @discardableResult
    public func sync(policy: ConflictStrategy = .merge, pageSize: Int = 1000,
                     progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws -> SyncReport {
        try await store.syncRunner.run(SyncRunner.Settings(policy: policy, pageSize: pageSize), progress: progress) { progress in
            try await self.runSync(policy: policy, pageSize: pageSize, progress: progress)
        }
    }

    private func runSync(policy: ConflictStrategy, pageSize: Int,
                         progress: @escaping @Sendable (SyncProgress) -> Void) async throws -> SyncReport {
        let lock = try SyncFileLock(storePath: store.path)
        defer { lock.release() }
        let deadline = SyncDeadline(clock: api.clock, seconds: api.timeouts.sync)
        var report = SyncReport()
        do {
            if let required = try store.upgradeRequired() {
                // Stopped by an earlier 426: only a client the server serves may sync again.
                guard schemaVersion >= required.minimum else { throw SyncError.upgradeRequired(required) }
                try store.setUpgradeRequired(nil)
            }
            // The window is resolved once: every request of this sync names the same dates. The
            // pull's window may contain the held one (a window of the last N days a day later).
            if let window { try store.setWindowSetting(window) }
            let (window, pullWindow) = try store.syncWindows(today: today())
            report.window = window
            report.windowChanged = try store.enterWindow(pullWindow)
            // A new device (an empty store) starts from the server's snapshot when it can.
            if useSnapshot {
                try await bootstrapFromSnapshot(pageSize: pageSize, window: pullWindow, report: &report, deadline: deadline, progress: progress)
            }
            try await push(policy: policy, report: &report, deadline: deadline, progress: progress)
            let resynced = try await pull(pageSize: pageSize, window: pullWindow, holding: window, report: &report, deadline: deadline,
                                          progress: progress)
            let stillPending = try store.pendingCount()
            if resynced && stillPending > 0 {
                // After a resync the device's unsynced changes go out, then their results come back.
                try await push(policy: policy, report: &report, deadline: deadline, progress: progress)
                _ = try await pull(pageSize: pageSize, window: pullWindow, holding: window, report: &report, deadline: deadline,
                                   progress: progress)
            }
            try store.recordSync(error: nil)
            return report
        } catch SyncError.upgradeRequired(let required) {
            try? store.setUpgradeRequired(required)
            try? store.recordSync(error: required.description)
            throw SyncError.upgradeRequired(required)
        } catch SyncError.timedOut(let kind, let seconds, _) {
            let error = SyncError.timedOut(kind, seconds: seconds, queued: try? store.pendingCount())
            try? store.recordSync(error: String(describing: error))
            throw error
        } catch {
            try? store.recordSync(error: String(describing: error))
            throw error
        }
    }

    private func push(policy: ConflictStrategy, report: inout SyncReport, deadline: SyncDeadline,
                      progress: (@Sendable (SyncProgress) -> Void)?) async throws {
        let deviceID = try store.deviceID
        let total = try store.pendingCount()
        var batchIndex = 0
        while let batch = try store.nextPushBatch(policy: policy, schemaVersion: schemaVersion) {
            batchIndex += 1
            var body = Data()
            body.append(contentsOf: Array(#"{"deviceId":"#.utf8))
            body.append(contentsOf: JSONText.encode(.string(deviceID)).utf8)
            body.append(contentsOf: Array(#","schemaVersion":"#.utf8))
            body.append(contentsOf: String(schemaVersion).utf8)
            body.append(contentsOf: Array(#","conflictPolicy":"#.utf8))
            body.append(contentsOf: JSONText.encode(.string(batch.policy.wireName)).utf8)
            body.append(contentsOf: Array(#","operations":["#.utf8))
            for (index, op) in batch.operations.enumerated() {
                if index > 0 { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: op.payload.utf8)
            }
            body.append(contentsOf: Array("]}".utf8))
            let response = try await authorized("POST", "/api/v1/sync/push", body: body, deadline: deadline)
            guard response.status == 200 else {
                let failure = Self.failure(response)
                // Nothing was applied: the queue goes back to how it was before this sync.
                if case .upgradeRequired = failure { try store.thaw(batch.frozenNow) }
                throw failure
            }
            guard let results = try response.json()["results"]?.arrayValue, results.count == batch.operations.count else {
                throw SyncError.protocolError("push answer without one result per operation")
            }
            hooks.pushResponseReceived?(batchIndex)
            let statuses = try store.applyPushResults(results, policy: batch.policy)
            guard !statuses.isEmpty else { throw SyncError.protocolError("push results matched no sent operation") }
            report.operationsSent += batch.operations.count
            for status in statuses { report.results[status, default: 0] += 1 }
            progress?(SyncProgress(phase: .pushing, operationsSent: report.operationsSent, operationsTotal: max(total, report.operationsSent),
                                   recordsPulled: report.recordsPulled, pages: report.pages))
        }
    }

    /// Pulls every page of `window`, keeping what lies in `held` (inside `window`; the rest of
    /// each page counts as `left`); returns true when the pull had to start over after 410.
    private func pull(pageSize: Int, window: SyncWindow, holding held: SyncWindow, report: inout SyncReport, deadline: SyncDeadline,
                      progress: (@Sendable (SyncProgress) -> Void)?) async throws -> Bool {
        let deviceID = try store.deviceID
        var resynced = false
        if try store.pullsAnew(atSchemaVersion: schemaVersion) {
            try store.restartFullPull()
        } else if try store.pullCursor() == nil {
            try store.beginFullPull()
        }
        var full = try store.isFullPullActive()
        report.fullPull = report.fullPull || full

        func fetch(cursor: String?, full: Bool) -> Task<APIResponse, Error> {
            var query = [URLQueryItem(name: "limit", value: String(pageSize)),
                         URLQueryItem(name: "schemaVersion", value: String(schemaVersion))] + window.queryItems
            if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
            // A full pull must bring this device's own records too: no echo suppression.
            if !full { query.append(URLQueryItem(name: "deviceId", value: deviceID)) }
            return Task { try await self.authorized("GET", "/api/v1/sync/pull", query: query, deadline: deadline) }
        }

        // The next page is fetched while the current one is written to the store.
        var next = fetch(cursor: try store.pullCursor(), full: full)
        while true {
            let response: APIResponse
            do {
                response = try await next.value
            } catch {
                throw error
            }
            if response.status == 410 {
                // The server purged tombstones this device never saw, or the cursor is from
                // another history (a restore): start again from nothing, keeping the outbox.
                try store.restartFullPull()
                full = true
                resynced = true
                report.fullPull = true
                report.resyncedAfterExpiry = true
                next = fetch(cursor: nil, full: true)
                continue
            }
            guard response.status == 200 else { throw Self.failure(response) }
            report.bytesPulled += response.body.count
            var page: DecodedPage
            do {
                page = try PageDecoder.decode(Array(response.body))
            } catch {
                throw SyncError.protocolError(String(describing: error))
            }
            if held != window { page = page.keeping(held) }
            report.recordsLeft += page.todoLeft.count + page.statLeft.count
            let hasMore = page.hasMore ?? false
            if hasMore, let cursor = page.cursor { next = fetch(cursor: cursor, full: full) }
            let pageNumber = report.pages + 1
            let applied: AppliedPage
            do {
                var whileOpen: (@Sendable () throws -> Void)?
                if let hook = hooks.pageWritten { whileOpen = { hook(pageNumber) } }
                applied = try store.applyPullPage(page, whileOpen: whileOpen)
            } catch {
                if hasMore { next.cancel() }
                throw error
            }
            report.pages += 1
            report.recordsPulled += applied.records
            if !full && report.changes.count < SyncReport.changesKept {
                report.changes += PulledChange.list(page).prefix(SyncReport.changesKept - report.changes.count)
            }
            hooks.pageCommitted?(report.pages)
            progress?(SyncProgress(phase: .pulling, operationsSent: report.operationsSent, operationsTotal: report.operationsSent,
                                   recordsPulled: report.recordsPulled, pages: report.pages))
            if !applied.hasMore { break }
        }
        if full { try store.finishFullPull() }
        // Complete: what this device moved out of the window itself (acknowledged now) goes.
        try store.settleWindow(held)
        return resynced
    }

    /// Sends with the stored token; on 401 asks the app for a new one, once. When the token is
    /// refused for good the store is signed out (`LocalStore.signOut(refused:)`: the token is
    /// forgotten, local data and the outbox stay) and the call throws `SyncError.unauthorized`.
    /// A 401 for a wrong password (`APIResponse.wrongPasswordField`) is an answer, not a refusal.
    /// `file` and `resend`: as `APIClient.send`.
    func authorized(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil,
                    headers: [String: String] = [:], deadline: SyncDeadline, into file: URL? = nil, resend: Bool = true) async throws -> APIResponse {
        guard let token = try store.token() else { throw try store.hasAccount ? SyncError.unauthorized : SyncError.notLoggedIn }
        let response = try await api.send(method, path, query: query, body: body, headers: headers, token: token, deadline: deadline,
                                          into: file, resend: resend)
        guard response.status == 401, response.wrongPasswordField == nil else { return response }
        guard let tokenRefresh, let fresh = try await tokenRefresh() else {
            try store.signOut(refused: token)
            throw SyncError.unauthorized
        }
        try store.setToken(fresh)
        let retried = try await api.send(method, path, query: query, body: body, headers: headers, token: fresh, deadline: deadline,
                                         into: file, resend: resend)
        if retried.status == 401, retried.wrongPasswordField == nil {
            try store.signOut(refused: fresh)
            throw SyncError.unauthorized
        }
        return retried
    }

    /// A request body: one JSON object of string members.
    static func jsonObject(_ members: KeyValuePairs<StaticString, String>) -> Data {
        var writer = JSONWriter()
        writer.beginObject()
        for (name, value) in members { writer.field(name, value) }
        writer.endObject()
        return Data(writer.bytes)
    }

    static func failure(_ response: APIResponse) -> SyncError {
        switch response.status {
        case 401: return response.wrongPasswordField.map { .wrongPassword(field: $0) } ?? .unauthorized
        case 426:
            let error = (try? response.json())?["error"]?.objectValue
            guard let minimum = error?["minimum"]?.int64Value, let current = error?["current"]?.int64Value else { return response.error }
            return .upgradeRequired(UpgradeRequired(minimum: Int(minimum), current: Int(current)))
        case 429, 502, 503, 504:
            return .unavailable(status: response.status, retryAfter: response.headers["retry-after"].flatMap(Double.init))
        default: return response.error
        }
    }
}
