#if canImport(Glibc)
import Glibc
#endif
import CFastCGI

/// One worker's `FCGX_Request`, heap-allocated because libfcgi's streams point back at it, so it
/// must never move. Confined to the worker thread that created it.
final class RequestSlot {
    private let request: UnsafeMutablePointer<FCGX_Request>
    private let listenFD: Int32
    /// Whether accepted connections get TCP_NODELAY (not on a unix listener, where it only fails).
    private let setsNoDelay: Bool
    private var readTimeout: timeval
    private var writeTimeout: timeval

    /// `accept()`'s answer when a connection failed or missed its read deadline before its params
    /// were complete: libfcgi has closed it and there is no request to serve.
    static let connectionDropped: Int32 = -100_001

    /// This slot accepts connections itself, so each one gets its read and write deadlines
    /// (`SO_RCVTIMEO`/`SO_SNDTIMEO`) before libfcgi reads a byte: a peer that sends part of a
    /// request and then nothing is dropped after `readTimeoutSeconds` instead of holding the
    /// worker forever. libfcgi is given no listening socket (-1): when it drops a connection
    /// mid-params it would otherwise accept the next one itself, without deadlines; with -1 that
    /// accept fails at once and `accept()` answers `connectionDropped`.
    init(listenFD: Int32, setsNoDelay: Bool = true, readTimeoutSeconds: Double, writeTimeoutSeconds: Double) {
        self.listenFD = listenFD
        self.setsNoDelay = setsNoDelay
        readTimeout = Self.timeval(seconds: readTimeoutSeconds)
        writeTimeout = Self.timeval(seconds: writeTimeoutSeconds)
        request = .allocate(capacity: 1)
        FCGX_InitRequest(request, -1, 0)
    }

    /// `seconds` as a `timeval` (for `SO_RCVTIMEO`/`SO_SNDTIMEO`; the dispatcher's too).
    static func timeval(seconds: Double) -> Glibc.timeval {
        let whole = seconds.rounded(.down)
        return Glibc.timeval(tv_sec: Int(whole), tv_usec: Int((seconds - whole) * 1_000_000))
    }

    deinit {
        closeConnection()
        request.deallocate()
    }

