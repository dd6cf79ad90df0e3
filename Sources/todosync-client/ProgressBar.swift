import Foundation
import TodoSyncClient

/// A one-line progress display on stderr, shown only on a terminal (or with `sync --progress`).
/// It draws a bar only for what it can measure: pushing shows sent of queued; pulling shows a bar
/// when the server says how many records are coming, and otherwise plain counts (never a bar that
/// cycles without measuring anything). A first sync's snapshot download shows bytes of its
/// `Content-Length`.
final class ProgressBar: @unchecked Sendable {
    private let enabled: Bool
    private let lock = NSLock()
    private var shown = false
    /// The download line last drawn (chunks come far more often than the text changes), and the
    /// tenth last written when stderr is not a terminal.
    private var lastDownload = ""
    private var lastTenth = -1
    private let interactive = isatty(STDERR_FILENO) != 0

    init(enabled: Bool) { self.enabled = enabled }

    func update(_ progress: SyncProgress) {
        guard enabled else { return }
        lock.lock()
        defer { lock.unlock() }
        let text: String
        switch progress.phase {
        case .downloading:
            let received = Self.megabytes(progress.bytesReceived)
            if let total = progress.bytesTotal, total > 0 {
                let fraction = Double(progress.bytesReceived) / Double(total)
                text = "Downloading snapshot \(bar(fraction)) \(received)/\(Self.megabytes(total)) MB"
                let tenth = Int(fraction * 10)
                guard text != lastDownload, interactive || tenth != lastTenth else { return }
                lastTenth = tenth
            } else {
                text = "Downloading snapshot \(received) MB"
                guard text != lastDownload, interactive else { return }
            }
            lastDownload = text
            if !interactive {
                FileHandle.standardError.write(Data((text + "\n").utf8))
                shown = true
                return
            }
        case .pushing:
            let total = max(progress.operationsTotal, 1)
            text = "Pushing \(bar(Double(progress.operationsSent) / Double(total))) \(progress.operationsSent)/\(progress.operationsTotal) changes"
        case .pulling:
            if let total = progress.recordsTotal {
                text = "Pulling \(bar(Double(progress.recordsPulled) / Double(max(total, 1)))) \(progress.recordsPulled)/\(total) records, \(progress.pages) pages"
            } else {
                text = "Pulling \(progress.recordsPulled) records, \(progress.pages) pages"
            }
        }
        if interactive {
            FileHandle.standardError.write(Data(("\r" + text + "   ").utf8))
        } else if progress.phase == .pushing || progress.pages % 10 == 1 {
            FileHandle.standardError.write(Data((text + "\n").utf8))
        }
        shown = true
    }

    func finish() {
        lock.lock()
        defer { lock.unlock() }
        if shown && interactive { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    /// Bytes as megabytes with one decimal (`12.3`).
    static func megabytes(_ bytes: Int64) -> String {
        String(format: "%.1f", Double(bytes) / 1_000_000)
    }

    private func bar(_ fraction: Double) -> String {
        let width = 24
        let filled = max(0, min(width, Int(fraction * Double(width))))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
    }
}
