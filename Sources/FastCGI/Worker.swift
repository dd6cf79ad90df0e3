#if canImport(Glibc)
import Glibc
#endif
import Logging

/// One worker thread's accept loop: accept, build the request, call the handler, write the response.
struct Worker: Sendable {
    let index: Int
    let listenFD: Int32
    /// Whether accepted connections get TCP_NODELAY (false for a unix listener).
    let setsNoDelay: Bool
    let wakeFD: Int32
    let maxBodyBytes: Int
    let allowedPeers: PeerAllowList
    let readTimeoutSeconds: Double
    let writeTimeoutSeconds: Double
    /// Each request's total read deadline (``FastCGIServerConfiguration/readDeadlineSeconds``).
    let readDeadlines: ReadDeadlines
    /// How long a kept connection may sit idle between requests (the same deadline).
    let idleMilliseconds: Int32
    let lifecycle: ServerLifecycle
    let logger: Logger
    /// When set, connections come from it (kept ones included) and go back to it between
    /// requests; the worker never accepts nor waits on an idle connection.
    var dispatcher: ConnectionDispatcher? = nil

    /// How much unread request body a kept connection may discard before it is closed instead.
    private static let keptConnectionDrainLimit = 64 * 1024
    /// Consecutive unexpected accept failures (backing off up to 1 s) before the server gives up.
    private static let maximumAcceptFailures = 50

    /// Runs until shutdown has drained the listen queue (or the listener fails for good).
    func run(makeHandler: @Sendable (Int) -> (FastCGIRequest) -> FastCGIResponse) {
        if let dispatcher {
            runDispatched(dispatcher, makeHandler: makeHandler)
            return
        }
        let slot = RequestSlot(
            listenFD: listenFD, setsNoDelay: setsNoDelay, readTimeoutSeconds: readTimeoutSeconds,
            writeTimeoutSeconds: writeTimeoutSeconds)
        let handler = makeHandler(index)
        logger.debug("FastCGI worker started")
        var failures = 0
        while true {
            if slot.hasOpenConnection
                && !slot.waitForInputOnKeptConnection(wakeFD: wakeFD, idleMilliseconds: idleMilliseconds) {
                slot.closeConnection()
            }
            let result = slot.accept { [readDeadlines, index] fd in readDeadlines.arm(worker: index, fd: fd) }
            if result != 0 { readDeadlines.disarm(worker: index) }
            if result == RequestSlot.connectionDropped {
                // A connection that failed or stalled (read deadline) before its params were
                // complete: libfcgi closed it; nothing to answer.
                logger.debug("FastCGI connection dropped before a complete request")
                continue
            }
            if result != 0 {
                // After shutdown, accept fails with EINVAL once the pending-connection queue is empty.
                if lifecycle.isStopping { break }
                failures += 1
                if failures >= Self.maximumAcceptFailures || !Self.isTransient(result) {
                    logger.critical(
                        "FastCGI accept failed; shutting the server down",
                        metadata: ["code": "\(result)", "failures": "\(failures)"])
                    lifecycle.requestShutdown()
                    break
                }
                logger.error("FastCGI accept failed; retrying", metadata: ["code": "\(result)"])
                usleep(useconds_t(min(10_000 << min(failures - 1, 7), 1_000_000)))
                continue
            }
            failures = 0
            // Checked on every request, a kept connection's next one included (RequestSlot
            // accepts connections itself; libfcgi never does).
            if !allowedPeers.allowsPeer(of: slot.connectionFD) {
                logger.warning("FastCGI connection from a peer outside the allow-list closed unanswered")
                slot.closeConnection()
                continue
            }
            serve(slot: slot, handler: handler)
        }
        logger.debug("FastCGI worker stopped")
    }

    /// Serves the connections the dispatcher hands over, one request each, until it stops.
    private func runDispatched(
        _ dispatcher: ConnectionDispatcher, makeHandler: @Sendable (Int) -> (FastCGIRequest) -> FastCGIResponse
    ) {
        let slot = RequestSlot(
            listenFD: -1, setsNoDelay: setsNoDelay, readTimeoutSeconds: readTimeoutSeconds,
            writeTimeoutSeconds: writeTimeoutSeconds)
        let handler = makeHandler(index)
        logger.debug("FastCGI worker started (dispatched connections)")
        while let fd = dispatcher.next() {
            let result = slot.adopt(fd) { [readDeadlines, index] fd in readDeadlines.arm(worker: index, fd: fd) }
            guard result == 0 else {
                readDeadlines.disarm(worker: index)
                logger.debug("FastCGI connection dropped before a complete request")
                slot.closeConnection()
                continue
            }
            serve(slot: slot, handler: handler)
            if slot.hasOpenConnection { dispatcher.giveBack(slot.detachConnection()) }
        }
        logger.debug("FastCGI worker stopped")
    }

