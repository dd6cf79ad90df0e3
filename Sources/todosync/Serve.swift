import Foundation
import ArgumentParser
import FastCGI
import Logging
import MariaDB
import TodoSyncAPI
import TodoSyncCore
import TodoSyncStore

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the FastCGI responder until SIGTERM/SIGINT.")

    @Option(help: "Unix socket to listen on (default: $TODOSYNC_SOCKET or /tmp/todosync.sock).")
    var socket: String?

    @Option(help: "Worker threads, each with its own database connection (default: $TODOSYNC_WORKERS or 4 per online CPU core, 8 to 64; per responder process).")
    var workers: Int?

    @Option(help: "Group given to the socket file (default: $TODOSYNC_SOCKET_GROUP, else the process's); the socket is 0660.")
    var socketGroup: String?

    @Flag(help: "Enable test-only hooks (GET /healthz?delay_ms=N). Never in production.")
    var enableTestHooks = false

    /// Four workers per online core, 8 to 64. Requests wait in the listen queue when all workers
    /// are busy; more threads than that only add scheduling and InnoDB contention (measured on
    /// 2 cores: 8 workers beat 12 and 32 on throughput and p99, see README "Benchmarks").
    static var defaultWorkerCount: Int {
        min(max(4 * max(sysconf(Int32(_SC_NPROCESSORS_ONLN)), 1), 8), 64)
    }

    func run() throws {
        let environment = Environment()
        let logger = bootstrapLogging(environment)
        let database = try environment.database
        let storeConfiguration = try environment.store
        let options = ApplicationOptions(enableTestHooks: enableTestHooks)
        var configuration = FastCGIServerConfiguration(
            socketPath: socket ?? environment.string("TODOSYNC_SOCKET", default: "/tmp/todosync.sock"))
        configuration.workerCount = try workers ?? environment.int("TODOSYNC_WORKERS", default: Self.defaultWorkerCount)
        // The socket is 0660: nginx reaches it as its owner or through this group.
        if let group = socketGroup ?? environment.optionalString("TODOSYNC_SOCKET_GROUP") {
            guard let entry = getgrnam(group) else {
                throw ValidationError("socket group '\(group)' does not exist")
            }
            configuration.socketGroupID = entry.pointee.gr_gid
        }
        configuration.readTimeoutSeconds = Double(
            try environment.int("TODOSYNC_FASTCGI_READ_TIMEOUT", default: Int(configuration.readTimeoutSeconds)))

        MariaDBLibrary.initialize()
        logger.info("starting", metadata: [
            "socket": "\(configuration.socketPath)", "workers": "\(configuration.workerCount)",
        ])
        let server = FastCGIServer(configuration: configuration, logger: logger)
        try server.run { workerIndex in
            var workerLogger = logger
            workerLogger[metadataKey: "worker"] = "\(workerIndex)"
            let store = Store(connection: Connection(configuration: database), configuration: storeConfiguration)
            let application = Application(store: store, logger: workerLogger, options: options)
            return { request in
                let response = application.handle(HTTPRequest(request), requestID: request.header("X-Request-Id"))
                return FastCGIResponse(
                    status: response.status,
                    headers: response.headers.map { (name: $0.name, value: $0.value) },
                    body: response.body)
            }
        }
        logger.info("stopped")
    }
}

extension HTTPRequest {
    /// Adapts a FastCGI request: CGI `HTTP_*` params become headers; the path is nginx's
    /// normalised `DOCUMENT_URI` when present.
    init(_ request: FastCGIRequest) {
        var headers: [String: String] = [:]
        for (name, value) in request.parameters {
            if name.hasPrefix("HTTP_") {
                headers[name.dropFirst(5).lowercased().replacingOccurrences(of: "_", with: "-")] = value
            } else if name == "CONTENT_TYPE", !value.isEmpty {
                headers["content-type"] = value
            } else if name == "CONTENT_LENGTH", !value.isEmpty {
                headers["content-length"] = value
            }
        }
        let path = request.parameters["DOCUMENT_URI"].flatMap { $0.isEmpty ? nil : $0 } ?? request.path
        self.init(method: request.method, path: path, queryString: request.queryString, headers: headers,
                  body: request.body, bodyTooLarge: request.bodyTooLarge)
    }
}
