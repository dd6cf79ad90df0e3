import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One request whose 200 body is written to a file chunk by chunk as URLSession delivers it
/// (`URLSessionDataDelegate`: FoundationNetworking on Linux has no `bytes(for:)`, and
/// `download(for:)` would hold the transfer in its own temporary file without telling the
/// status first). Another status's body is kept in memory (an error object; at most 1 MiB).
/// Nothing here cancels the transfer (FoundationNetworking cannot be trusted with a cancel:
/// `URLSessionCall`): a cancelled caller stops waiting and a failed write stops writing; the
/// transfer of that one request (a snapshot's range) then ends by itself, into nothing.
final class FileDownload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private let file: URL
    /// The task and its caller (`URLSessionCall`).
    private let call = URLSessionCall<(Data, HTTPURLResponse)>()
    /// Set when the caller stopped waiting: no byte is written from then on (a retry may be
    /// writing the same file).
    private var stopped = false
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
                download.call.start(session.dataTask(with: request), continuation)
            }
        } onCancel: {
            download.stopWriting()
            download.call.abandon()
        }
    }

    /// Closes the file (writes happen under the lock, so none comes after this returns).
    private func stopWriting() {
        lock.lock()
        stopped = true
        let output = self.output
        self.output = nil
        lock.unlock()
        try? output?.close()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        guard let http = response as? HTTPURLResponse else {
            fail(URLError(.badServerResponse))
            completionHandler(.cancel)
            return
        }
        lock.lock()
        self.response = http
        let stopped = self.stopped
        lock.unlock()
        if http.statusCode == 200 && !stopped {
            do {
                // A retried attempt starts the file again.
                guard FileManager.default.createFile(atPath: file.path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
                }
                let handle = try FileHandle(forWritingTo: file)
                lock.lock()
                if self.stopped { try? handle.close() } else { output = handle }
                lock.unlock()
            } catch {
                fail(error)
                completionHandler(.cancel)
                return
            }
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.lock()
        defer { lock.unlock() }
        guard !stopped, failure == nil else { return }
        guard let output else {
            if errorBody.count < 1 << 20 { errorBody.append(data) }
            return
        }
        do {
            try output.write(contentsOf: data)
        } catch {
            failure = error  // the first failure wins; nothing more is written
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        lock.lock()
        let output = self.output, response = self.response, failure = self.failure, cancelled = stopped
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
        call.finish(result)
    }

    /// The first failure wins; nothing more is written, and it is the answer when the transfer ends.
    private func fail(_ error: Error) {
        lock.lock()
        if failure == nil { failure = error }
        lock.unlock()
    }
}
