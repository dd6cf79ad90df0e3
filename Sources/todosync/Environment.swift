import Foundation
import MariaDB
import TodoSyncStore

/// Configuration read from `TODOSYNC_*` environment variables, with defaults that just work
/// with the run script's private stack.
struct Environment {
    private let values: [String: String]

    init(_ values: [String: String] = ProcessInfo.processInfo.environment) {
        self.values = values
    }

    func string(_ name: String, default fallback: String) -> String {
        if let value = values[name], !value.isEmpty { return value }
        return fallback
    }

    /// The variable's value, nil when unset or empty.
    func optionalString(_ name: String) -> String? {
        values[name].flatMap { $0.isEmpty ? nil : $0 }
    }

    func int(_ name: String, default fallback: Int) throws -> Int {
        guard let text = values[name], !text.isEmpty else { return fallback }
        guard let value = Int(text) else { throw ConfigurationError(name: name, value: text) }
        return value
    }

    var database: ConnectionConfiguration {
        get throws {
            var configuration = ConnectionConfiguration(
                host: string("TODOSYNC_DB_HOST", default: "127.0.0.1"),
                port: try int("TODOSYNC_DB_PORT", default: 3306),
                unixSocket: values["TODOSYNC_DB_SOCKET"].flatMap { $0.isEmpty ? nil : $0 },
                user: string("TODOSYNC_DB_USER", default: "todosync"),
                password: try databasePassword,
                database: string("TODOSYNC_DB_NAME", default: "todosync"),
                // Short lock waits: a request queued behind its own account's row lock gives its
                // worker back quickly (503, nothing applied) instead of parking it.
                lockWaitTimeoutSeconds: UInt32(clamping: max(1, try int("TODOSYNC_DB_LOCK_WAIT_TIMEOUT", default: 1))))
            configuration.transactionAttempts = max(try int("TODOSYNC_DB_TRANSACTION_ATTEMPTS", default: 5), 1)
            // TODOSYNC_DB_HOSTS=h1:3306,h2:3306,...: several servers (Galera nodes), tried in this
            // order for each new session; the first is this host's preferred node.
            let hosts = string("TODOSYNC_DB_HOSTS", default: "")
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

    /// TODOSYNC_DB_PASSWORD when set and not empty, else the first line of
    /// TODOSYNC_DB_PASSWORD_FILE (the stack generates one on first run), else "todosync".
    var databasePassword: String {
        get throws {
            if let password = optionalString("TODOSYNC_DB_PASSWORD") { return password }
            guard let path = optionalString("TODOSYNC_DB_PASSWORD_FILE") else { return "todosync" }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ConfigurationError(name: "TODOSYNC_DB_PASSWORD_FILE", value: path)
            }
            return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first.map(String.init) ?? ""
        }
    }

    var store: StoreConfiguration {
        get throws {
            var configuration = StoreConfiguration()
            configuration.tokenLifetimeSeconds = Int64(try int("TODOSYNC_TOKEN_TTL_DAYS", default: 90)) * 86400
            configuration.loginMaxFailures = try int("TODOSYNC_LOGIN_MAX_FAILURES", default: 10)
            configuration.loginLockoutSeconds = Int64(try int("TODOSYNC_LOGIN_LOCKOUT_SECONDS", default: 900))
            // Half the cores by default: hashing alone can then never take every core.
            let slots = try int("TODOSYNC_HASH_CONCURRENCY", default: max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) / 2))
            guard slots >= 1 else {
                throw ConfigurationError(name: "TODOSYNC_HASH_CONCURRENCY", value: "\(slots)")
            }
            configuration.hashConcurrency = slots
            configuration.quotaRecords = try int("TODOSYNC_QUOTA_RECORDS", default: configuration.quotaRecords)
            configuration.quotaOperationsPerHour = try int(
                "TODOSYNC_QUOTA_OPERATIONS_PER_HOUR", default: configuration.quotaOperationsPerHour)
            configuration.requestBudgetMilliseconds = Int64(try int("TODOSYNC_REQUEST_BUDGET_MS", default: 20_000))
            guard configuration.requestBudgetMilliseconds >= 100 else {
                throw ConfigurationError(name: "TODOSYNC_REQUEST_BUDGET_MS", value: "\(configuration.requestBudgetMilliseconds)")
            }
            // At least the contract's 24 hours.
            configuration.idempotencyRetentionSeconds =
                Int64(max(try int("TODOSYNC_IDEMPOTENCY_RETENTION_HOURS", default: 24), 24)) * 3600
            return configuration
        }
    }
}

/// An environment variable that does not parse.
struct ConfigurationError: Error, CustomStringConvertible {
    let name: String
    let value: String
    var description: String { "\(name)=\(value) is not a valid value" }
}
