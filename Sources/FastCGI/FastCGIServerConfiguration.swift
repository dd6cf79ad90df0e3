/// Settings for a ``FastCGIServer``.
public struct FastCGIServerConfiguration: Sendable {
    /// Filesystem path of the unix socket the web server connects to (when ``listenAddress`` is nil).
    public var socketPath: String
    /// Where to listen instead of ``socketPath``: a TCP address or an inherited socket.
    /// nil (the default) means the unix socket at ``socketPath``.
    public var listenAddress: FastCGIListenAddress?
    /// TCP peers allowed to connect (default: everyone). Give the web servers' addresses whenever
    /// the responder listens on TCP.
    public var allowedPeers: PeerAllowList
    /// Permission bits given to the socket file after it is created (nginx workers need write
    /// access: give them the owner or `socketGroupID`; never world-writable by default).
    public var socketMode: UInt32
    /// Group given to the socket file (the web server's group), or nil to keep the process's.
    public var socketGroupID: UInt32?
    /// Deadline, in seconds, for each read of a request's params and body from the web server.
    /// nginx sends a whole request at once, so only a stalled or hostile peer waits this long:
    /// it is then dropped instead of holding a worker forever.
    public var readTimeoutSeconds: Double
    /// Total deadline, in seconds, for a whole request (params and body) from its first byte, and
    /// the longest a kept connection may sit idle between requests. ``readTimeoutSeconds`` alone
    /// restarts with every read, so a peer trickling a byte at a time could hold a worker
    /// indefinitely; this bounds it (``ReadDeadlines``). nginx hands over a buffered request at
    /// once, in well under a second even for a 1 MiB body.
    public var readDeadlineSeconds: Double
    /// Deadline for each write of a response to a web server that stopped reading.
    public var writeTimeoutSeconds: Double
    /// `listen(2)` backlog (the kernel caps it at `net.core.somaxconn`).
    public var backlog: Int32
    /// Number of worker threads; each serves one request at a time.
    ///
    /// With ``dispatchesConnections`` off and `fastcgi_keep_conn on`, a worker stays bound to one
    /// nginx connection, so keep this at least as high as the number of upstream connections nginx
    /// may hold open.
    public var workerCount: Int
    /// One thread (epoll) waits on the listening socket and on every connection between requests,
    /// and hands a connection to a worker only once a request's header has arrived
    /// (``ConnectionDispatcher``): kept connections (nginx upstream `keepalive`) cost no worker
    /// while idle. Off: each worker accepts and stays with its connection (the old way).
    public var dispatchesConnections: Bool
    /// How long a kept connection may sit idle between requests when ``dispatchesConnections`` is
    /// on. Keep it above nginx's upstream `keepalive_timeout`, so nginx closes idle connections
    /// first (a close from the responder's side can cross a request nginx is sending).
    public var keptIdleSeconds: Double
    /// Largest request body that is read. Requests declaring a larger `CONTENT_LENGTH` reach the
    /// handler with an empty body and ``FastCGIRequest/bodyTooLarge`` set.
    public var maxBodyBytes: Int
    /// How long a shutdown waits for in-flight requests before ``FastCGIServer/run(makeHandler:)`` returns anyway.
    public var shutdownGraceSeconds: Double

    /// Creates a configuration; every value has a production default.
    public init(
        socketPath: String = "/tmp/todosync.sock",
        socketMode: UInt32 = 0o660,
        socketGroupID: UInt32? = nil,
        readTimeoutSeconds: Double = 2,
        readDeadlineSeconds: Double = 5,
        writeTimeoutSeconds: Double = 30,
        backlog: Int32 = 1024,
        workerCount: Int = 16,
        maxBodyBytes: Int = 1 << 20,
        shutdownGraceSeconds: Double = 10,
        dispatchesConnections: Bool = true,
        keptIdleSeconds: Double = 300,
        listenAddress: FastCGIListenAddress? = nil,
        allowedPeers: PeerAllowList = .everyone
    ) {
        self.listenAddress = listenAddress
        self.allowedPeers = allowedPeers
        self.socketPath = socketPath
        self.socketMode = socketMode
        self.socketGroupID = socketGroupID
        self.readTimeoutSeconds = readTimeoutSeconds
        self.readDeadlineSeconds = readDeadlineSeconds
        self.writeTimeoutSeconds = writeTimeoutSeconds
        self.backlog = backlog
        self.workerCount = workerCount
        self.maxBodyBytes = maxBodyBytes
        self.shutdownGraceSeconds = shutdownGraceSeconds
        self.dispatchesConnections = dispatchesConnections
        self.keptIdleSeconds = keptIdleSeconds
    }
}

extension FastCGIServerConfiguration {
    /// `sun_path` holds 108 bytes including the terminating NUL.
    static let maximumSocketPathBytes = 107

    /// What the server listens on: ``listenAddress``, or the unix socket at ``socketPath``.
    public var effectiveListenAddress: FastCGIListenAddress {
        listenAddress ?? .unix(path: socketPath)
    }

    /// Throws ``FastCGIServerError/invalidConfiguration(_:)`` naming the first bad field.
    func validate() throws(FastCGIServerError) {
        switch effectiveListenAddress {
        case .unix(let path):
            let pathBytes = path.utf8.count
            if pathBytes == 0 || path.utf8.contains(0) {
                throw .invalidConfiguration("socketPath must be a non-empty path without NUL bytes")
            }
            if pathBytes > Self.maximumSocketPathBytes {
                throw .invalidConfiguration(
                    "socketPath is \(pathBytes) bytes; unix socket paths are limited to \(Self.maximumSocketPathBytes)")
            }
        case .tcp(let host, _):
            if IPAddress(host) == nil { throw .invalidConfiguration("listen host \(host) must be an IP address") }
        case .inherited(let fd):
            if fd < 0 { throw .invalidConfiguration("an inherited listening descriptor must be at least 0") }
        }
        if socketMode > 0o7777 {
            throw .invalidConfiguration("socketMode must be a permission mask (at most 0o7777)")
        }
        if backlog < 1 {
            throw .invalidConfiguration("backlog must be at least 1")
        }
        if workerCount < 1 || workerCount > 4096 {
            throw .invalidConfiguration("workerCount must be between 1 and 4096")
        }
        if maxBodyBytes < 0 || maxBodyBytes > Int(Int32.max) {
            throw .invalidConfiguration("maxBodyBytes must be between 0 and \(Int32.max)")
        }
        for (name, value) in [
            ("readTimeoutSeconds", readTimeoutSeconds), ("readDeadlineSeconds", readDeadlineSeconds),
            ("writeTimeoutSeconds", writeTimeoutSeconds), ("keptIdleSeconds", keptIdleSeconds),
        ]
        where !value.isFinite || value <= 0 || value > 3600 {
            throw .invalidConfiguration("\(name) must be more than 0 and at most 3600")
        }
        if !shutdownGraceSeconds.isFinite || shutdownGraceSeconds < 0 {
            throw .invalidConfiguration("shutdownGraceSeconds must be a finite, non-negative number")
        }
    }
}
