#if canImport(Glibc)
import Glibc
#endif

/// The server's listening socket, whatever its kind.
///
/// How shutdown wakes the workers blocked in `accept` depends on who owns the socket:
/// - a unix socket the server created is shut down (Linux fails blocked and later `accept`s with
///   EINVAL once the queue is empty; queued connections are still served);
/// - a TCP socket, or an inherited one, is never shut down: on TCP that would reset the queued
///   connections (nginx would answer a POST it already sent with 502), and an inherited socket
///   must stay usable for its parent (a systemd socket unit accepts again for the next start).
///   Instead the socket is made non-blocking, so an `accept` that finds the queue empty fails with
///   EAGAIN (libfcgi passes that up and the worker, seeing the server stop, exits), and workers
///   already blocked in `accept` are woken by ``wake(count:)``: empty connections to the socket's
///   own address, each of which one worker accepts, reads to its immediate end, and retries.
///   Queued connections are still served.
struct Listener: Sendable {
    enum Kind: Sendable {
        case unix(UnixListener)
        case tcp
        case inherited
    }

    /// The listening descriptor, handed to `FCGX_InitRequest`.
    let fd: Int32
    let kind: Kind
    let address: FastCGIListenAddress

    /// Opens (or adopts) the listener for `address`.
    static func open(_ address: FastCGIListenAddress, mode: UInt32, group: UInt32? = nil, backlog: Int32) throws(FastCGIServerError) -> Listener {
        switch address {
        case .unix(let path):
            let unix = try UnixListener.open(path: path, mode: mode, group: group, backlog: backlog)
            return Listener(fd: unix.fd, kind: .unix(unix), address: address)
        case .tcp(let host, let port):
            return Listener(fd: try openTCP(host: host, port: port, backlog: backlog), kind: .tcp, address: address)
        case .inherited(let fd):
            guard isListeningSocket(fd) else {
                throw .invalidConfiguration("descriptor \(fd) is not a listening socket")
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            let listener = Listener(fd: fd, kind: .inherited, address: address)
            listener.setNonBlocking(false)  // a previous instance's shutdown left it non-blocking
            return listener
        }
    }

    /// Whether accepted connections may be TCP (an inherited socket may be either kind).
    var acceptsTCP: Bool {
        if case .unix = kind { return false }
        return true
    }

    /// Whether shutdown must wake workers with ``wake(count:)``.
    var needsWakeConnections: Bool {
        if case .unix = kind { return false }
        return true
    }

    /// Makes `accept` fail once the queue is empty (see the type's documentation).
    func stopAccepting() {
        if case .unix(let unix) = kind {
            unix.stopAccepting()
        } else {
            setNonBlocking(true)
        }
    }

    func setNonBlocking(_ on: Bool) {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0 else { return }
        _ = fcntl(fd, F_SETFL, on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK)
    }

    /// Opens `count` connections to the socket's own address and closes them at once, each waking
    /// one worker blocked in `accept`. Failures are ignored: the caller retries while workers remain.
    func wake(count: Int) {
        var local = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { return }
        Self.replaceWildcardWithLoopback(&local)
        for _ in 0..<count {
            let client = socket(Int32(local.ss_family), Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard client >= 0 else { return }
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            _ = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) }
            }
            _ = Glibc.close(client)
        }
    }

    /// Closes the descriptor (and removes a unix socket file we created). An inherited socket is
    /// left open: it belongs to the parent, and closing our copy early gains nothing.
    func close() {
        switch kind {
        case .unix(let unix): unix.closeAndUnlink()
        case .tcp: _ = Glibc.close(fd)
        case .inherited: break
        }
    }

    /// Removes a unix socket file if it is still ours, leaving the descriptor open (for stragglers).
    func unlinkOnly() {
        if case .unix(let unix) = kind { unix.unlinkOnly() }
    }

    static func isListeningSocket(_ fd: Int32) -> Bool {
        var status = stat()
        guard fstat(fd, &status) == 0, (status.st_mode & S_IFMT) == S_IFSOCK else { return false }
        var accepting: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &length) == 0 else { return false }
        return accepting != 0
    }

    private static func openTCP(host: String, port: UInt16, backlog: Int32) throws(FastCGIServerError) -> Int32 {
        guard let ip = IPAddress(host) else { throw .invalidConfiguration("\(host) is not an IP address") }
        var storage = sockaddr_storage()
        let length: socklen_t
        let family: Int32
        if ip.bytes.count == 4 {
            family = AF_INET
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &address.sin_addr) { $0.copyBytes(from: ip.bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: sockaddr_in.self) }
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
        } else {
            family = AF_INET6
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) { $0.copyBytes(from: ip.bytes) }
            withUnsafeMutableBytes(of: &storage) { $0.storeBytes(of: address, as: sockaddr_in6.self) }
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .systemCallFailed(operation: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        let where_ = FastCGIListenAddress.tcp(host: host, port: port).description
        if bound != 0 {
            let code = errno
            _ = Glibc.close(fd)
            if code == EADDRINUSE { throw .socketInUse(path: where_) }
            throw .systemCallFailed(operation: "bind(\(where_))", errno: code)
        }
        guard listen(fd, backlog) == 0 else {
            let code = errno
            _ = Glibc.close(fd)
            throw .systemCallFailed(operation: "listen(\(where_))", errno: code)
        }
        return fd
    }

    /// A socket bound to every address (0.0.0.0 or ::) is reached through loopback.
    private static func replaceWildcardWithLoopback(_ storage: inout sockaddr_storage) {
        withUnsafeMutableBytes(of: &storage) { raw in
            switch Int32(raw.load(as: sa_family_t.self)) {
            case AF_INET:
                var address = raw.load(as: sockaddr_in.self)
                if address.sin_addr.s_addr == 0 { address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian }
                raw.storeBytes(of: address, as: sockaddr_in.self)
            case AF_INET6:
                var address = raw.load(as: sockaddr_in6.self)
                let isWildcard = withUnsafeBytes(of: address.sin6_addr) { $0.allSatisfy { $0 == 0 } }
                if isWildcard { withUnsafeMutableBytes(of: &address.sin6_addr) { $0[15] = 1 } }
                raw.storeBytes(of: address, as: sockaddr_in6.self)
            default:
                break
            }
        }
    }
}
