import CoreMetrics
import Prometheus

/// The responder's metrics backend: one Prometheus registry per process, behind swift-metrics.
/// Every series carries `responder="<TODOSYNC_INSTANCE>"` when that is set (the stack sets it to
/// the responder's index, the systemd unit to its instance name), so the responders of a host
/// stay apart when their pages are read together.
enum ProcessMetrics {
    /// Bootstraps swift-metrics once (before any worker starts) and returns the registry to render.
    static func bootstrap(instance: String?) -> PrometheusCollectorRegistry {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        if let instance {
            factory.nameAndLabelSanitizer = { name, labels in (name, labels + [("responder", instance)]) }
        }
        // Requests take about a millisecond when all is well: finer buckets at the low end than
        // the library's default (which starts at 5 ms).
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }
}
