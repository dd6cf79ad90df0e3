#if canImport(Glibc)
import Glibc
#endif
import CoreMetrics
import Credentials
import Deflate
import TodoSyncCore

/// The on-disk cache of snapshot files (docs/SNAPSHOT.md), shared by every worker and process
/// that is given the same directory (one responder host's, or a directory shared by a cluster's
/// hosts: docs/SCALING.md). nginx serves its files (`X-Accel-Redirect`); the responder only finds,
/// builds and erases them.
///
/// Layout: `<directory>/<userID>/<epoch>-<version>-<schema>[-w<from>_<to>]-<sha256 hex>.sqlite` (a
/// window's file names its window), one file per
/// build, never rewritten (the name says what it holds, so a name found is a file complete and
/// checked); its gzip companion (made on the first request that accepts gzip) is
/// `<that file's name>.<sha256 hex of the gzip bytes>.gz`, and lives and goes with it; beside them `.lock-*` files (one `flock` per cache key: concurrent requests build
/// once), `.build-*` scratch files, and `.too-slow-<epoch>-<schema>` marks of a build that did not
/// fit the request budget. Files are 0640 in directories 02750, so the directory's group (nginx's)
/// can read them whatever the process umask.
public final class SnapshotCache: Sendable {
    public let directory: String
    /// The cache's size limit: after each build, the oldest files go until the rest fit.
    public let maximumBytes: Int64
    /// A file older than this is never served (contract: at most an hour).
    public let maximumAgeSeconds: Int64

    public static let maximumAgeLimit: Int64 = 3600

    public init(directory: String, maximumBytes: Int64, maximumAgeSeconds: Int64) {
        self.directory = directory.hasSuffix("/") && directory.count > 1 ? String(directory.dropLast()) : directory
        self.maximumBytes = maximumBytes
        self.maximumAgeSeconds = min(maximumAgeSeconds, Self.maximumAgeLimit)
    }

    /// What identifies a snapshot's content: the user, the database history, the user's newest
    /// version at the read, and the schema version of the records.
    public struct Key: Sendable, Equatable {
        public let userID: Int64
        public let epoch: UInt64
        public let version: Int64
        public let schemaVersion: Int
        /// A window's snapshot (API.md "Sync: snapshot"); nil for the whole account's.
        public let window: SyncWindow?

        init(userID: Int64, epoch: UInt64, version: Int64, schemaVersion: Int, window: SyncWindow? = nil) {
            self.userID = userID
            self.epoch = epoch
            self.version = version
            self.schemaVersion = schemaVersion
            self.window = window
        }

        var stem: String { "\(String(epoch, radix: 16))-\(version)-\(schemaVersion)\(windowSuffix)" }

        /// `-w<from>_<to>` for a window (dates as yyyymmdd, `x` for an open side), else empty:
        /// each window has its own files, locks and marks.
        var windowSuffix: String {
            guard let window else { return "" }
            func text(_ day: Day?) -> String { day.map { String($0.description.filter { $0 != "-" }) } ?? "x" }
            return "-w\(text(window.from))_\(text(window.to))"
        }

        /// Parses `windowSuffix`'s part after the dash.
        static func window(_ text: Substring) -> SyncWindow?? {
            guard text.hasPrefix("w") else { return nil }
            let sides = text.dropFirst().split(separator: "_", omittingEmptySubsequences: false)
            func day(_ side: Substring) -> Day?? {
                if side == "x" { return .some(nil) }
                guard side.utf8.count == 8, let key = Int(side) else { return nil }
                return Day(year: key / 10000, month: key / 100 % 100, day: key % 100).map { .some($0) }
            }
            guard sides.count == 2, let from = day(sides[0]), let to = day(sides[1]),
                  let window = SyncWindow(from: from, to: to), window.from != nil || window.to != nil else { return nil }
            return .some(window)
        }
    }

