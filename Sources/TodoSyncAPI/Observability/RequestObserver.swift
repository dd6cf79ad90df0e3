import CoreMetrics
import Dispatch
import Logging
import TodoSyncCore

/// Wraps one worker's ``Application``: times each request, counts it by route and status, records
/// its latency by route, and writes one log line per request (`request served`: nginx's request
/// id, user id, method, route, status, duration). Also answers the internal metrics path.
///
/// Confined to its worker thread, like the application it wraps: the per-route metric handles are
/// cached in plain dictionaries, so the hot path takes no lock beyond the backend's own.
public final class RequestObserver {
    /// Renders this process's metrics (Prometheus text format); nil: no metrics path.
    public typealias MetricsPage = () -> [UInt8]

    private let application: Application
    private let logger: Logger
    private let logRequests: Bool
    private let metricsPage: MetricsPage?
    private var requestCounters: [RouteStatus: Counter] = [:]
    private var latencyTimers: [String: Timer] = [:]

    private struct RouteStatus: Hashable {
        let route: String
        let status: Int
    }

    /// `logRequests`: write the per-request line (info level). `metricsPage`: what `GET /metrics`
    /// (and `/metrics/<anything>`, the per-responder paths of the nginx site) answers.
    public init(application: Application, logger: Logger, logRequests: Bool = true, metricsPage: MetricsPage? = nil) {
        self.application = application
        self.logger = logger
        self.logRequests = logRequests
        self.metricsPage = metricsPage
    }

    /// The path nginx's internal location passes (`/metrics`, `/metrics/<n>`); the public
    /// locations never pass it (only `/api/` and `/healthz` reach the responders).
    static func isMetricsPath(_ path: String) -> Bool {
        path == "/metrics" || path.hasPrefix("/metrics/")
    }

    public func handle(_ request: HTTPRequest, requestID: String?) -> HTTPResponse {
        if let metricsPage, Self.isMetricsPath(request.path) {
            guard request.method == "GET" || request.method == "HEAD" else {
                return .error(.methodNotAllowed(allowed: ["GET", "HEAD"]))
            }
            return HTTPResponse(
                status: 200, headers: [HTTPHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                body: metricsPage())
        }
        let start = DispatchTime.now().uptimeNanoseconds
        var response = application.handle(request, requestID: requestID)
        let observed = application.observed
        if let stream = response.stream {
            // Counted and logged when the body has been written (its time is the request's).
            let status = response.status
            response.stream = ResponseStream { [self] write in
                let outcome = try stream.produce(write)
                switch outcome {
                case .complete: served(request, requestID, observed, status: status, since: start)
                case .cutOff: served(request, requestID, observed, status: status, since: start, cutOff: true)
                case .instead(let other): served(request, requestID, observed, status: other.status, since: start)
                }
                return outcome
            }
            return response
        }
        served(request, requestID, observed, status: response.status, since: start)
        return response
    }

    /// Counts, times and logs one request that has been answered.
    private func served(
        _ request: HTTPRequest, _ requestID: String?, _ observed: RequestObservation, status: Int, since start: UInt64,
        cutOff: Bool = false
    ) {
        let elapsed = DispatchTime.now().uptimeNanoseconds &- start
        record(route: observed.route, status: status, nanoseconds: elapsed)
        if logRequests {
            var metadata: Logger.Metadata = [
                // Client-controlled (nginx passes any method and, from a direct FastCGI peer, any
                // request id): capped, like every logged field (LogField).
                "request_id": .string(LogField.capped(requestID ?? "-")),
                "method": .string(LogField.capped(request.method, limit: LogField.methodLimit)),
                "route": .string(observed.route),
                "status": .stringConvertible(status),
                "duration_ms": .stringConvertible(Double(elapsed / 1000) / 1000),
            ]
            if let user = observed.userID { metadata["user_id"] = .stringConvertible(user) }
            if cutOff { metadata["cut_off"] = "true" }
            logger.info("request served", metadata: metadata, source: "todosync")
        }
    }

    private func record(route: String, status: Int, nanoseconds: UInt64) {
        let key = RouteStatus(route: route, status: status)
        let counter: Counter
        if let cached = requestCounters[key] {
            counter = cached
        } else {
            counter = Counter(
                label: "todosync_http_requests_total", dimensions: [("route", route), ("status", String(status))])
            requestCounters[key] = counter
        }
        counter.increment()
        let timer: Timer
        if let cached = latencyTimers[route] {
            timer = cached
        } else {
            timer = Timer(label: "todosync_http_request_duration_seconds", dimensions: [("route", route)])
            latencyTimers[route] = timer
        }
        timer.recordNanoseconds(Int64(nanoseconds))
    }
}
