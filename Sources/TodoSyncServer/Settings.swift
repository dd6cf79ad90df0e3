import FastCGI
import Foundation
import TodoSyncConfig
import TodoSyncCore
import TodoSyncStore

/// Every variable the `todosync` binary reads, with its default: the one place defaults live.
/// `todosync config` prints them with their effective values; scripts pass only what an operator
/// set. A new `TODOSYNC_*` variable belongs here (Tests/integration/test_config_cli.py checks).
enum Settings {
    static var onlineCores: Int { max(Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), 1) }

    static let all: [Setting] = [
        // the responder
        Setting("TODOSYNC_SOCKET", default: "/tmp/todosync.sock", "unix socket `serve` listens on (mode 0660)"),
        Setting("TODOSYNC_SOCKET_GROUP", "group given to the socket file (default: the process's)"),
        Setting("TODOSYNC_LISTEN", "IP:PORT or [IPV6]:PORT: listen on TCP instead of the unix socket"),
        Setting("TODOSYNC_ALLOW", "TCP peers allowed to connect: addresses or CIDR ranges, comma-separated (unset: everyone)"),
        // Four per core: on 2 cores, 8 beat 12 and 32 on throughput and p99 (docs/BENCHMARKS.md, the 2026-11-22 run).
        Setting("TODOSYNC_WORKERS", default: "\(min(max(4 * onlineCores, 8), 64))", rule: .integer(1...1024),
                "worker threads per responder, each with its own database connection (4 per core, 8 to 64)"),
        Setting("TODOSYNC_FASTCGI_READ_TIMEOUT", default: "\(Int(FastCGIServerConfiguration().readTimeoutSeconds))", rule: .integer(1...3600),
                "seconds each read of a request from nginx may wait before the connection is dropped"),
        Setting("TODOSYNC_FASTCGI_READ_DEADLINE", default: "\(Int(FastCGIServerConfiguration().readDeadlineSeconds))", rule: .integer(1...3600),
                "seconds a whole request (params and body) may take to arrive from nginx, and a kept connection may sit idle"),
        Setting("TODOSYNC_FASTCGI_DISPATCH", default: "1", rule: .oneOf(["0", "1"]),
                "1: one thread waits on idle (kept) connections and hands a request to a free worker; 0: each worker keeps its connection"),
        Setting("TODOSYNC_RETRY_LOG_SECONDS", default: "30", rule: .integer(1...86400), "interval of the transaction-retry counter log line"),
        // Issue 38's bugs on purpose (docs/HISTORY.md): read by every `serve`, honoured only by the test build.
        Setting("TODOSYNC_TEST_INJECT",
                "test build with --enable-test-hooks only: bugs on purpose, comma-separated (docs/HISTORY.md); any other responder refuses to start with it set"),
        Setting("TODOSYNC_LOG_LEVEL", default: "info", rule: .oneOf(["trace", "debug", "info", "notice", "warning", "error", "critical"]), "the lowest level logged"),
        // logs and metrics (docs/OPERATIONS.md, "Reading metrics and logs")
        Setting("TODOSYNC_LOG_FORMAT", default: "json", rule: .oneOf(["json", "text"]), "log lines: json (one object per line) or text"),
        Setting("TODOSYNC_LOG_REQUESTS", default: "1", rule: .oneOf(["0", "1"]), "1: one `request served` line per request; 0: none"),
        Setting("TODOSYNC_SLOW_STATEMENT_MS", default: "250", rule: .integer(0...3_600_000), "log and count SQL statements at least this slow (0: off)"),
        Setting("TODOSYNC_INSTANCE", "the `responder` label on this process's metrics (the stack and systemd set it)"),
        // live sync (docs/OPERATIONS.md, "Live sync")
        Setting("TODOSYNC_LIVE_PUBLISHER",
                "unix socket of nginx's nchan publisher: pokes to live-sync streams after each commit (unset: no pokes)"),
        Setting("TODOSYNC_LIVE_PUBLISH_TIMEOUT_MS", default: "100", rule: .integer(1...5000),
                "longest wait for each step (connect, send, answer) of a poke; a write never waits longer or fails for it"),
        // the database
        Setting("TODOSYNC_DB_SOCKET", "MariaDB unix socket (wins over host and port)"),
        Setting("TODOSYNC_DB_HOST", default: "127.0.0.1", "MariaDB host"),
        Setting("TODOSYNC_DB_PORT", default: "3306", rule: .integer(1...65535), "MariaDB port"),
        Setting("TODOSYNC_DB_HOSTS", "h1:3306,h2:3306,...: Galera nodes tried in this order (replaces host and port)"),
        Setting("TODOSYNC_DB_NAME", default: "todosync", "the application's database"),
        Setting("TODOSYNC_DB_USER", default: "todosync", "the application's database account"),
        // No default: a password every installation shares is no password (round 3, item 13).
        Setting("TODOSYNC_DB_PASSWORD", secret: true,
                "its password; when not set, the first line of TODOSYNC_DB_PASSWORD_FILE (neither: no password, e.g. unix_socket auth)"),
        Setting("TODOSYNC_DB_PASSWORD_FILE", "file holding the password (first line), read when TODOSYNC_DB_PASSWORD is not set"),
        Setting("TODOSYNC_DB_LOCK_WAIT_TIMEOUT", default: "1", rule: .integer(1...3600), "seconds a statement waits for a row lock"),
        Setting("TODOSYNC_DB_TRANSACTION_ATTEMPTS", default: "5", rule: .integer(1...100), "runs of a transaction that deadlocks or loses certification"),
        Setting("TODOSYNC_SQL_DIR", default: "Sql", "migrations directory of `todosync migrate`"),
        // accounts and limits
        Setting("TODOSYNC_TOKEN_TTL_DAYS", default: "90", rule: .integer(1...3650), "bearer token lifetime"),
        Setting("TODOSYNC_LOGIN_MAX_FAILURES", default: "10", rule: .integer(1...1_000_000), "failed logins per email before the lockout"),
        Setting("TODOSYNC_LOGIN_LOCKOUT_SECONDS", default: "900", rule: .integer(1...31_536_000), "length of the failed-login lockout"),
        Setting("TODOSYNC_HASH_CONCURRENCY", default: "\(max(1, onlineCores / 2))", rule: .integer(1...1024),
                "password hashes at once per responder (half the cores); more wait in TODOSYNC_HASH_QUEUE"),
        Setting("TODOSYNC_HASH_QUEUE", default: "4", rule: .integer(0...1024),
                "logins and registers that may wait for a hash slot at once, served one client address at a time (0: none wait)"),
        Setting("TODOSYNC_HASH_WAIT_MS", default: "2000", rule: .integer(0...30_000),
                "longest wait for a hash slot; then 429 with Retry-After: 1"),
        // Per process: a host's limit is this × its responder processes (docs/OPERATIONS.md).
        Setting("TODOSYNC_ACCOUNT_IN_FLIGHT", default: "2", rule: .integer(1...1024),
                "requests one account may have in flight in one responder process, whatever its tokens; more get 429 at once"),
        // Per process too: an account reaching N responders may use N shares (docs/OPERATIONS.md).
        Setting("TODOSYNC_ACCOUNT_CPU_SHARE_MS", default: "50", rule: .integer(0...64_000),
                "CPU ms per second one account may use in one responder process while other accounts use it; over, its requests wait up to 250 ms, then 429 (0: no share)"),
        Setting("TODOSYNC_QUOTA_RECORDS", default: "\(StoreConfiguration().quotaRecords)", rule: .integer(1...1_000_000_000),
                "live tags + todos per account"),
        Setting("TODOSYNC_QUOTA_OPERATIONS_PER_HOUR", default: "\(StoreConfiguration().quotaOperationsPerHour)", rule: .integer(1...1_000_000_000),
                "write operations per account per clock hour"),
        Setting("TODOSYNC_QUOTA_STORED_BYTES_PER_HOUR", default: "\(StoreConfiguration().quotaStoredBytesPerHour)",
                rule: .integer(1...(1 << 50)), "bytes of push results an account may store per clock hour"),
        Setting("TODOSYNC_REQUEST_BUDGET_MS", default: "\(StoreConfiguration().requestBudgetMilliseconds)", rule: .integer(100...600_000),
                "a request's deadline from nginx's handover ($msec): not started, not committed past it (503); keep it inside nginx's 30 s"),
        Setting("TODOSYNC_MIN_SCHEMA_VERSION", default: "\(StoreConfiguration().minimumSchemaVersion)",
                rule: .integer(SchemaVersion.first...SchemaVersion.current),
                "oldest schema version a sync request may speak (older: 426 upgrade_required)"),
        // Snapshots (contract "Sync: snapshot"): nginx serves the files from this directory, so
        // its group must be nginx's (docs/OPERATIONS.md); in a cluster, one directory shared by
        // every responder host and the front (docs/SCALING.md).
        Setting("TODOSYNC_SNAPSHOT_DIR", default: "/var/lib/todosync/snapshots",
                "cache of snapshot files (GET /sync/snapshot); nginx's internal /__snapshot/ location serves it"),
        Setting("TODOSYNC_SNAPSHOT_CACHE_MAX_BYTES", default: "\(4 << 30)", rule: .integer((1 << 20)...(1 << 50)),
                "size limit of the snapshot cache: after each build the oldest files go until the rest fit"),
        Setting("TODOSYNC_SNAPSHOT_MAX_AGE_SECONDS", default: "3600", rule: .integer(1...3600),
                "a cached snapshot older than this is never served (at most an hour)"),
        Setting("TODOSYNC_SNAPSHOT_MAX_BUILDS", default: "\(StoreConfiguration().snapshotBuildSlots.limit)", rule: .integer(1...64),
                "snapshot builds at once in one responder process; one more is answered 503 with Retry-After: 1 (each build holds a worker and about a core for up to the request budget)"),
        Setting("TODOSYNC_TOMBSTONE_RETENTION_DAYS", default: "90", rule: .integer(1...36_500), "`todosync purge`: tombstones and push results kept this long"),
        Setting("TODOSYNC_IDEMPOTENCY_RETENTION_HOURS", default: "\(StoreConfiguration().idempotencyRetentionSeconds / 3600)", rule: .integer(24...876_000),
                "`todosync purge`: Idempotency-Key records kept this long (at least 24)"),
    ]
}