    /// The key of the user's snapshot at `version` of history `epoch` in `schemaVersion`; of
    /// `window`'s records only when given.
    public static func key(userID: Int64, epoch: UInt64, version: Int64, schemaVersion: Int,
                           window: SyncWindow? = nil) -> Key {
        Key(userID: userID, epoch: epoch, version: version, schemaVersion: schemaVersion, window: window)
    }

    /// A finished snapshot file in the cache.
    public struct Entry: Sendable, Equatable {
        public let key: Key
        /// SHA-256 of the file's bytes.
        public let digest: [UInt8]
        public let fileName: String

        /// The path under the cache directory (what nginx's internal location appends).
        public var relativePath: String { "\(key.userID)/\(fileName)" }
        /// `"<first 128 bits of the digest, hex>"`: a strong validator of the bytes.
        public var etag: String { "\"\(SnapshotCache.hex(digest).prefix(32))\"" }
        /// RFC 9530: `sha-256=:<base64>:`.
        public var reprDigest: String { SnapshotCache.reprDigest(digest) }
        /// The gzip companion's tag: the file's with `-gz` inside the quotes. The companion is a
        /// function of the file's bytes (made once per file, zlib at `gzipLevel`), so the tag
        /// names its bytes too, and it is known without the companion (304 needs no gzip).
        public var gzipETag: String { "\"\(SnapshotCache.hex(digest).prefix(32))-gz\"" }
    }

    /// A finished file's gzip companion (`Content-Encoding: gzip`).
    public struct Companion: Sendable, Equatable {
        public let entry: Entry
        /// SHA-256 of the gzip bytes (what the response's `Repr-Digest` names).
        public let digest: [UInt8]

        public var fileName: String { "\(entry.fileName).\(SnapshotCache.hex(digest)).gz" }
        public var relativePath: String { "\(entry.key.userID)/\(fileName)" }
        public var etag: String { entry.gzipETag }
        public var reprDigest: String { SnapshotCache.reprDigest(digest) }
    }

    static func reprDigest(_ digest: [UInt8]) -> String { "sha-256=:\(Base64URL.encodeStandard(digest)):" }

    /// zlib's level for companions: 1, the fastest (docs/SNAPSHOT.md "gzip" has the measurements).
    public static let gzipLevel: Int32 = 1

    func userDirectory(_ userID: Int64) -> String { "\(directory)/\(userID)" }

    /// The newest fresh file of `key`'s user, epoch and schema whose version is at least `key`'s
    /// (a newer one holds everything the key's does, and more); nil when there is none.
    public func lookup(_ key: Key, now: Int64 = Int64(time(nil))) -> Entry? {
        var best: Entry?
        for name in names(in: userDirectory(key.userID)) {
            guard let entry = Self.entry(userID: key.userID, fileName: name), entry.key.epoch == key.epoch,
                  entry.key.schemaVersion == key.schemaVersion, entry.key.window == key.window,
                  entry.key.version >= key.version,
                  entry.key.version > best?.key.version ?? -1,
                  let modified = modificationTime("\(userDirectory(key.userID))/\(name)"),
                  now - modified < maximumAgeSeconds else { continue }
            best = entry
        }
        return best
    }

    /// Parses `<epoch hex>-<version>-<schema>[-w<from>_<to>]-<digest hex>.sqlite`.
    static func entry(userID: Int64, fileName: String) -> Entry? {
        guard fileName.hasSuffix(".sqlite"), !fileName.hasPrefix(".") else { return nil }
        let parts = fileName.dropLast(7).split(separator: "-")
        guard parts.count == 4 || parts.count == 5, let epoch = UInt64(parts[0], radix: 16),
              let version = Int64(parts[1]), let schema = Int(parts[2]), parts.last!.utf8.count == 64,
              let digest = unhex(parts.last!) else { return nil }
        var window: SyncWindow?
        if parts.count == 5 {
            guard let parsed = Key.window(parts[3]) else { return nil }
            window = parsed
        }
        return Entry(key: Key(userID: userID, epoch: epoch, version: version, schemaVersion: schema, window: window),
                     digest: digest, fileName: fileName)
    }

