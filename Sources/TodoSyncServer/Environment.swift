import Credentials
import Foundation
import MariaDB
import TodoSyncConfig
import TodoSyncCore
import TodoSyncSnapshot
import TodoSyncStore

/// The configuration every command reads: the defaults in ``Settings``, then the config file
/// named by `TODOSYNC_CONFIG`, then the environment (`todosync config` prints the result).
struct Environment {
    let configuration: LayeredConfiguration

    /// A config file that cannot be read or parsed stops the process (exit 78, EX_CONFIG), and
    /// so does any value that breaks its setting's rule unless `validating` is false (plain
    /// `todosync config`, which shows what is set). Every command thus fails at start, like
    /// `nginx -t`, instead of falling back silently (an unknown log level used to mean `info`).
    /// `onConfigurationError` ends the process on such a problem (`serve` holds its socket first,
    /// ``FaultHold``).
    init(_ values: [String: String] = ProcessInfo.processInfo.environment, validating: Bool = true,
         onConfigurationError: (String) -> Never = { ExitStatus.fail(.configuration, $0) }) {
        do {
            configuration = try LayeredConfiguration(settings: Settings.all, environment: values)
        } catch {
            onConfigurationError("\(error)")
        }
        if validating {
            let problems = configuration.problems()
            if !problems.isEmpty { onConfigurationError(problems.joined(separator: "\ntodosync: ")) }
        }
    }

    /// The effective value; `fallback` only for a variable that is not in ``Settings``.
    func string(_ name: String, default fallback: String = "") -> String {
        configuration.value(name) ?? fallback
    }

    /// The effective value, nil when unset or empty.
    func optionalString(_ name: String) -> String? {
        configuration.value(name)
    }

    func int(_ name: String, default fallback: Int? = nil) throws -> Int {
        guard let text = configuration.value(name) else {
            guard let fallback else { throw ConfigurationError(name: name, value: "") }
            return fallback
        }
        guard let value = Int(text) else { throw ConfigurationError(name: name, value: text) }
        return value
    }

