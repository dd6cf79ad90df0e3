import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request whose 200 body is written to a file chunk by chunk as URLSession delivers it
/// (`URLSessionDataDelegate`: FoundationNetworking on Linux has no `bytes(for:)`, and
/// `download(for:)` would hold the transfer in its own temporary file without telling the
/// status first). Another status's body is kept in memory (an error object; at most 1 MiB).
final class FileDownload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private let file: URL
    private var continuation: CheckedContinuation<(Data, HTTPURLResponse), Error>?
    private var task: URLSessionDataTask?
    private var cancelled = false
    private var response: HTTPURLResponse?
    private var output: FileHandle?
    private var errorBody = Data()
    private var failure: Error?

    private init(file: URL) { self.file = file }

    /// Sends `request`; `request.timeoutInterval` is the longest wait for a byte.
    static func run(_ request: URLRequest, to file: URL) async throws -> (Data, HTTPURLResponse) {
        let download = FileDownload(file: file)
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = request.timeoutInterval
        configuration.timeoutIntervalForResource = 7 * 24 * 3600
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        let session = URLSession(configuration: configuration, delegate: download, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                download.start(session.dataTask(with: request), continuation)
            }
        } onCancel: {
            download.cancel()
        }
    }

    private func start(_ task: URLSessionDataTask, _ continuation: CheckedContinuation<(Data, HTTPURLResponse), Error>) {
        lock.lock()
        self.continuation = continuation
        self.task = task
        let cancelled = self.cancelled
        lock.unlock()
        if cancelled {
            task.cancel()  // never resumed: without this the session would wait for it forever
            finish(.failure(CancellationError()))
        } else {
            task.resume()
        }
    }

    private func cancel() {
        lock.lock()
        cancelled = true
        let task = self.task
        lock.unlock()
        task?.cancel()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        guard let http = response as? HTTPURLResponse else {
            fail(URLError(.badServerResponse), dataTask)
            completionHandler(.cancel)
            return
        }
        lock.lock()
        self.response = http
        lock.unlock()
        if http.statusCode == 200 {
            do {
                // A retried attempt starts the file again.
                guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
                }
                let handle = try FileHandle(forWritingTo: file)
                lock.lock()
                output = handle
                lock.unlock()
            } catch {
                fail(error, dataTask)
                completionHandler(.cancel)
                return
            }
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        let output = self.output
        if output == nil, errorBody.count < 1 << 20 { errorBody.append(data) }
        lock.unlock()
        guard let output else { return }
        do {
            try output.write(contentsOf: data)
        } catch {
            fail(error, dataTask)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        let output = self.output, response = self.response, failure = self.failure, cancelled = self.cancelled
        self.output = nil
        let body = errorBody
        lock.unlock()
        var result: Result<(Data, HTTPURLResponse), Error>
        if let failure {
            result = .failure(failure)
        } else if cancelled {
            result = .failure(CancellationError())
        } else if let error {
            result = .failure(error)
        } else if let response {
            result = .success((output == nil ? body : Data(), response))
        } else {
            result = .failure(URLError(.badServerResponse))
        }
        if let output {
            do {
                try output.synchronize()
                try output.close()
            } catch {
                if case .success = result { result = .failure(error) }
            }
        }
        finish(result)
    }

    /// The first failure wins; the transfer stops.
    private func fail(_ error: Error, _ task: URLSessionTask) {
        lock.lock()
        if failure == nil { failure = error }
        lock.unlock()
        task.cancel()
    }

    private func finish(_ result: Result<(Data, HTTPURLResponse), Error>) {
        lock.lock()
        let continuation = self.continuation
        self.continuation = nil
        lock.unlock()
        continuation?.resume(with: result)
    }
}