    /// Parses `<file name>.<gzip digest hex>.gz` into the file it compresses and its digest.
    static func companion(userID: Int64, fileName: String) -> Companion? {
        guard fileName.hasSuffix(".gz"), !fileName.hasPrefix(".") else { return nil }
        let stem = fileName.dropLast(3)
        guard let dot = stem.lastIndex(of: "."), let entry = entry(userID: userID, fileName: String(stem[..<dot])),
              stem.utf8.distance(from: stem.utf8.index(after: dot), to: stem.utf8.endIndex) == 64,
              let digest = unhex(stem[stem.index(after: dot)...]) else { return nil }
        return Companion(entry: entry, digest: digest)
    }

    /// `entry`'s gzip companion when it has been made.
    public func companion(of entry: Entry) -> Companion? {
        names(in: userDirectory(entry.key.userID)).lazy
            .compactMap { Self.companion(userID: entry.key.userID, fileName: $0) }
            .first { $0.entry == entry }
    }

    /// `entry`'s gzip companion, made now when there is none: under the build lock of `entry`'s
    /// key, so that concurrent requests compress once, streamed through zlib (`GzipStream`, 1 MiB
    /// in, 256 KiB out at a time: the file is never held in memory) into a scratch file moved into
    /// place under its digest. Nil when the lock or the compression did not fit before `deadline`
    /// (the request is then answered with the file itself: gzip is an option, not an obligation).
    public func makeCompanion(of entry: Entry, deadline: RequestDeadline?) throws -> Companion? {
        if let done = companion(of: entry) { return done }
        let made = try withBuildLock(entry.key, deadline: deadline) { () throws -> Companion? in
            if let done = companion(of: entry) { return done }
            let source = "\(directory)/\(entry.relativePath)"
            let scratch = try scratchPath(entry.key.userID, ".gz")
            defer { unlink(scratch) }
            let started = Timestamp.now()
            guard try Self.gzip(source, into: scratch, deadline: deadline) else { return nil }
            SnapshotGzipMetrics.made.increment()
            SnapshotGzipMetrics.seconds.increment(by: Double(Timestamp.now().millisecondsSinceEpoch
                - started.millisecondsSinceEpoch) / 1000)
            chmod(scratch, 0o640)
            let companion = Companion(entry: entry, digest: try FileDigest.sha256(ofFileAt: scratch))
            // The file may have been superseded or swept meanwhile: its companion would be an orphan.
            guard access(source, F_OK) == 0 else { return nil }
            guard rename(scratch, "\(userDirectory(entry.key.userID))/\(companion.fileName)") == 0 else {
                throw SnapshotCacheError("cannot rename \(scratch): errno \(errno)")
            }
            return companion
        }
        guard let made else { return nil }
        sweep()
        return made
    }

