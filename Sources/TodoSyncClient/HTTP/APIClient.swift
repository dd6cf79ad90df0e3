import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends one HTTP request. The default is URLSession; tests wrap it to lose responses.
public protocol HTTPTransport: Sendable {
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
    /// Sends a request whose 200 answer's body is written to `file` (created or truncated) as it
    /// arrives, never held whole in memory; any other answer's body is returned instead (and
    /// `file` is left empty). The default implementation (for transports that only `send`)
    /// receives the body whole, then writes it.
    func download(_ request: URLRequest, to file: URL) async throws -> (Data, HTTPURLResponse)
}

extension HTTPTransport {
    public func download(_ request: URLRequest, to file: URL) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await send(request)
        guard response.statusCode == 200 else { return (data, response) }
        try data.write(to: file)
        return (Data(), response)
    }
}

/// URLSession as the transport (FoundationNetworking on Linux).
public struct URLSessionTransport: HTTPTransport {
    let session: URLSession

    public init(session: URLSession? = nil) {
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = 30
            configuration.httpMaximumConnectionsPerHost = 2
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            self.session = URLSession(configuration: configuration)
        }
    }

    /// A data task with a completion handler, not `session.data(for:)`: cancelling a Swift task
    /// suspended in that can hang the process on Linux. A cancelled call stops waiting at once;
    /// the request itself is left to end (`URLSessionCall` says why).
    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let call = URLSessionCall<(Data, HTTPURLResponse)>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                call.start(session.dataTask(with: request) { data, response, error in
                    if let error {
                        call.finish(.failure(error))
                    } else if let http = response as? HTTPURLResponse {
                        call.finish(.success((data ?? Data(), http)))
                    } else {
                        call.finish(.failure(URLError(.badServerResponse)))
                    }
                }, continuation)
            }
        } onCancel: {
            call.abandon()
        }
    }

    /// Streams a 200's body to `file` through a data delegate (`FileDownload`); the request's
    /// `timeoutInterval` bounds the wait for each byte, not the whole transfer.
    public func download(_ request: URLRequest, to file: URL) async throws -> (Data, HTTPURLResponse) {
        try await FileDownload.run(request, to: file)
    }
}

/// Why a sync (or an auth call) stopped. Local data and the outbox are kept in every case.
public enum SyncError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No token: log in first.
    case notLoggedIn
    /// The server could not be reached (after retries).
    case offline(String)
    /// The server answered 503/429/504 for every retry; nothing was lost.
    case unavailable(status: Int, retryAfter: Double?)
    /// Signed out: the server refused the token (the password was changed or the session revoked
    /// on another device, the account deleted elsewhere, or the token expired) and the refresh
    /// hook gave no new one, or the store was logged out. The token is forgotten; local data and
    /// the outbox are kept, and the next login sends the queued changes.
    case unauthorized
    /// 401 to a password check (`changePassword`, `deleteAccount`): the password given is wrong
    /// (`field` names it). The device is still signed in and nothing changed; the server counts it
    /// as a failed login of the account (10 in a row: `unavailable(status: 429, …)` until the
    /// cool-down passes).
    case wrongPassword(field: String)
    /// Any other error answer (`code` from the contract's error table; `details`: the body's
    /// `error.details`, one problem per field, empty when the server sent none).
    case server(status: Int, code: String, message: String, details: [ServerProblem] = [])
    /// The answer did not have the contract's shape.
    case protocolError(String)
    /// The server did not answer a request within `SyncTimeouts.request` (`.request`), or the
    /// call did not finish within `SyncTimeouts.sync` (`.sync`); `queued` is how many changes
    /// stay in the outbox (nil when unknown).
    case timedOut(TimeoutKind, seconds: Double, queued: Int?)
    /// Another process is syncing the same store file; this sync did nothing.
    case alreadyRunning(store: String)
    /// 426 `upgrade_required`: the server no longer serves this client's schema version. Sync
    /// stops until the app is upgraded; nothing was applied, local data and the queue are kept.
    case upgradeRequired(UpgradeRequired)

    /// Which bound a `timedOut` sync hit.
    public enum TimeoutKind: String, Sendable {
        case request, sync
    }

    public var description: String {
        switch self {
        case .notLoggedIn: return "not logged in"
        case .offline(let reason): return "offline: the server could not be reached (\(reason)); changes stay queued"
        case .unavailable(let status, _): return "the server is unavailable (HTTP \(status)); changes stay queued"
        case .unauthorized: return "signed out: log in again (changes stay queued)"
        case .wrongPassword: return "wrong password: nothing changed (still signed in)"
        case .server(let status, let code, let message, let details):
            let listed = details.isEmpty ? "" : " (" + details.map(\.description).joined(separator: "; ") + ")"
            return "server error \(status) \(code): \(message)\(listed)"
        case .protocolError(let reason): return "unexpected answer from the server: \(reason)"
        case .timedOut(let kind, let seconds, let queued):
            let what = kind == .request ? "the server did not answer within" : "the sync did not finish within"
            let stay = queued.map { "\($0) change(s) stay queued" } ?? "changes stay queued"
            return "\(what) \(Self.seconds(seconds)) s; \(stay)"
        case .alreadyRunning(let store): return "Sync already running on \(store)"
        case .upgradeRequired(let required): return required.description
        }
    }

    /// `30`, `0.5`: seconds as a person writes them.
    static func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// Whether the server could not be reached or did not answer in time (the terminal
    /// client's "offline" exit code): nothing was lost, the next sync sends everything.
    public var isOffline: Bool {
        switch self {
        case .offline, .unavailable, .timedOut: return true
        default: return false
        }
    }
}

