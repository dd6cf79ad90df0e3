import CBuildInfo
import Foundation

/// What `/metrics` adds to the registry's own text: a `# HELP` line for every series (swift-metrics
/// gives the registry none), `todosync_build_info`, and the standard `process_*` series read from
/// `/proc/self` at each scrape. Docs: docs/OPERATIONS.md, "Reading metrics and logs".
enum MetricsExposition {
    /// One line of help per metric family the responder defines. A family missing here has no
    /// `# HELP` line, which `test_metrics.py` catches.
    static let help: [String: String] = [
        "todosync_http_requests_total": "Requests answered, by route pattern and status.",
        "todosync_http_request_duration_seconds": "Time inside the responder per request, by route pattern.",
        "todosync_fastcgi_workers": "Worker threads of this responder.",
        "todosync_fastcgi_workers_busy": "Worker threads serving a request now.",
        "todosync_fastcgi_connections_waiting": "Connections from nginx waiting for a request, no worker on them (kept ones between requests).",
        "todosync_fastcgi_read_deadline_expired_total": "Connections closed because their request did not arrive within TODOSYNC_FASTCGI_READ_DEADLINE.",
        "todosync_db_connects_total": "Database sessions opened (initial, reconnect).",
        "todosync_db_connection_losses_total": "Database sessions found dead.",
        "todosync_db_connect_failures_total": "Database sessions that could not be opened.",
        "todosync_db_transaction_retries_total": "Transaction runs that failed with a retryable error, by cause and outcome.",
        "todosync_db_slow_statements_total": "SQL statements slower than TODOSYNC_SLOW_STATEMENT_MS.",
        "todosync_push_operations_total": "Push operations by result, counted once committed.",
        "todosync_pull_pages_total": "Pull pages served.",
        "todosync_pull_records_total": "Records in the pull pages served.",
        "todosync_snapshot_builds_total": "Snapshot files built (a cached one served costs none).",
        "todosync_snapshot_build_records_total": "Records written into the snapshot files built.",
        "todosync_snapshot_build_seconds_total": "Time spent building snapshot files.",
        "todosync_snapshot_builds_compacted_total": "Snapshot builds whose rows came out of id order, so the file was compacted by VACUUM INTO (a second copy).",
        "todosync_snapshot_builds_too_slow_total": "Snapshot builds abandoned at the request budget (the account is answered 503 for the cache's age limit).",
        "todosync_snapshot_gzip_total": "Snapshot gzip companions made (once per file, on its first request that accepts gzip).",
        "todosync_snapshot_gzip_seconds_total": "Time spent compressing snapshot gzip companions.",
        "todosync_live_publishes_total": "Live-sync pokes sent to nginx's nchan publisher after a commit, by result (published, failed: the write succeeded all the same).",
        "todosync_argon2_hashes_total": "Password hashes computed (hash, verify).",
        "todosync_argon2_duration_seconds": "Time per password hash (hash, verify).",
        "todosync_build_info": "The running binary: version and git commit (always 1).",
        "process_cpu_seconds_total": "User and system CPU time of this process.",
        "process_resident_memory_bytes": "Resident memory of this process.",
        "process_virtual_memory_bytes": "Virtual memory of this process.",
        "process_open_fds": "Open file descriptors of this process.",
        "process_max_fds": "The limit on open file descriptors of this process.",
        "process_start_time_seconds": "When this process started, in seconds since the Unix epoch.",
    ]

    /// The registry's text with `# HELP` lines added, then the build and process series.
    /// `labels`: the constant labels of this process (`responder="N"`), already rendered.
    static func page(registryText: [UInt8], labels: String) -> [UInt8] {
        var out = ""
        for line in String(decoding: registryText, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE ") {
                let name = line.dropFirst(7).prefix { $0 != " " }
                if let text = help[String(name)] { out += "# HELP \(name) \(text)\n" }
            }
            if !line.isEmpty { out += line + "\n" }
        }
        out += buildInfo(labels: labels)
        out += processSeries(labels: labels)
        return Array(out.utf8)
    }

    static func family(_ name: String, _ type: String) -> String {
        "# HELP \(name) \(help[name] ?? "")\n# TYPE \(name) \(type)\n"
    }

    static func buildInfo(labels: String) -> String {
        let commit = String(cString: todosync_build_commit())
        let own = "version=\"\(todosyncVersion)\",commit=\"\(commit.isEmpty ? "unknown" : commit)\""
        return family("todosync_build_info", "gauge") + "todosync_build_info{\(joined(own, labels))} 1\n"
    }

    /// The Prometheus client libraries' standard process series, from `/proc/self/stat` and
    /// `/proc/self/fd`; none when `/proc` cannot be read.
    static func processSeries(labels: String) -> String {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return "" }
        // Fields after the command name, which may hold spaces: state is field 3.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        func field(_ number: Int) -> Double { Double(fields[number - 3]) ?? 0 }
        guard fields.count > 21 else { return "" }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
        let bootTime = Self.bootTime()
        let openFDs = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let suffix = labels.isEmpty ? "" : "{\(labels)}"
        var text = ""
        text += family("process_cpu_seconds_total", "counter") + "process_cpu_seconds_total\(suffix) \((field(14) + field(15)) / ticks)\n"
        text += family("process_virtual_memory_bytes", "gauge") + "process_virtual_memory_bytes\(suffix) \(Int(field(23)))\n"
        text += family("process_resident_memory_bytes", "gauge") + "process_resident_memory_bytes\(suffix) \(Int(field(24) * pageSize))\n"
        text += family("process_open_fds", "gauge") + "process_open_fds\(suffix) \(max(openFDs - 1, 0))\n"
        text += family("process_max_fds", "gauge") + "process_max_fds\(suffix) \(limit.rlim_cur)\n"
        if let bootTime {
            text += family("process_start_time_seconds", "gauge")
                + "process_start_time_seconds\(suffix) \(bootTime + field(22) / ticks)\n"
        }
        return text
    }

    private static func bootTime() -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }) else { return nil }
        return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces))
    }

    private static func joined(_ first: String, _ second: String) -> String {
        second.isEmpty ? first : "\(first),\(second)"
    }
}
