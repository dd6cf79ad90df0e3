#if canImport(Glibc)
import Glibc
#endif

/// The listening unix socket, created here rather than with `FCGX_OpenSocket`.
///
/// libfcgi 2.4.2's `FCGX_OpenSocket` unlinks whatever is at the path (stealing a live instance's
/// socket) and calls `exit()` when `bind`/`listen` fail or the path is too long. This type probes
/// the path first, never removes anything but a stale socket, and reports failures as errors.
struct UnixListener: Sendable {
    /// The listening descriptor, handed to `FCGX_InitRequest`.
    let fd: Int32
    let path: String
    /// Identity of the socket file we created, so we never unlink a successor's socket.
    private let device: UInt64
    private let inode: UInt64

    /// Creates, binds, chmods and listens on `path`.
    ///
    /// Throws ``FastCGIServerError/socketInUse(path:)`` when a live process accepts on the path and
    /// ``FastCGIServerError/socketPathOccupied(path:)`` when a non-socket file is there. A stale
    /// socket file (nobody listening) is replaced.
    static func open(path: String, mode: UInt32, group: UInt32? = nil, backlog: Int32) throws(FastCGIServerError) -> UnixListener {
        var address = try socketAddress(for: path)
        try removeStaleSocket(at: path, address: &address)

        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .systemCallFailed(operation: "socket", errno: errno) }
        do throws(FastCGIServerError) {
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                }
            }
            if bound != 0 {
                let code = errno
                // Someone bound the path between our probe and bind: treat it as taken.
                if code == EADDRINUSE { throw FastCGIServerError.socketInUse(path: path) }
                throw FastCGIServerError.systemCallFailed(operation: "bind(\(path))", errno: code)
            }
            var status = stat()
            guard lstat(path, &status) == 0 else {
                throw FastCGIServerError.systemCallFailed(operation: "lstat(\(path))", errno: errno)
            }
            if let group, chown(path, uid_t.max, gid_t(group)) != 0 {  // uid -1: owner unchanged
                let code = errno
                unlink(path)
                throw FastCGIServerError.systemCallFailed(operation: "chown(\(path))", errno: code)
            }
            guard chmod(path, mode_t(mode)) == 0 else {
                let code = errno
                unlink(path)
                throw FastCGIServerError.systemCallFailed(operation: "chmod(\(path))", errno: code)
            }
            guard listen(fd, backlog) == 0 else {
                let code = errno
                unlink(path)
                throw FastCGIServerError.systemCallFailed(operation: "listen(\(path))", errno: code)
            }
            return UnixListener(
                fd: fd, path: path, device: UInt64(status.st_dev), inode: UInt64(status.st_ino))
        } catch {
            close(fd)
            throw error
        }
    }

    /// Makes every thread blocked in `accept` on this socket return: Linux fails a blocked or
    /// later `accept` with EINVAL once the queue of pending connections is empty (pending ones are
    /// still handed out), and new `connect`s get ECONNREFUSED.
    func stopAccepting() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// Closes the descriptor and removes the socket file if it is still the one we created.
    func closeAndUnlink() {
        close(fd)
        unlinkOnly()
    }

    /// Removes the socket file if it is still ours, leaving the descriptor open (for stragglers).
    func unlinkOnly() {
        var status = stat()
        if lstat(path, &status) == 0, UInt64(status.st_dev) == device, UInt64(status.st_ino) == inode {
            unlink(path)
        }
    }

    private static func socketAddress(for path: String) throws(FastCGIServerError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            throw .invalidConfiguration("socketPath is too long for a unix socket: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        return address
    }

    /// Refuses live sockets and non-sockets; unlinks a socket file nobody listens on.
    private static func removeStaleSocket(at path: String, address: inout sockaddr_un) throws(FastCGIServerError) {
        var status = stat()
        if lstat(path, &status) != 0 {
            let code = errno
            if code == ENOENT { return }
            throw .systemCallFailed(operation: "lstat(\(path))", errno: code)
        }
        guard (status.st_mode & S_IFMT) == S_IFSOCK else { throw .socketPathOccupied(path: path) }

        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { throw .systemCallFailed(operation: "socket", errno: errno) }
        defer { close(probe) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        let code = errno
        // Connected, or the backlog is full (EAGAIN): a live process owns the socket.
        if connected == 0 || code == EAGAIN { throw .socketInUse(path: path) }
        guard code == ECONNREFUSED else { throw .systemCallFailed(operation: "connect(\(path))", errno: code) }
        guard unlink(path) == 0 || errno == ENOENT else {
            throw .systemCallFailed(operation: "unlink(\(path))", errno: errno)
        }
    }
}
