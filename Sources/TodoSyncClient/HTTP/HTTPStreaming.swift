import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a streamed answer goes: `begin` once with the head, then `write` for each chunk of the
/// body as it arrives. A throw from either ends the request.
public protocol HTTPBodySink: AnyObject, Sendable {
    func begin(_ response: HTTPURLResponse) throws
    func write(_ chunk: Data) throws
}

extension HTTPTransport {
    /// A transport that only knows `send`: the whole body in one chunk.
    public func stream(_ request: URLRequest, into sink: any HTTPBodySink) async throws {
        let (data, response) = try await send(request)
        try sink.begin(response)
        if !data.isEmpty { try sink.write(data) }
    }
}

extension URLSessionTransport {
    /// Streams through `URLSessionDataDelegate`, which receives each chunk as it arrives on
    /// Linux too (FoundationNetworking has no `bytes(for:)`). `request.timeoutInterval` is the
    /// longest silence tolerated, not a bound on the whole download.
    public func stream(_ request: URLRequest, into sink: any HTTPBodySink) async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = request.timeoutInterval
        configuration.timeoutIntervalForResource = 24 * 3600
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let receiver = StreamReceiver(sink: sink)
        let session = URLSession(configuration: configuration, delegate: receiver, delegateQueue: nil)
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, Error>) in
                receiver.start(continuation)
                let task = session.dataTask(with: request)
                receiver.task = task
                task.resume()
            }
        } onCancel: {
            session.invalidateAndCancel()
        }
    }
}

/// The delegate of one streamed request: head, chunks, end, into the sink.
private final class StreamReceiver: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private let sink: any HTTPBodySink
    private var continuation: CheckedContinuation<Void, Error>?
    private var failure: Error?
    var task: URLSessionDataTask?

    init(sink: any HTTPBodySink) { self.sink = sink }

    func start(_ continuation: CheckedContinuation<Void, Error>) {
        lock.lock()
        self.continuation = continuation
        lock.unlock()
    }

    private func fail(_ error: Error) {
        lock.lock()
        if failure == nil { failure = error }
        lock.unlock()
    }

    private var failed: Bool {
        lock.lock()
        defer { lock.unlock() }
        return failure != nil
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        do {
            guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
            try sink.begin(http)
            completionHandler(.allow)
        } catch {
            fail(error)
            completionHandler(.cancel)
        }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard !failed else { return }
        do {
            try sink.write(data)
        } catch {
            fail(error)
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        let result: Result<Void, Error>
        if let failure {
            result = .failure(failure)
        } else if let error {
            result = .failure(error)
        } else {
            result = .success(())
        }
        let continuation = self.continuation
        self.continuation = nil
        lock.unlock()
        continuation?.resume(with: result)
        session.finishTasksAndInvalidate()
    }
}