    private func serve(slot: RequestSlot, handler: (FastCGIRequest) -> FastCGIResponse) {
        WorkerMetrics.busy.increment()
        defer { WorkerMetrics.busy.decrement() }
        let parameters = slot.parameters()
        let contentLength = parameters["CONTENT_LENGTH"].flatMap { Int($0) }.map { max($0, 0) } ?? 0
        var keepConnection = slot.keepConnectionRequested

        let request: FastCGIRequest
        if contentLength > maxBodyBytes {
            request = FastCGIRequest(parameters: parameters, body: [], bodyTooLarge: true)
            keepConnection = false  // the unread body would corrupt the next request on this connection
        } else if let body = slot.readBody(count: contentLength) {
            request = FastCGIRequest(parameters: parameters, body: body, bodyTooLarge: false)
            // Consume stdin's end record now, before FCGI_END_REQUEST lets the web server send the
            // next request: libfcgi reads greedily into a per-request buffer that Finish discards.
            if keepConnection { keepConnection = slot.consumeRemainingInput(limit: Self.keptConnectionDrainLimit) }
        } else {
            readDeadlines.disarm(worker: index)
            logger.debug(
                "FastCGI request body ended early (or missed its total read deadline); dropping the request",
                metadata: ["content_length": "\(contentLength)"])
            slot.finish(keepConnection: false)
            return
        }
        // The whole request is in: the handler's time is not the peer's (the responder's own
        // request budget bounds it, TODOSYNC_REQUEST_BUDGET_MS).
        readDeadlines.disarm(worker: index)

        let response = handler(request)
        let written = write(response, to: slot)
        if !written {
            logger.debug(
                "web server went away before the response was written", metadata: ["uri": "\(request.uri.prefix(256))"])
        }
        logger.trace(
            "FastCGI request served",
            metadata: [  // client-controlled values capped (issue 19, item 6)
                "method": "\(request.method.prefix(16))", "uri": "\(request.uri.prefix(256))",
                "status": "\(response.status)",
            ])
        if keepConnection && written && lifecycle.isStopping {
            // Shutting down: drop the kept connection now. Its response is complete and its input
            // consumed, so a direct close loses nothing; libfcgi's close would linger up to 2 s
            // for an EOF that the web server never sends on a kept connection.
            slot.closeConnection()
        } else {
            slot.finish(keepConnection: keepConnection && written)
        }
    }

    /// Writes the head in one `FCGX_PutStr`, the body in another (libfcgi copies both into its
    /// buffer), then flushes with FCGI_END_REQUEST; a body longer than `directBodyBytes` goes out
    /// with the head in one `writev` of records around its bytes instead (no copy). False if the
    /// connection failed.
    private func write(_ response: FastCGIResponse, to slot: RequestSlot) -> Bool {
        let head = ResponseHead(response)
        if head.status != response.status {
            logger.error("handler returned an invalid HTTP status; sent 500", metadata: ["status": "\(response.status)"])
        }
        if !head.droppedHeaderNames.isEmpty {
            logger.warning(
                "dropped malformed response headers", metadata: ["headers": "\(head.droppedHeaderNames)"])
        }
        if let stream = response.stream, head.includesBody, head.status == response.status {
            return writeStreamed(head, stream, to: slot)
        }
        var ok: Bool
        if head.includesBody && response.body.count > Self.directBodyBytes {
            // A long body goes out from where it lies, in records of up to 64 KB, head first.
            ok = head.bytes.withUnsafeBytes { head in response.body.withUnsafeBytes { slot.writeRecords([head, $0]) } }
        } else {
            ok = head.bytes.withUnsafeBytes { slot.write($0) }
            if ok && head.includesBody && !response.body.isEmpty {
                ok = response.body.withUnsafeBytes { slot.write($0) }
            }
        }
        let completed = slot.completeResponse()
        return ok && completed
    }

    /// Bodies longer than libfcgi's 8 KB stream buffer, which it would copy and send 8 KB a write.
    static let directBodyBytes = 8 * 1024

    /// A streamed body (``FastCGIBodyStream``): the head goes out with the first chunk, each
    /// chunk is flushed as it fills. A body that cannot be completed closes the connection
    /// without FCGI_END_REQUEST, so the web server reports it cut off. False if the response was
    /// not completed.
    private func writeStreamed(_ head: ResponseHead, _ stream: FastCGIBodyStream, to slot: RequestSlot) -> Bool {
        var chunker = BodyChunker(capacity: FastCGIBodyStream.chunkBytes)
        var headSent = false
        let emit = { (chunk: UnsafeRawBufferPointer) -> Bool in
            if !headSent {
                headSent = true
                guard head.bytes.withUnsafeBytes({ slot.write($0) }) else { return false }
            }
            return slot.write(chunk) && slot.flush()
        }
        let outcome = stream.produce { bytes in chunker.append(bytes, emit: emit) }
        switch outcome {
        case .complete:
            if chunker.finish(emit: emit) {
                if !headSent { _ = head.bytes.withUnsafeBytes { slot.write($0) } }  // an empty body
                return slot.completeResponse()
            }
        case .instead(let other) where !chunker.emittedAny:
            return write(other, to: slot)
        case .instead, .cutOff:
            break
        }
        if !chunker.failed {
            logger.warning("streamed response cut off midway", metadata: ["status": "\(head.status)"])
        }
        slot.closeConnection()
        return false
    }

    /// Accept failures worth retrying (resource exhaustion, interrupted calls).
    private static func isTransient(_ result: Int32) -> Bool {
        switch -result {
        case EINTR, EAGAIN, EMFILE, ENFILE, ENOBUFS, ENOMEM, ECONNABORTED, EPROTO, EPERM: return true
        default: return false
        }
    }
}
