import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Progress of a sync, reported as it goes.
public struct SyncProgress: Sendable, Equatable {
    public enum Phase: String, Sendable { case pushing, pulling }
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
}

/// Test and diagnostics hooks at the points where a crash matters most.
public struct SyncHooks: Sendable {
    /// After a push response arrived, before its results are stored (batch index from 1).
    public var pushResponseReceived: (@Sendable (Int) -> Void)?
    /// Inside a pull page's transaction, after its records are written, before it commits.
    public var pageWritten: (@Sendable (Int) -> Void)?
    /// After a pull page and its cursor are committed.
    public var pageCommitted: (@Sendable (Int) -> Void)?

    public init(pushResponseReceived: (@Sendable (Int) -> Void)? = nil, pageWritten: (@Sendable (Int) -> Void)? = nil,
                pageCommitted: (@Sendable (Int) -> Void)? = nil) {
        self.pushResponseReceived = pushResponseReceived
        self.pageWritten = pageWritten
        self.pageCommitted = pageCommitted
    }
}

/// Offline-first sync for one account: the local store plus the protocol.
///
/// Local reads and writes go to `store` and never wait for the network. `sync()` pushes the
/// outbox (batches of ≤ 500, parents first, each operation's opId stored before it is sent),
/// applies every result, then pulls every page, each page with its cursor in one transaction.
/// It is safe to kill the process at any instant: the next `sync()` resends what was in flight
/// with the same opIds and resumes the pull from the last stored cursor.
public final class TodoSyncClient: Sendable {
    public let store: LocalStore
    let api: APIClient
    let tokenRefresh: (@Sendable () async throws -> String?)?
    let hooks: SyncHooks
    private let gate = SyncGate()

    /// - Parameters:
    ///   - tokenRefresh: called when the server answers 401; return a new token (e.g. by logging
    ///     in again) or nil to give up. The outbox is kept either way.
    public init(store: LocalStore, baseURL: URL, transport: any HTTPTransport = URLSessionTransport(),
                retry: RetryPolicy = RetryPolicy(), tokenRefresh: (@Sendable () async throws -> String?)? = nil,
                hooks: SyncHooks = SyncHooks()) {
        self.store = store
        self.api = APIClient(baseURL: baseURL, transport: transport, retry: retry)
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
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("email", email)
        writer.field("password", password)
        writer.endObject()
        let response = try await api.send("POST", path, body: Data(writer.bytes), token: nil)
        guard response.status == 200 || response.status == 201 else { throw response.error }
        let body = try response.json()
        guard let token = body["token"]?.stringValue, let user = body["user"]?.objectValue,
              let userID = user["id"]?.int64Value, let canonical = user["email"]?.stringValue else {
            throw SyncError.protocolError("auth answer without token and user")
        }
        try store.signIn(userID: userID, email: canonical, token: token)
    }

    // MARK: Sync

    /// Pushes the outbox, then pulls everything new. One sync runs at a time per client.
    @discardableResult
    public func sync(policy: ConflictStrategy = .merge, pageSize: Int = 1000,
                     progress: (@Sendable (SyncProgress) -> Void)? = nil) async throws -> SyncReport {
        try await gate.run {
            var report = SyncReport()
            do {
                try await self.push(policy: policy, report: &report, progress: progress)
                let resynced = try await self.pull(pageSize: pageSize, report: &report, progress: progress)
                let stillPending = try self.store.pendingCount()
                if resynced && stillPending > 0 {
                    // After a resync the device's unsynced changes go out, then their results come back.
                    try await self.push(policy: policy, report: &report, progress: progress)
                    _ = try await self.pull(pageSize: pageSize, report: &report, progress: progress)
                }
                try self.store.recordSync(error: nil)
                return report
            } catch {
                try? self.store.recordSync(error: String(describing: error))
                throw error
            }
        }
    }

    private func push(policy: ConflictStrategy, report: inout SyncReport,
                      progress: (@Sendable (SyncProgress) -> Void)?) async throws {
        let deviceID = try store.deviceID
        let total = try store.pendingCount()
        var batchIndex = 0
        while let batch = try store.nextPushBatch(policy: policy) {
            batchIndex += 1
            var body = Data()
            body.append(contentsOf: Array(#"{"deviceId":"#.utf8))
            body.append(contentsOf: JSONText.encode(.string(deviceID)).utf8)
            body.append(contentsOf: Array(#","conflictPolicy":"#.utf8))
            body.append(contentsOf: JSONText.encode(.string(batch.policy.wireName)).utf8)
            body.append(contentsOf: Array(#","operations":["#.utf8))
            for (index, op) in batch.operations.enumerated() {
                if index > 0 { body.append(UInt8(ascii: ",")) }
                body.append(contentsOf: op.payload.utf8)
            }
            body.append(contentsOf: Array("]}".utf8))
            let response = try await authorized("POST", "/api/v1/sync/push", body: body)
            guard response.status == 200 else { throw Self.failure(response) }
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

    /// Pulls every page; returns true when the pull had to start over after 410.
    private func pull(pageSize: Int, report: inout SyncReport,
                      progress: (@Sendable (SyncProgress) -> Void)?) async throws -> Bool {
        let deviceID = try store.deviceID
        var resynced = false
        if try store.pullCursor() == nil { try store.beginFullPull() }
        var full = try store.isFullPullActive()
        report.fullPull = report.fullPull || full

        func fetch(cursor: String?, full: Bool) -> Task<APIResponse, Error> {
            var query = [URLQueryItem(name: "limit", value: String(pageSize))]
            if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor)) }
            // A full pull must bring this device's own records too: no echo suppression.
            if !full { query.append(URLQueryItem(name: "deviceId", value: deviceID)) }
            return Task { try await self.authorized("GET", "/api/v1/sync/pull", query: query) }
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
            let page: DecodedPage
            do {
                page = try PageDecoder.decode(Array(response.body))
            } catch {
                throw SyncError.protocolError(String(describing: error))
            }
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
            hooks.pageCommitted?(report.pages)
            progress?(SyncProgress(phase: .pulling, operationsSent: report.operationsSent, operationsTotal: report.operationsSent,
                                   recordsPulled: report.recordsPulled, pages: report.pages))
            if !applied.hasMore { break }
        }
        if full { try store.finishFullPull() }
        return resynced
    }

    /// Sends with the stored token; on 401 asks the app for a new one, once.
    func authorized(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil) async throws -> APIResponse {
        guard let token = try store.token() else { throw SyncError.notLoggedIn }
        let response = try await api.send(method, path, query: query, body: body, token: token)
        guard response.status == 401 else { return response }
        guard let tokenRefresh, let fresh = try await tokenRefresh() else { throw SyncError.unauthorized }
        try store.setToken(fresh)
        let retried = try await api.send(method, path, query: query, body: body, token: fresh)
        if retried.status == 401 { throw SyncError.unauthorized }
        return retried
    }

    static func failure(_ response: APIResponse) -> SyncError {
        switch response.status {
        case 401: return .unauthorized
        case 429, 502, 503, 504:
            return .unavailable(status: response.status, retryAfter: response.headers["retry-after"].flatMap(Double.init))
        default: return response.error
        }
    }
}

/// Runs one operation at a time (one sync per client), in call order.
private actor SyncGate {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        while busy {
            await withCheckedContinuation { waiters.append($0) }
        }
        busy = true
        defer {
            busy = false
            if !waiters.isEmpty { waiters.removeFirst().resume() }
        }
        return try await body()
    }
}