    /// Finishes the previous request, accepts a new connection unless a kept one is open, then
    /// reads the next request's parameters (`FCGX_Accept_r`). 0 on success; `-errno` when the
    /// listening socket fails; `connectionDropped` when the connection broke or stalled.
    /// `startsReading` gets the connection's descriptor right before the request's first read
    /// (the worker arms its total read deadline there, ``ReadDeadlines``).
    func accept(startsReading: (Int32) -> Void) -> Int32 {
        if request.pointee.ipcFd < 0 {
            FCGX_Finish_r(request)  // frees the previous request (its connection is already closed)
            var fd: Int32
            repeat {
                fd = acceptCloseOnExec(listenFD, nil, nil, Self.socketCloseOnExec)  // one call, no fcntl
            } while fd < 0 && errno == EINTR
            guard fd >= 0 else { return -errno }
            _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &readTimeout, socklen_t(MemoryLayout<timeval>.size))
            _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &writeTimeout, socklen_t(MemoryLayout<timeval>.size))
            if setsNoDelay {
                // On TCP listeners, as libfcgi's own accept did: no Nagle delay between a response's
                // records (an inherited listener may be either kind: there it fails harmlessly).
                var noDelay: Int32 = 1
                _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
            }
            request.pointee.ipcFd = fd
            // FCGX_Accept_r first finishes "the current request": keepConnection stops that from
            // closing the connection just handed over. The request's own flag replaces it.
            request.pointee.keepConnection = 1
        }
        startsReading(request.pointee.ipcFd)
        guard FCGX_Accept_r(request) == 0 else { return Self.connectionDropped }
        // libfcgi's ReadParams takes a failed read (the deadline) for the end of the params and
        // reports success: the stream's error tells a cut-off request from a complete one.
        if FCGX_GetError(request.pointee.in) != 0 {
            closeConnection()
            return Self.connectionDropped
        }
        return 0
    }

    /// Reads the params of the next request on `fd`, a connection accepted elsewhere (the
    /// ``ConnectionDispatcher``) whose request header has arrived: `FCGX_Accept_r` reads from an
    /// open `ipcFd` instead of accepting, and `keepConnection` keeps its opening `FCGX_Finish_r`
    /// from closing it. Answers as ``accept(startsReading:)`` does.
    func adopt(_ fd: Int32, startsReading: (Int32) -> Void) -> Int32 {
        request.pointee.ipcFd = fd
        request.pointee.keepConnection = 1
        return accept(startsReading: startsReading)
    }

    /// Takes the kept connection out of the slot after ``finish(keepConnection:)`` left it open,
    /// for the ``ConnectionDispatcher`` to wait on; -1 when libfcgi closed it.
    func detachConnection() -> Int32 {
        let fd = request.pointee.ipcFd
        request.pointee.ipcFd = -1
        return fd
    }

    /// True when a kept connection (FCGI_KEEP_CONN) is open between requests.
    var hasOpenConnection: Bool { request.pointee.ipcFd >= 0 }

    /// The current connection's descriptor (-1 when none is open).
    var connectionFD: Int32 { request.pointee.ipcFd }

    /// Whether the web server asked to keep the current connection open.
    var keepConnectionRequested: Bool { request.pointee.keepConnection != 0 }

    /// Builds the CGI parameter dictionary from `envp` in one pass; the first of duplicate names wins.
    func parameters() -> [String: String] {
        guard var entry = request.pointee.envp else { return [:] }
        var parameters = [String: String](minimumCapacity: 40)
        while let pointer = entry.pointee {
            let length = strlen(pointer)
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: length)
            if let equals = bytes.firstIndex(of: UInt8(ascii: "=")) {
                let name = String(decoding: UnsafeBufferPointer(rebasing: bytes[..<equals]), as: UTF8.self)
                let value = String(decoding: UnsafeBufferPointer(rebasing: bytes[(equals + 1)...]), as: UTF8.self)
                if let earlier = parameters.updateValue(value, forKey: name) { parameters[name] = earlier }
            }
            entry += 1
        }
        return parameters
    }

    /// Reads exactly `count` bytes of FCGI_STDIN; nil when the stream ends early or fails.
    func readBody(count: Int) -> [UInt8]? {
        guard count > 0 else { return [] }
        let input = request.pointee.in
        let body = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var total = 0
            while total < count {
                let chunk = Int32(clamping: count - total)
                let read = buffer.baseAddress!.advanced(by: total).withMemoryRebound(to: CChar.self, capacity: Int(chunk)) {
                    FCGX_GetStr($0, chunk, input)
                }
                if read <= 0 { break }
                total += Int(read)
            }
            initialized = total
        }
        return body.count == count ? body : nil
    }

    /// Reads FCGI_STDIN through its end-of-stream record, discarding at most `limit` bytes.
    ///
    /// On a kept connection the terminating empty STDIN record must be consumed: otherwise the
    /// next `FCGX_Accept_r` on that connection may read it as a protocol error and drop the
    /// connection, failing the web server's next request. Returns false if the end was not reached.
    func consumeRemainingInput(limit: Int) -> Bool {
        let input = request.pointee.in
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 4096) { scratch in
            var discarded = 0
            while true {
                let read = FCGX_GetStr(scratch.baseAddress!, Int32(scratch.count), input)
                if read <= 0 { break }
                discarded += Int(read)
                if discarded > limit { return false }
            }
            return FCGX_HasSeenEOF(input) == EOF && FCGX_GetError(input) == 0
        }
    }

    /// Appends bytes to FCGI_STDOUT (buffered by libfcgi); false once the connection has failed.
    func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let output = request.pointee.out
        var offset = 0
        while offset < bytes.count {
            let chunk = Int32(clamping: bytes.count - offset)
            let written = FCGX_PutStr(
                bytes.baseAddress!.advanced(by: offset).assumingMemoryBound(to: CChar.self), chunk, output)
            if written != chunk { return false }
            offset += Int(chunk)
        }
        return true
    }

    /// Writes `parts`, in order, as FCGI_STDOUT records made around the caller's bytes where they
    /// lie: no copy into libfcgi's 8 KB stream buffer, and one `writev` for the lot instead of a
    /// `write` per 8 KB. For long bodies (a pull page). What libfcgi holds of the stream is sent
    /// first, so records stay in order; ``completeResponse()`` ends the stream as usual. False
    /// once the connection failed (the socket's send deadline applies, as to libfcgi's writes).
    func writeRecords(_ parts: [UnsafeRawBufferPointer]) -> Bool {
        guard FCGX_FFlush(request.pointee.out) == 0 else { return false }
        var chunks: [UnsafeRawBufferPointer] = []
        for part in parts {
            var offset = 0
            while offset < part.count {
                let count = min(Self.recordContentBytes, part.count - offset)
                chunks.append(UnsafeRawBufferPointer(rebasing: part[offset..<(offset + count)]))
                offset += count
            }
        }
        guard !chunks.isEmpty else { return true }
        let id = UInt16(truncatingIfNeeded: request.pointee.requestId)
        var headers = [UInt8](repeating: 0, count: chunks.count * 8)
        for (index, chunk) in chunks.enumerated() {
            // FCGI_Header: version, type, request id, content length (big-endian), no padding.
            headers.replaceSubrange(index * 8..<(index * 8 + 6), with: [
                UInt8(FCGI_VERSION_1), UInt8(FCGI_STDOUT), UInt8(id >> 8), UInt8(id & 0xFF),
                UInt8(chunk.count >> 8), UInt8(chunk.count & 0xFF),
            ])
        }
        return headers.withUnsafeBytes { headerBytes in
            var vectors: [iovec] = []
            vectors.reserveCapacity(chunks.count * 2)
            for (index, chunk) in chunks.enumerated() {
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: headerBytes.baseAddress! + index * 8),
                                     iov_len: 8))
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: chunk.baseAddress!), iov_len: chunk.count))
            }
            return Self.writeAll(request.pointee.ipcFd, &vectors)
        }
    }

    /// Content bytes per record: the largest multiple of 8 a record's 16-bit length allows.
    static let recordContentBytes = 65_528

    /// `writev` until every vector is written (a partial write resumes where it stopped, within
    /// `IOV_MAX` vectors per call); false on an error.
    private static func writeAll(_ fd: Int32, _ vectors: inout [iovec]) -> Bool {
        var first = 0
        while first < vectors.count {
            let count = min(vectors.count - first, 1024)
            let written = vectors.withUnsafeBufferPointer { writev(fd, $0.baseAddress! + first, Int32(count)) }
            if written < 0 {
                if errno == EINTR { continue }
                return false
            }
            var remaining = written
            while remaining > 0, first < vectors.count {
                if remaining >= vectors[first].iov_len {
                    remaining -= vectors[first].iov_len
                    first += 1
                } else {
                    vectors[first].iov_base = vectors[first].iov_base! + remaining
                    vectors[first].iov_len -= remaining
                    remaining = 0
                }
            }
            while first < vectors.count, vectors[first].iov_len == 0 { first += 1 }
        }
        return true
    }

    /// Sends what libfcgi holds of FCGI_STDOUT now (a streamed body's chunk); false once the
    /// connection has failed.
    func flush() -> Bool {
        FCGX_FFlush(request.pointee.out) == 0
    }

    /// Flushes the response and writes FCGI_END_REQUEST (stderr closed first, which saves a write).
    /// False when the web server went away.
    func completeResponse() -> Bool {
        _ = FCGX_FClose(request.pointee.err)
        return FCGX_FClose(request.pointee.out) == 0
    }

    /// `FCGX_Finish_r`: frees the request's streams and parameters; closes the connection unless
    /// the web server asked to keep it and `keepConnection` is true.
    func finish(keepConnection: Bool) {
        if !keepConnection { request.pointee.keepConnection = 0 }
        FCGX_Finish_r(request)
    }

    /// Closes a connection kept open between requests (a no-op when none is). The descriptor is
    /// closed here because libfcgi's own close lingers up to 2 s waiting for the peer's EOF.
    func closeConnection() {
        if request.pointee.ipcFd >= 0 {
            _ = Glibc.close(request.pointee.ipcFd)
            request.pointee.ipcFd = -1
        }
        finish(keepConnection: false)
    }

    /// Waits until the kept connection has input or `wakeFD` becomes readable (shutdown), at most
    /// `idleMilliseconds`. Returns false on shutdown or when the connection stayed idle that long
    /// (nginx keeps no idle upstream connection: only another peer would park a worker there),
    /// true when libfcgi should go on reading the connection.
    ///
    /// nginx (`fastcgi_keep_conn on`, no upstream `keepalive`) closes the connection right after
    /// each response, so the usual wake-up is the peer's close: that is answered with one `recv`
    /// peek and the caller's plain `close`, not by handing the connection back to libfcgi, whose
    /// read of the EOF, lingering close (`shutdown`, `poll`, `read`), failed `accept(-1)` and the
    /// read deadline's arming around it cost eight more system calls per request.
    func waitForInputOnKeptConnection(wakeFD: Int32, idleMilliseconds: Int32) -> Bool {
        withUnsafeTemporaryAllocation(of: pollfd.self, capacity: 2) { fds in
            fds[0] = pollfd(fd: request.pointee.ipcFd, events: Int16(POLLIN) | Self.peerClosedEvents, revents: 0)
            fds[1] = pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)
            while true {
                let ready = poll(fds.baseAddress!, 2, idleMilliseconds)
                if ready < 0 && errno == EINTR { continue }
                if ready == 0 { return false }  // idle too long
                if ready < 0 { return true }  // let FCGX_Accept_r surface the problem
                if fds[0].revents != 0 {
                    // A request (or EOF) is waiting: serve it first, unless the peer has closed
                    // with nothing left to read (a request sent before the close is still served).
                    if fds[0].revents & (Int16(POLLHUP) | Self.peerClosedEvents) != 0 && peerClosedWithNothingToRead() {
                        return false
                    }
                    return true
                }
                return false
            }
        }
    }

    /// POLLRDHUP (Linux; not in Glibc's module map): the peer shut down its writing side. A unix
    /// socket whose peer closed reports POLLHUP as well; a TCP one only this.
    private static let peerClosedEvents: Int16 = 0x2000

    /// True when reading the connection would give end-of-file at once (no byte waits before it).
    private func peerClosedWithNothingToRead() -> Bool {
        var byte: UInt8 = 0
        while true {
            let read = recv(request.pointee.ipcFd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT))
            if read < 0 && errno == EINTR { continue }
            return read == 0
        }
    }

    /// SOCK_CLOEXEC, which Linux defines as O_CLOEXEC.
    private static let socketCloseOnExec = Int32(O_CLOEXEC)
}

/// `accept4(2)`, which Glibc's module map does not export: the accepted descriptor is
/// close-on-exec from the start, without a separate `fcntl`.
@_silgen_name("accept4")
func acceptCloseOnExec(
    _ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?, _ flags: Int32
) -> Int32
