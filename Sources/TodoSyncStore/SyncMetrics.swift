import CoreMetrics
import TodoSyncCore

/// Sync traffic, as metrics: push operations by result and records served by pull.
enum SyncMetrics {
    private static let pushResults: [PushResult.Status: Counter] = Dictionary(
        uniqueKeysWithValues: [PushResult.Status.applied, .merged, .conflict, .rejected].map {
            ($0, Counter(label: "todosync_push_operations_total", dimensions: [("result", $0.rawValue)]))
        })
    private static let pushReplays = Counter(label: "todosync_push_operations_total", dimensions: [("result", "replayed")])
    private static let pullRecords = Counter(label: "todosync_pull_records_total")
    private static let pullPages = Counter(label: "todosync_pull_pages_total")

    static func pushed(_ tally: PushTally) {
        for (status, count) in tally.counts where count > 0 { pushResults[status]?.increment(by: count) }
        if tally.replayed > 0 { pushReplays.increment(by: tally.replayed) }
    }

    static func pulled(records: Int) {
        pullPages.increment()
        if records > 0 { pullRecords.increment(by: records) }
    }
}

/// Push results of one request, counted once the transaction committed (a retried transaction
/// starts its tally over).
struct PushTally {
    var counts: [PushResult.Status: Int] = [:]
    var replayed = 0

    mutating func add(_ status: PushResult.Status) { counts[status, default: 0] += 1 }
}