    /// gzip of the file at `source` into `target`, streamed; false when `deadline` passed first.
    static func gzip(_ source: String, into target: String, deadline: RequestDeadline?) throws -> Bool {
        let input = open(source, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else { throw SnapshotCacheError("cannot open \(source): errno \(errno)") }
        defer { close(input) }
        let output = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        guard output >= 0 else { throw SnapshotCacheError("cannot open \(target): errno \(errno)") }
        defer { close(output) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        let stream = GzipStream(level: gzipLevel, outputBytes: 256 * 1024)
        var writeError: Int32 = 0
        let emit = { (bytes: UnsafeRawBufferPointer) -> Bool in
            var rest = bytes
            while !rest.isEmpty {
                let written = write(output, rest.baseAddress, rest.count)
                if written < 0 {
                    if errno == EINTR { continue }
                    writeError = errno
                    return false
                }
                rest = UnsafeRawBufferPointer(rebasing: rest[written...])
            }
            return true
        }
        while true {
            let count = read(input, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw SnapshotCacheError("cannot read \(source): errno \(errno)")
            }
            if count == 0 { break }
            if let deadline, deadline.hasPassed { return false }
            guard stream.compress(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), emit: emit) else {
                throw SnapshotCacheError("cannot write \(target): errno \(writeError)")
            }
        }
        guard stream.finish(emit: emit) else { throw SnapshotCacheError("cannot write \(target): errno \(writeError)") }
        return true
    }

    // MARK: building

    /// Creates the user's directory (and the cache's) when missing.
    func prepareDirectory(_ userID: Int64) throws {
        for path in [directory, userDirectory(userID)] {
            if mkdir(path, 0o2750) == 0 {
                chmod(path, 0o2750)  // whatever the umask: nginx's group enters it
            } else if errno != EEXIST {
                throw SnapshotCacheError("cannot create \(path): errno \(errno)")
            }
        }
    }

    /// Runs `body` holding the build lock of `key` (an exclusive `flock`, waited for by polling
    /// until `deadline`): nil when the deadline came first.
    public func withBuildLock<T>(_ key: Key, deadline: RequestDeadline?, _ body: () throws -> T) throws -> T? {
        try prepareDirectory(key.userID)
        let path = "\(userDirectory(key.userID))/.lock-\(String(key.epoch, radix: 16))-\(key.schemaVersion)\(key.windowSuffix)"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o640)
        guard fd >= 0 else { throw SnapshotCacheError("cannot open \(path): errno \(errno)") }
        defer { close(fd) }
        while flock(fd, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw SnapshotCacheError("flock: errno \(errno)") }
            if let deadline, deadline.hasPassed { return nil }
            usleep(20_000)
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }

    /// A fresh scratch path in the user's directory.
    func scratchPath(_ userID: Int64, _ suffix: String) throws -> String {
        let random = SnapshotCache.hex(try SecureRandom.bytes(8))
        return "\(userDirectory(userID))/.build-\(random)\(suffix)"
    }

    /// Moves a finished file into place under its final name and returns its entry; then drops the
    /// files it supersedes and keeps the cache within its limits.
    func install(_ path: String, key: Key) throws -> Entry {
        chmod(path, 0o640)
        let digest = try FileDigest.sha256(ofFileAt: path)
        let name = "\(key.stem)-\(SnapshotCache.hex(digest)).sqlite"
        let entry = Entry(key: key, digest: digest, fileName: name)
        guard rename(path, "\(userDirectory(key.userID))/\(name)") == 0 else {
            throw SnapshotCacheError("cannot rename \(path): errno \(errno)")
        }
        for other in names(in: userDirectory(key.userID)) {
            // A companion goes with the file it compresses.
            guard other != name, let old = Self.entry(userID: key.userID, fileName: other)
                    ?? Self.companion(userID: key.userID, fileName: other)?.entry else { continue }
            // Superseded (older version of this schema), or of another history: never served again.
            if old.key.epoch != key.epoch || (old.key.schemaVersion == key.schemaVersion && old.key.window == key.window
                                              && old.key.version <= key.version) {
                unlink("\(userDirectory(key.userID))/\(other)")
            }
        }
        unlink(tooSlowMark(key))
        sweep()
        return entry
    }

    // MARK: builds that do not fit the budget

    func tooSlowMark(_ key: Key) -> String {
        "\(userDirectory(key.userID))/.too-slow-\(String(key.epoch, radix: 16))-\(key.schemaVersion)\(key.windowSuffix)"
    }

    /// Notes that a build of `key`'s account ran out of the request budget.
    public func markTooSlow(_ key: Key) {
        let fd = open(tooSlowMark(key), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o640)
        if fd >= 0 { close(fd) }
    }

