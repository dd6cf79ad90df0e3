#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import FastCGI
import Foundation
import Logging
import Synchronization

/// A ``FastCGIServer`` running `run(makeHandler:)` on a background thread, on a socket in a fresh
/// temporary directory.
final class TestServer: Sendable {
    let server: FastCGIServer
    let socketPath: String
    let directory: String
    /// Set for TCP and inherited listeners (nil: the unix socket at ``socketPath``).
    let listenAddress: FastCGIListenAddress?
    private let returned = DispatchSemaphore(value: 0)
    private let outcome = Mutex<(any Error)?>(nil)

    init(
        workers: Int = 2, maxBodyBytes: Int = 1 << 20, graceSeconds: Double = 5, socketMode: UInt32 = 0o666,
        directory: String? = nil, listenAddress: FastCGIListenAddress? = nil,
        allowedPeers: PeerAllowList = .everyone, readTimeoutSeconds: Double = 2, readDeadlineSeconds: Double = 5,
        dispatches: Bool = true, keptIdleSeconds: Double = 300
    ) {
        self.listenAddress = listenAddress
        self.directory = directory ?? Self.makeTemporaryDirectory()
        self.socketPath = self.directory + "/fcgi.sock"
        var logger = Logger(label: "FastCGITests")
        // Quiet by default (some tests provoke warnings on purpose); FASTCGI_TEST_LOG_LEVEL=trace to debug.
        logger.logLevel = ProcessInfo.processInfo.environment["FASTCGI_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        server = FastCGIServer(
            configuration: FastCGIServerConfiguration(
                socketPath: socketPath, socketMode: socketMode, readTimeoutSeconds: readTimeoutSeconds,
                readDeadlineSeconds: readDeadlineSeconds, workerCount: workers,
                maxBodyBytes: maxBodyBytes, shutdownGraceSeconds: graceSeconds,
                dispatchesConnections: dispatches, keptIdleSeconds: keptIdleSeconds,
                listenAddress: listenAddress, allowedPeers: allowedPeers),
            logger: logger)
    }

    /// Starts the server and waits until it accepts connections. Throws what `run` threw if it
    /// failed to start.
    func start(makeHandler: @escaping @Sendable (Int) -> (FastCGIRequest) -> FastCGIResponse) throws {
        let server = self.server
        Thread.detachNewThread { [self] in
            do { try server.run(makeHandler: makeHandler) } catch { outcome.withLock { $0 = error } }
            returned.signal()
        }
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let error = outcome.withLock({ $0 }) { throw error }
            if acceptsConnections() { return }
            usleep(5_000)
        }
        throw FastCGITestClient.Failure(description: "server did not start listening")
    }

    /// Whether a connection can be opened (an inherited socket listens before `run` starts, and
    /// connections queue there until the workers accept them).
    private func acceptsConnections() -> Bool {
        let client: FastCGITestClient?
        switch listenAddress {
        case nil, .unix: client = try? FastCGITestClient.connect(to: socketPath)
        case .tcp(let host, let port)?: client = try? FastCGITestClient.connect(host: host, port: port)
        case .inherited?: return true
        }
        client?.close()
        return client != nil
    }

    /// Runs `run` on the calling thread (for tests that expect it to throw).
    func runExpectingFailure() -> (any Error)? {
        do {
            try server.run { _ in { _ in FastCGIResponse() } }
            return nil
        } catch {
            return error
        }
    }

    /// Waits for `run` to return; false on timeout.
    func waitForRunToReturn(timeout: Double) -> Bool {
        returned.wait(timeout: .now() + timeout) == .success
    }

    /// Requests shutdown and returns how long `run` took to return (nil if it did not within `timeout`).
    @discardableResult
    func stop(timeout: Double = 10) -> Double? {
        let start = Date()
        server.requestShutdown()
        guard waitForRunToReturn(timeout: timeout) else { return nil }
        return Date().timeIntervalSince(start)
    }

    /// The error `run` threw, if any.
    var runError: (any Error)? { outcome.withLock { $0 } }

    func removeDirectory() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    static func makeTemporaryDirectory() -> String {
        var template = Array("/tmp/fcgi-test-XXXXXX".utf8CString)
        let path = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(path != nil, "mkdtemp failed")
        return String(cString: path!)
    }
}

/// A value shared between the test and handler threads.
final class Shared<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) {
        storage = Mutex(value)
    }

    var value: Value { storage.withLock { $0 } }

    func update<T>(_ body: (inout Value) -> T) -> T {
        storage.withLock { body(&$0) }
    }
}