/// The server's answer to a client whose schema version is below its minimum (426).
public struct UpgradeRequired: Sendable, Equatable, CustomStringConvertible {
    /// The oldest schema version the server serves, and its newest.
    public var minimum: Int
    public var current: Int

    public init(minimum: Int, current: Int) {
        self.minimum = minimum
        self.current = current
    }

    public var description: String {
        "upgrade required: the server needs schema version \(minimum) or newer (it speaks \(current)); "
            + "update the app to sync again"
    }
}

/// Backoff for retryable failures: network errors, 503, 429, 502 and 504 (the outbox makes
/// every request safe to resend). Exponential with jitter; `Retry-After` is a floor, and an
/// answer that asks for a longer wait than `maxDelay` ends the attempt at once (the sync fails
/// with `.unavailable(retryAfter:)`, so the app can schedule the next one) instead of sleeping.
/// A request that timed out is not retried (see `SyncTimeouts`), and no wait runs past the
/// call's overall bound.
public struct RetryPolicy: Sendable {
    public var maxAttempts: Int
    public var initialDelay: Double
    public var maxDelay: Double

    public init(maxAttempts: Int = 6, initialDelay: Double = 0.25, maxDelay: Double = 10) {
        self.maxAttempts = maxAttempts
        self.initialDelay = initialDelay
        self.maxDelay = maxDelay
    }

    /// The wait before attempt `attempt + 1` (attempt counts from 1).
    func delay(afterAttempt attempt: Int, retryAfter: Double?) -> Double {
        let ceiling = min(maxDelay, initialDelay * pow(2, Double(attempt - 1)))
        let jittered = Double.random(in: ceiling / 2...ceiling)
        return max(jittered, retryAfter ?? 0)
    }
}

/// One entry of an error answer's `details` (API.md "Errors"): which field, and what is wrong.
public struct ServerProblem: Sendable, Equatable, CustomStringConvertible {
    public var field: String
    public var problem: String

    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }

    public var description: String { field.isEmpty ? problem : "\(field): \(problem)" }
}

/// An answer of the server: status, headers (lower-cased names) and body.
struct APIResponse: Sendable {
    var status: Int
    var headers: [String: String]
    var body: Data

    func json() throws -> JSONObject {
        guard let value = try? JSONParser.parse(Array(body), maxDepth: 32), let object = value.objectValue else {
            throw SyncError.protocolError("HTTP \(status) without a JSON object body")
        }
        return object
    }

    /// A 401 that names a field (`details`): a wrong password on an account route, not a refused
    /// token (whose 401 has no `details`; API.md "Account").
    var wrongPasswordField: String? {
        guard status == 401, case .server(_, _, _, let details) = error else { return nil }
        return details.first?.field
    }

    var error: SyncError {
        let object = try? json()
        let error = object?["error"]?.objectValue
        let details = (error?["details"]?.arrayValue ?? []).compactMap(\.objectValue).map {
            ServerProblem(field: $0["field"]?.stringValue ?? "", problem: $0["problem"]?.stringValue ?? "")
        }
        return .server(status: status, code: error?["code"]?.stringValue ?? "http_\(status)",
                       message: error?["message"]?.stringValue ?? "HTTP \(status)", details: details)
    }
}

/// The contract's HTTP calls, with retries and timeouts. Stateless: the token comes from the caller.
struct APIClient: Sendable {
    let baseURL: URL
    let transport: any HTTPTransport
    let retry: RetryPolicy
    var timeouts = SyncTimeouts()
    var clock: any SyncClock = SystemSyncClock()

    /// Sends a request, retrying retryable failures; returns the final answer (any status).
    /// Each attempt gets `timeouts.request` seconds (less when `deadline` is nearer); a timed-out
    /// attempt ends the call with `SyncError.timedOut`.
    ///
    /// - Parameters:
    ///   - file: a 200's body goes there as it arrives (`HTTPTransport.download`), and the
    ///     answer's `body` is empty; `timeouts.request` then bounds each wait for a byte, not
    ///     the whole transfer.
    ///   - headers: are set last (a snapshot range asks for `Accept-Encoding: identity`).
    ///   - resend: false for a request that is not safe to repeat (no opId or key makes it so):
    ///     a lost answer (network error, 502, 504) is not resent; only 429 and 503, which
    ///     apply nothing, are retried.
    func send(_ method: String, _ path: String, query: [URLQueryItem] = [], body: Data? = nil, headers: [String: String] = [:],
              token: String?, deadline: SyncDeadline? = nil, into file: URL? = nil,
              resend: Bool = true) async throws -> APIResponse {
        let deadline = deadline ?? SyncDeadline(clock: clock, seconds: timeouts.sync)
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty { components.queryItems = query }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        request.httpBody = body
        if body != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.setValue("gzip", forHTTPHeaderField: "Accept-Encoding")
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }

