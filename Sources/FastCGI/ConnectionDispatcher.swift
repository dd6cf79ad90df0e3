#if canImport(Glibc)
import Glibc
#endif
import CFastCGI
import CoreMetrics
import Dispatch
import Logging
import Synchronization

/// Kept FastCGI connections without bound threads (issue 39, item 1).
///
/// With nginx's upstream `keepalive` and `fastcgi_keep_conn on`, a connection stays open between
/// requests. When each worker thread accepted its own connections, an idle kept connection held
/// its worker until nginx sent the next request on it, so more kept connections than threads left
/// requests waiting in the listen queue for seconds (PLATFORM-NOTES, "Kept connections").
///
/// Here one thread waits, with epoll, on the listening socket and on every connection that no
/// worker serves: new ones, and kept ones between requests. It peeks at a connection's bytes and
/// hands it to a free worker only once the request's header (FCGI_BEGIN_REQUEST and its params,
/// through the empty PARAMS record) has arrived, so a peer that sends part of a request, or
/// nothing, costs no worker. The worker reads the params and body with libfcgi
/// (``RequestSlot/adopt(_:startsReading:)``), answers, and gives a kept connection back
/// (``giveBack(_:)``), which costs the dispatcher one epoll registration.
///
/// Deadlines, checked every 100 ms: a new connection must deliver its header within the read
/// deadline (from accept, as before); a kept connection, from its first byte of a request; a kept
/// connection may sit idle for ``FastCGIServerConfiguration/keptIdleSeconds`` (longer than nginx's
/// own upstream `keepalive_timeout`, so that nginx, not the responder, closes an idle kept
/// connection: a close from this side could cross a request nginx is sending on it).
///
/// Shutdown: the listen queue is drained (queued connections are still served), idle kept
/// connections are closed at once (nginx sees each one's end and drops it from its cache), a
/// request already arriving is still served, and each worker closes its connection after its
/// response. The dispatcher stops once no connection is left with it, then releases the workers.
final class ConnectionDispatcher: Sendable {
    private struct Entry {
        var since: UInt64
        var requestStarted: UInt64?
        var kept: Bool
    }

    private struct State {
        var entries: [Int32: Entry] = [:]
        var closed = false
    }

    private let epollFD: Int32
    private let listener: Listener
    private let wakeFD: Int32
    private let setsNoDelay: Bool
    private let allowedPeers: PeerAllowList
    private let readTimeout: timeval
    private let writeTimeout: timeval
    private let readDeadlineMilliseconds: UInt64
    private let keptIdleMilliseconds: UInt64
    private let lifecycle: ServerLifecycle
    private let logger: Logger
    private let state = Mutex(State())
    private let handoff = HandoffQueue()

    /// Connections waiting with the dispatcher (new or kept, no worker on them).
    static let waiting = Meter(label: "todosync_fastcgi_connections_waiting")

    init(
        listener: Listener, wakeFD: Int32, configuration: FastCGIServerConfiguration, lifecycle: ServerLifecycle,
        logger: Logger
    ) throws(FastCGIServerError) {
        let epollFD = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epollFD >= 0 else { throw .systemCallFailed(operation: "epoll_create1", errno: errno) }
        self.epollFD = epollFD
        self.listener = listener
        self.wakeFD = wakeFD
        setsNoDelay = listener.acceptsTCP
        allowedPeers = configuration.allowedPeers
        readTimeout = RequestSlot.timeval(seconds: configuration.readTimeoutSeconds)
        writeTimeout = RequestSlot.timeval(seconds: configuration.writeTimeoutSeconds)
        readDeadlineMilliseconds = UInt64(configuration.readDeadlineSeconds * 1000)
        keptIdleMilliseconds = UInt64(configuration.keptIdleSeconds * 1000)
        self.lifecycle = lifecycle
        self.logger = logger
        // Only this thread accepts: a listener that stays readable must not block it.
        listener.setNonBlocking(true)
        guard add(listener.fd, events: EPOLLIN.rawValue), add(wakeFD, events: EPOLLIN.rawValue) else {
            let code = errno
            _ = close(epollFD)
            throw .systemCallFailed(operation: "epoll_ctl", errno: code)
        }
    }

    // MARK: workers' side

    /// The next connection whose request header has arrived; nil once the server stops.
    func next() -> Int32? {
        handoff.take()
    }

    /// A worker is done with a kept connection's request: the connection waits here for the next.
    func giveBack(_ fd: Int32) {
        if !register(fd, kept: true) { _ = close(fd) }
    }

    // MARK: the dispatcher thread

