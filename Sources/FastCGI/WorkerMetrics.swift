import CoreMetrics

/// The worker pool, as metrics: how many worker threads exist and how many are serving a request
/// right now (`todosync_fastcgi_workers_busy`; equal to `todosync_fastcgi_workers` means new
/// requests wait in the listen queue).
enum WorkerMetrics {
    static let busy = Meter(label: "todosync_fastcgi_workers_busy")
    static let total = Meter(label: "todosync_fastcgi_workers")
}
