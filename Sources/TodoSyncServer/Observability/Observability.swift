import Logging
import MariaDB
import Prometheus
import TodoSyncAPI

/// The responder's logs and metrics, set up once by `todosync serve` before its workers start:
/// the Prometheus registry (see ProcessMetrics), the database layer's diagnostics, and one
/// ``RequestObserver`` per worker.
///
/// Settings (defaults in Settings.swift): `TODOSYNC_INSTANCE` (the `responder` label), `TODOSYNC_LOG_REQUESTS` (1: one
/// line per request, the default; 0: none), `TODOSYNC_SLOW_STATEMENT_MS` (log statements that
/// take at least this long, default 250; 0: off).
struct Observability: Sendable {
    let registry: PrometheusCollectorRegistry
    let logRequests: Bool
    /// This process's constant labels as rendered in a sample (`responder="1"`), or "".
    let constantLabels: String

    init(_ environment: Environment, logger: Logger) throws {
        let instance = environment.optionalString("TODOSYNC_INSTANCE")
        registry = ProcessMetrics.bootstrap(instance: instance)
        constantLabels = instance.map { "responder=\"\($0)\"" } ?? ""
        logRequests = try environment.int("TODOSYNC_LOG_REQUESTS") != 0
        DatabaseDiagnostics.configure(
            logger: logger, slowStatementMilliseconds: try environment.int("TODOSYNC_SLOW_STATEMENT_MS"))
    }

    func observer(for application: Application, logger: Logger) -> RequestObserver {
        RequestObserver(application: application, logger: logger, logRequests: logRequests) { [registry, constantLabels] in
            MetricsExposition.page(registryText: registry.emitToBuffer(), labels: constantLabels)
        }
    }
}