    /// Runs until shutdown has drained every connection, then lets `workerCount` workers go.
    func run(workerCount: Int) {
        let capacity = 256
        let events = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        let peek = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.peekBytes, alignment: 8)
        defer {
            events.deallocate()
            peek.deallocate()
        }
        var stopping = false
        var listening = true
        var acceptPausedUntil: UInt64?
        var lastSweep = Self.nowMilliseconds()
        while true {
            let count = epoll_wait(epollFD, events, Int32(capacity), 100)
            if count < 0 && errno != EINTR {
                logger.critical("FastCGI dispatcher: epoll_wait failed", metadata: ["errno": "\(errno)"])
                lifecycle.requestShutdown()
            }
            for index in 0..<max(Int(count), 0) {
                let fd = events[index].data.fd
                let flags = events[index].events
                if fd == listener.fd {
                    if listening && acceptPausedUntil == nil {
                        acceptPausedUntil = acceptAll(draining: false)
                    }
                } else if fd == wakeFD {
                    continue  // handled below (the pipe stays readable)
                } else {
                    examine(fd, flags: flags, buffer: peek)
                }
            }
            if !stopping && lifecycle.isStopping {
                stopping = true
                _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, wakeFD, nil)
            }
            if stopping && listening {
                // Connections already queued are still served; then the listener is left alone.
                _ = acceptAll(draining: true)
                listening = false
                _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, listener.fd, nil)
            }
            let now = Self.nowMilliseconds()
            if let until = acceptPausedUntil, now >= until {
                acceptPausedUntil = nil
                if listening { acceptPausedUntil = acceptAll(draining: false) }
            }
            if stopping || now - lastSweep >= 100 {
                lastSweep = now
                sweep(now: now, stopping: stopping)
            }
            if stopping && state.withLock({ state in
                if state.entries.isEmpty { state.closed = true }
                return state.closed
            }) {
                break
            }
        }
        _ = close(epollFD)
        Self.waiting.set(0)
        handoff.close(releasing: workerCount)
    }

    /// Accepts every queued connection. Returns when to try again after running out of
    /// descriptors (nil otherwise). `draining`: shutdown; an empty queue ends accepting.
    private func acceptAll(draining: Bool) -> UInt64? {
        while true {
            let fd = acceptCloseOnExec(listener.fd, nil, nil, Int32(O_CLOEXEC))
            if fd < 0 {
                let code = errno
                if code == EINTR { continue }
                if code == EAGAIN || code == EWOULDBLOCK || draining { return nil }
                switch code {
                case ECONNABORTED, EPROTO, EPERM:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    logger.error("FastCGI accept failed; pausing 100 ms", metadata: ["errno": "\(code)"])
                    return Self.nowMilliseconds() + 100
                default:
                    if lifecycle.isStopping { return nil }
                    logger.critical("FastCGI accept failed; shutting the server down", metadata: ["errno": "\(code)"])
                    lifecycle.requestShutdown()
                    return nil
                }
            }
            var readTimeout = readTimeout
            var writeTimeout = writeTimeout
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &readTimeout, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &writeTimeout, socklen_t(MemoryLayout<timeval>.size))
            if setsNoDelay {
                var noDelay: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
            }
            // Once per connection: a kept connection's peer never changes.
            guard allowedPeers.allowsPeer(of: fd) else {
                logger.warning("FastCGI connection from a peer outside the allow-list closed unanswered")
                _ = close(fd)
                continue
            }
            if !register(fd, kept: false) { _ = close(fd) }
        }
    }

    /// Puts `fd` in the table and in epoll (edge-triggered: an event per arrival of bytes, and one
    /// at once when bytes already wait). False when the dispatcher has stopped (the caller closes).
    private func register(_ fd: Int32, kept: Bool) -> Bool {
        let now = Self.nowMilliseconds()
        let added = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.entries[fd] = Entry(since: now, requestStarted: nil, kept: kept)
            return true
        }
        guard added else { return false }
        Self.waiting.increment()
        if !add(fd, events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLET.rawValue) {
            // Still ours in the table: the sweep would close it; do it now.
            if state.withLock({ $0.entries.removeValue(forKey: fd) }) != nil {
                Self.waiting.decrement()
                return false
            }
        }
        return true
    }

    private func add(_ fd: Int32, events: UInt32) -> Bool {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        return epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) == 0
    }

    /// Takes `fd` out of the table and epoll; false if it was not there (already taken).
    private func remove(_ fd: Int32) -> Bool {
        guard state.withLock({ $0.entries.removeValue(forKey: fd) }) != nil else { return false }
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
        Self.waiting.decrement()
        return true
    }

    /// Bytes arrived on (or the peer closed) a waiting connection: hand it to a worker once its
    /// request header is complete, close it when the peer has gone.
    private func examine(_ fd: Int32, flags: UInt32, buffer: UnsafeMutableRawBufferPointer) {
        var read: Int
        repeat {
            read = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
        } while read < 0 && errno == EINTR
        if read < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
            if flags & (EPOLLHUP.rawValue | EPOLLERR.rawValue) == 0 { return }
            read = 0
        }
        if read <= 0 {
            if remove(fd) { _ = close(fd) }  // the peer closed (or failed) with nothing to read
            return
        }
        switch Self.header(in: UnsafeRawBufferPointer(rebasing: buffer[0..<read]), full: read == buffer.count) {
        case .complete:
            if remove(fd) { handoff.put(fd) }
        case .incomplete:
            if flags & (EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                if remove(fd) { _ = close(fd) }  // the rest can never come
                return
            }
            let now = Self.nowMilliseconds()
            state.withLock { state in
                if state.entries[fd]?.requestStarted == nil { state.entries[fd]?.requestStarted = now }
            }
        }
    }

    enum Header: Equatable {
        /// The params are in (or libfcgi must judge the bytes): a worker takes over.
        case complete
        /// Wait for more bytes.
        case incomplete
    }

    /// How much of a connection is peeked at: nginx's params are a few KB.
    static let peekBytes = 64 * 1024

    /// Whether `bytes`, the start of a connection's unread input, hold a whole request header:
    /// records up to and including the empty FCGI_PARAMS record. Bytes that are not FastCGI
    /// records, and a header longer than `peekBytes` (`full`), go to a worker as they are, to be
    /// read (and refused) by libfcgi under the read deadline.
    static func header(in bytes: UnsafeRawBufferPointer, full: Bool) -> Header {
        var offset = 0
        while offset + 8 <= bytes.count {
            guard bytes[offset] == UInt8(FCGI_VERSION_1) else { return .complete }
            let type = bytes[offset + 1]
            let length = Int(bytes[offset + 4]) << 8 | Int(bytes[offset + 5])
            if type == UInt8(FCGI_PARAMS) && length == 0 { return .complete }
            offset += 8 + length + Int(bytes[offset + 6])
        }
        return full ? .complete : .incomplete
    }

    /// Closes the connections past their deadline, and during shutdown every idle kept one.
    private func sweep(now: UInt64, stopping: Bool) {
        var late: [Int32] = []
        var idle: [Int32] = []
        state.withLock { state in
            for (fd, entry) in state.entries {
                if let started = entry.requestStarted, entry.kept {
                    if now - started >= readDeadlineMilliseconds { late.append(fd) }
                } else if !entry.kept {
                    if now - entry.since >= readDeadlineMilliseconds {
                        if entry.requestStarted != nil { late.append(fd) } else { idle.append(fd) }
                    }
                } else if stopping || now - entry.since >= keptIdleMilliseconds {
                    idle.append(fd)
                }
            }
        }
        for fd in late + idle where remove(fd) {
            _ = shutdown(fd, Int32(SHUT_RDWR))
            _ = close(fd)
        }
        if !late.isEmpty {
            ReadDeadlines.expired.increment(by: late.count)
            logger.warning(
                "FastCGI request not received within its total read deadline; connection closed",
                metadata: ["connections": "\(late.count)", "deadline_seconds": "\(Double(readDeadlineMilliseconds) / 1000)"])
        }
    }

    static func nowMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1000 + UInt64(now.tv_nsec) / 1_000_000
    }
}

/// Connections whose header has arrived, waiting for a free worker (first in, first out).
final class HandoffQueue: Sendable {
    private struct State {
        var fds: [Int32] = []
        var head = 0
        var closed = false
    }

    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)

    func put(_ fd: Int32) {
        state.withLock { $0.fds.append(fd) }
        available.signal()
    }

    /// Blocks until a connection is queued (it is returned) or the queue is closed (nil).
    func take() -> Int32? {
        available.wait()
        return state.withLock { state -> Int32? in
            guard state.head < state.fds.count else { return nil }
            let fd = state.fds[state.head]
            state.head += 1
            if state.head == state.fds.count {
                state.fds.removeAll(keepingCapacity: true)
                state.head = 0
            }
            return fd
        }
    }

    /// Queued connections are still taken; then each of `waiters` takers gets nil.
    func close(releasing waiters: Int) {
        state.withLock { $0.closed = true }
        for _ in 0..<waiters { available.signal() }
    }
}
