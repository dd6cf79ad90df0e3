import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Wakes when a store file may have changed: another process's commit writes the file or its
/// `-wal` (SQLite's write-ahead log), `-shm` or `-journal` beside it. On Linux this is inotify on
/// the store's directory (the `-wal` file comes and goes, so the directory is watched, not the
/// files); elsewhere, or when inotify cannot start (no such call, the per-user limit of
/// instances or watches reached), `open` returns nil and the caller polls instead.
/// `SyncEngine` uses it for `Settings.storeWake` `.onChange` (docs/CLIENT.md "Live sync").
final class StoreFileWatch: @unchecked Sendable {
    /// One element per batch of changes read together (a wake, not a count; the newest only).
    let changes: AsyncStream<Void>
    private let source: DispatchSourceRead

    #if os(Linux)
    static func open(storePath: String) -> StoreFileWatch? {
        let url = URL(fileURLWithPath: storePath)
        let directory = url.deletingLastPathComponent().path
        let base = url.lastPathComponent
        let names = Set(["", "-wal", "-shm", "-journal"].map { base + $0 })
        let fd = inotify_init1(Int32(IN_NONBLOCK) | Int32(IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        // A write (IN_MODIFY), a file written and closed, created or moved in (a new -wal).
        let mask = UInt32(IN_MODIFY) | UInt32(IN_CLOSE_WRITE) | UInt32(IN_CREATE) | UInt32(IN_MOVED_TO)
        guard inotify_add_watch(fd, directory, mask) >= 0 else {
            close(fd)
            return nil
        }
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: DispatchQueue(label: "TodoSyncClient.StoreFileWatch"))
        source.setEventHandler {
            if Self.drain(fd, names: names) { continuation.yield() }
        }
        source.setCancelHandler {
            close(fd)
            continuation.finish()
        }
        let watch = StoreFileWatch(changes: stream, source: source)
        continuation.onTermination = { _ in watch.cancel() }
        source.resume()
        return watch
    }

    /// Reads every queued event; true when one names the store's files.
    private static func drain(_ fd: Int32, names: Set<String>) -> Bool {
        var matched = false
        let size = 16 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: MemoryLayout<inotify_event>.alignment)
        defer { buffer.deallocate() }
        let header = MemoryLayout<inotify_event>.size
        while true {
            let count = read(fd, buffer, size)
            guard count > 0 else { break }  // EAGAIN: all read
            var offset = 0
            while offset + header <= count {
                let event = buffer.loadUnaligned(fromByteOffset: offset, as: inotify_event.self)
                let length = Int(event.len)
                if length > 0, !matched {
                    let name = String(cString: buffer.advanced(by: offset + header).assumingMemoryBound(to: CChar.self))
                    if names.contains(name) { matched = true }
                }
                offset += header + length
            }
        }
        return matched
    }
    #else
    static func open(storePath: String) -> StoreFileWatch? { nil }
    #endif

    private init(changes: AsyncStream<Void>, source: DispatchSourceRead) {
        self.changes = changes
        self.source = source
    }

    /// Stops watching (also when the stream's reader goes away).
    func cancel() { source.cancel() }
}