    var database: ConnectionConfiguration {
        get throws {
            var configuration = ConnectionConfiguration(
                host: string("TODOSYNC_DB_HOST"),
                port: try int("TODOSYNC_DB_PORT"),
                unixSocket: optionalString("TODOSYNC_DB_SOCKET"),
                user: string("TODOSYNC_DB_USER"),
                password: try databasePassword,
                database: string("TODOSYNC_DB_NAME"),
                // Short lock waits: a request queued behind its own account's row lock gives its
                // worker back quickly (503, nothing applied) instead of parking it.
                lockWaitTimeoutSeconds: UInt32(clamping: max(1, try int("TODOSYNC_DB_LOCK_WAIT_TIMEOUT"))))
            configuration.transactionAttempts = max(try int("TODOSYNC_DB_TRANSACTION_ATTEMPTS"), 1)
            // TODOSYNC_DB_HOSTS=h1:3306,h2:3306,...: several servers (Galera nodes), tried in this
            // order for each new session; the first is this host's preferred node.
            let hosts = string("TODOSYNC_DB_HOSTS")
            if !hosts.isEmpty {
                var endpoints: [(host: String, port: Int)] = []
                for entry in hosts.split(separator: ",") {
                    let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: ":")
                    guard parts.count <= 2, let host = parts.first, !host.isEmpty,
                        let port = parts.count == 2 ? Int(parts[1]) : 3306, (1...65535).contains(port)
                    else { throw ConfigurationError(name: "TODOSYNC_DB_HOSTS", value: hosts) }
                    endpoints.append((String(host), port))
                }
                configuration.unixSocket = nil
                configuration.host = endpoints[0].host
                configuration.port = endpoints[0].port
                configuration.failoverEndpoints = Array(endpoints.dropFirst())
            }
            return configuration
        }
    }

    /// A store on a connection opened now, so that a database that cannot be reached stops the
    /// command with the server's own error (code and text) and an exit status that tells retry
    /// (75) from fix the configuration (78), instead of a bare "unavailable" at the first query.
    /// A store for the command-line tools (`purge`, `new-epoch`, the maintenance commands): their
    /// statements may touch every row of a large account (rendering the feed of a million todos
    /// takes tens of seconds), so the socket read and write timeouts are an hour instead of the
    /// responders' 10 s, which made such a run fail as "unavailable" half-way.
    func connectedStore(withStoreConfiguration: Bool = false) throws -> Store {
        var configuration = databaseOrExit
        configuration.readTimeoutSeconds = Self.toolStatementTimeoutSeconds
        configuration.writeTimeoutSeconds = Self.toolStatementTimeoutSeconds
        let connection = Connection(configuration: configuration)
        do {
            try connection.connect()
        } catch let error as DatabaseError {
            ExitStatus.fail(.forConnectFailure(error), "cannot open a database session: \(error)")
        }
        return withStoreConfiguration ? Store(connection: connection, configuration: try store) : Store(connection: connection)
    }

    static let toolStatementTimeoutSeconds: UInt32 = 3600

    /// TODOSYNC_DB_PASSWORD when set (file or environment), else the first line of
    /// TODOSYNC_DB_PASSWORD_FILE (the stack generates one on first run), else the default.
    var databasePassword: String {
        get throws {
            let (password, source) = configuration.lookup("TODOSYNC_DB_PASSWORD")
            if source != .defaultValue, let password { return password }
            guard let path = optionalString("TODOSYNC_DB_PASSWORD_FILE") else { return password ?? "" }
            guard let text = LayeredConfiguration.readFile(path) else {
                let reason = String(cString: strerror(errno))
                throw ConfigurationError(
                    name: "TODOSYNC_DB_PASSWORD_FILE", value: path,
                    problem: "(\(configuration.lookup("TODOSYNC_DB_PASSWORD_FILE").source)): cannot read the password file: \(reason)")
            }
            return text.split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        }
    }

    /// ``database``, or the process ends with exit 78 (EX_CONFIG) naming the problem (a password
    /// file that cannot be read, a bad `TODOSYNC_DB_HOSTS`): every command that opens a session
    /// uses this, so a configuration mistake never looks like a crash (exit 1) to systemd.
    var databaseOrExit: ConnectionConfiguration {
        do {
            return try database
        } catch {
            ExitStatus.fail(.configuration, "\(error)")
        }
    }

    /// The snapshot cache (`TODOSYNC_SNAPSHOT_*`): the responders' and `todosync purge`'s.
    var snapshotCache: SnapshotCache {
        get throws {
            SnapshotCache(directory: string("TODOSYNC_SNAPSHOT_DIR"),
                          maximumBytes: Int64(try int("TODOSYNC_SNAPSHOT_CACHE_MAX_BYTES")),
                          maximumAgeSeconds: Int64(try int("TODOSYNC_SNAPSHOT_MAX_AGE_SECONDS")))
        }
    }

    var store: StoreConfiguration {
        get throws {
            var configuration = StoreConfiguration()
            configuration.tokenLifetimeSeconds = Int64(try int("TODOSYNC_TOKEN_TTL_DAYS")) * 86400
            configuration.loginMaxFailures = try int("TODOSYNC_LOGIN_MAX_FAILURES")
            configuration.loginLockoutSeconds = Int64(try int("TODOSYNC_LOGIN_LOCKOUT_SECONDS"))
            // Half the cores by default: hashing alone can then never take every core.
            let slots = try int("TODOSYNC_HASH_CONCURRENCY")
            guard slots >= 1 else {
                throw ConfigurationError(name: "TODOSYNC_HASH_CONCURRENCY", value: "\(slots)")
            }
            configuration.configureHashing(
                concurrency: slots, queue: try int("TODOSYNC_HASH_QUEUE"),
                maximumWaitMilliseconds: try int("TODOSYNC_HASH_WAIT_MS"))
            configuration.quotaRecords = try int("TODOSYNC_QUOTA_RECORDS")
            configuration.quotaOperationsPerHour = try int("TODOSYNC_QUOTA_OPERATIONS_PER_HOUR")
            configuration.quotaStoredBytesPerHour = Int64(try int("TODOSYNC_QUOTA_STORED_BYTES_PER_HOUR"))
            configuration.requestBudgetMilliseconds = Int64(try int("TODOSYNC_REQUEST_BUDGET_MS"))
            guard configuration.requestBudgetMilliseconds >= 100 else {
                throw ConfigurationError(name: "TODOSYNC_REQUEST_BUDGET_MS", value: "\(configuration.requestBudgetMilliseconds)")
            }
            configuration.minimumSchemaVersion = try int("TODOSYNC_MIN_SCHEMA_VERSION")
            guard (SchemaVersion.first...SchemaVersion.current).contains(configuration.minimumSchemaVersion) else {
                throw ConfigurationError(name: "TODOSYNC_MIN_SCHEMA_VERSION", value: "\(configuration.minimumSchemaVersion)")
            }
            // At least the contract's 24 hours.
            configuration.idempotencyRetentionSeconds =
                Int64(max(try int("TODOSYNC_IDEMPOTENCY_RETENTION_HOURS"), 24)) * 3600
            configuration.snapshotCache = try snapshotCache
            configuration.snapshotBuildSlots = StoreConfiguration.makeSnapshotBuildSlots(limit: try int("TODOSYNC_SNAPSHOT_MAX_BUILDS"))
            return configuration
        }
    }
}

/// A configuration variable that does not parse, or names something that cannot be used.
struct ConfigurationError: Error, CustomStringConvertible {
    let name: String
    let value: String
    var problem = "is not a valid value"
    var description: String { "\(name)=\(value) \(problem)" }
}