        var attempt = 0
        while true {
            attempt += 1
            let remaining = deadline.at - clock.now
            guard remaining > 0 else { throw SyncError.timedOut(.sync, seconds: deadline.seconds, queued: nil) }
            let (limit, kind) = remaining < timeouts.request ? (remaining, SyncError.TimeoutKind.sync)
                : (timeouts.request, SyncError.TimeoutKind.request)
            // URLSession's own timer is a backstop behind the race below (for a download, the
            // bound of each wait for a byte).
            request.timeoutInterval = file == nil ? limit + 1 : limit
            let response: APIResponse
            do {
                let (data, http) = if let file {
                    try await transport.download(request, to: file)
                } else {
                    try await Self.send(request, over: transport, within: limit)
                }
                var headers: [String: String] = [:]
                for (name, value) in http.allHeaderFields {
                    if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
                }
                response = APIResponse(status: http.statusCode, headers: headers, body: data)
            } catch is CancellationError {
                throw CancellationError()
            } catch let error where error is RequestTimedOut || (error as? URLError)?.code == .timedOut {
                throw SyncError.timedOut(kind, seconds: kind == .request ? timeouts.request : deadline.seconds, queued: nil)
            } catch {
                guard resend, attempt < retry.maxAttempts else { throw SyncError.offline(Self.describe(error)) }
                try await wait(retry.delay(afterAttempt: attempt, retryAfter: nil), before: deadline)
                continue
            }
            guard (resend ? [429, 502, 503, 504] : [429, 503]).contains(response.status) else { return response }
            let retryAfter = response.headers["retry-after"].flatMap(Double.init)
            guard attempt < retry.maxAttempts, (retryAfter ?? 0) <= retry.maxDelay else { return response }
            try await wait(retry.delay(afterAttempt: attempt, retryAfter: retryAfter), before: deadline)
        }
    }

    /// A backoff wait; one that would end past the deadline ends the call now instead.
    func wait(_ seconds: Double, before deadline: SyncDeadline) async throws {
        guard clock.now + seconds < deadline.at else {
            throw SyncError.timedOut(.sync, seconds: deadline.seconds, queued: nil)
        }
        try await clock.sleep(seconds: seconds)
    }

    struct RequestTimedOut: Error {}

    /// `transport.send` raced against a timer of `seconds` real time. The loser is cancelled and
    /// not waited for (a transport that ignores cancellation cannot hold the caller). Cancelling
    /// the transport's task as its answer arrives is safe: `URLSessionTransport` then stops
    /// waiting without cancelling its URLSession task (`URLSessionCall`).
    static func send(_ request: URLRequest, over transport: any HTTPTransport,
                     within seconds: Double) async throws -> (Data, HTTPURLResponse) {
        let race = Race<(Data, HTTPURLResponse)>()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                race.start(continuation)
                race.add(Task {
                    do {
                        race.finish(.success(try await transport.send(request)))
                    } catch {
                        race.finish(.failure(error))
                    }
                })
                race.add(Task {
                    try? await Task.sleep(nanoseconds: UInt64(max(seconds, 0) * 1e9))
                    race.finish(.failure(RequestTimedOut()))
                })
            }
        } onCancel: {
            race.finish(.failure(CancellationError()))
        }
    }

    static func describe(_ error: Error) -> String {
        if let urlError = error as? URLError { return "\(urlError.code.rawValue): \(urlError.localizedDescription)" }
        return String(describing: error)
    }
}

/// The first result of several tasks resumes one continuation; then every task is cancelled.
private final class Race<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<Value, Error>?
    private var pending: Result<Value, Error>?
    private var tasks: [Task<Void, Never>] = []
    private var done = false

    func start(_ continuation: CheckedContinuation<Value, Error>) {
        lock.lock()
        if let pending {
            lock.unlock()
            continuation.resume(with: pending)
            return
        }
        self.continuation = continuation
        lock.unlock()
    }

    func add(_ task: Task<Void, Never>) {
        lock.lock()
        let cancel = done
        if !cancel { tasks.append(task) }
        lock.unlock()
        if cancel { task.cancel() }
    }

    func finish(_ result: Result<Value, Error>) {
        lock.lock()
        guard !done else {
            lock.unlock()
            return
        }
        done = true
        let continuation = self.continuation
        self.continuation = nil
        if continuation == nil { pending = result }
        let losers = tasks
        tasks = []
        lock.unlock()
        continuation?.resume(with: result)
        for task in losers { task.cancel() }
    }
}