    /// Seconds left before a build of `key`'s account is tried again; nil when it may be tried now.
    public func tooSlowRetryAfter(_ key: Key, now: Int64 = Int64(time(nil))) -> Int64? {
        guard let marked = modificationTime(tooSlowMark(key)) else { return nil }
        let left = marked + maximumAgeSeconds - now
        return left > 0 ? left : nil
    }

    // MARK: erasing

    /// Removes every file of the user (account deleted or erased).
    public func erase(userID: Int64) {
        let path = userDirectory(userID)
        for name in names(in: path) { unlink("\(path)/\(name)") }
        rmdir(path)
    }

    /// Removes files older than the age limit, builds' leftovers, and then the oldest files until
    /// the rest fit `maximumBytes`. A gzip companion counts with its file (their sizes added, the
    /// file's age) and goes with it; one whose file is gone goes at once. Returns the files removed.
    @discardableResult
    public func sweep(now: Int64 = Int64(time(nil))) -> Int {
        var kept: [(paths: [String], modified: Int64, size: Int64)] = []
        var removed = 0
        func remove(_ path: String) {
            if unlink(path) == 0 { removed += 1 }
        }
        for user in names(in: directory) {
            guard let userID = Int64(user) else { continue }
            let userPath = "\(directory)/\(user)"
            var groups: [String: (paths: [String], modified: Int64, size: Int64)] = [:]
            var companions: [(file: String, name: String, size: Int64)] = []
            for name in names(in: userPath) {
                let path = "\(userPath)/\(name)"
                var info = stat()
                guard stat(path, &info) == 0 else { continue }
                let modified = Int64(info.st_mtim.tv_sec)
                if let companion = Self.companion(userID: userID, fileName: name) {
                    companions.append((companion.entry.fileName, name, Int64(info.st_size)))
                    continue
                }
                // A scratch file older than any build may run (10 budgets' worth: an hour).
                let stale = name.hasPrefix(".build-") ? now - modified > Self.maximumAgeLimit
                    : name.hasPrefix(".") ? false : now - modified >= maximumAgeSeconds
                if stale {
                    remove(path)
                } else if !name.hasPrefix(".") {
                    groups[name] = ([path], modified, Int64(info.st_size))
                }
            }
            for companion in companions {
                let path = "\(userPath)/\(companion.name)"
                if groups[companion.file] == nil {
                    remove(path)
                } else {
                    groups[companion.file]!.paths.append(path)
                    groups[companion.file]!.size += companion.size
                }
            }
            kept += groups.values
        }
        var total = kept.reduce(0) { $0 + $1.size }
        for group in kept.sorted(by: { $0.modified < $1.modified }) where total > maximumBytes {
            // The companion first: no moment with a companion whose file is gone.
            for path in group.paths.reversed() { remove(path) }
            total -= group.size
        }
        return removed
    }

    // MARK: helpers

    private func names(in path: String) -> [String] {
        guard let dir = opendir(path) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    private func modificationTime(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return Int64(info.st_mtim.tv_sec)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func unhex(_ text: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var high: UInt8?
        for char in text.utf8 {
            let value: UInt8
            switch char {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = char - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = char - UInt8(ascii: "a") + 10
            default: return nil
            }
            if let h = high { bytes.append(h << 4 | value); high = nil } else { high = value }
        }
        return high == nil ? bytes : nil
    }
}

/// gzip companions made, as metrics (builds: `SnapshotMetrics`).
enum SnapshotGzipMetrics {
    static let made = Counter(label: "todosync_snapshot_gzip_total")
    static let seconds = FloatingPointCounter(label: "todosync_snapshot_gzip_seconds_total")
}

/// The cache directory failed (a server fault: 500). The snapshot's refusals, a build that does not
/// fit the request budget or one another request is still making, are `DomainError`'s
/// `snapshotTooSlow` and `snapshotBusy`.
public struct SnapshotCacheError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}
