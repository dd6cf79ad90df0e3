#if canImport(Glibc)
import Glibc
#endif

/// Where a ``FastCGIServer`` takes its connections from.
public enum FastCGIListenAddress: Sendable, Equatable, CustomStringConvertible {
    /// A unix socket the server creates (and removes on exit); see ``FastCGIServerConfiguration/socketPath``.
    case unix(path: String)
    /// A TCP socket the server binds: `host` is an IPv4 or IPv6 literal (`0.0.0.0`/`::` for every
    /// address). Put it on a private interface and restrict peers with
    /// ``FastCGIServerConfiguration/allowedPeers``: FastCGI has no authentication.
    case tcp(host: String, port: UInt16)
    /// A socket that is already bound and listening, inherited from the parent: descriptor 0 from
    /// `spawn-fcgi`, descriptor 3 from systemd socket activation. The server never closes or shuts
    /// it down for its parent: a systemd socket unit keeps accepting for the next start.
    case inherited(fd: Int32)

    /// Parses `HOST:PORT` or `[IPV6]:PORT`, with `HOST` an IP literal.
    public static func parseTCP(_ text: String) -> FastCGIListenAddress? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":"), !text[..<colon].contains(":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard let port = UInt16(portText), port > 0, IPAddress(String(host)) != nil else { return nil }
        return .tcp(host: String(host), port: port)
    }

    /// The socket systemd passed (`LISTEN_PID` is this process and `LISTEN_FDS` ≥ 1: descriptor 3),
    /// or nil. With `unsetEnvironment`, the variables are removed so child processes do not take
    /// them for their own (as `sd_listen_fds(1)` does).
    public static func systemdSocket(unsetEnvironment: Bool = true) -> FastCGIListenAddress? {
        guard let pidText = getenv("LISTEN_PID").map({ String(cString: $0) }),
            let fdsText = getenv("LISTEN_FDS").map({ String(cString: $0) }),
            let pid = Int32(pidText), pid == getpid(), let count = Int(fdsText), count >= 1
        else { return nil }
        if unsetEnvironment {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        return .inherited(fd: 3)
    }

    /// Descriptor 0 when it is a listening socket (how `spawn-fcgi` and classic FastCGI process
    /// managers pass it), else nil.
    public static func inheritedStandardInput() -> FastCGIListenAddress? {
        Listener.isListeningSocket(0) ? .inherited(fd: 0) : nil
    }

    public var description: String {
        switch self {
        case .unix(let path): return "unix:\(path)"
        case .tcp(let host, let port): return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .inherited(let fd): return "inherited fd \(fd)"
        }
    }
}

/// An IPv4 or IPv6 address in network byte order.
struct IPAddress: Sendable, Equatable {
    /// 4 or 16 bytes.
    let bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// `::ffff:a.b.c.d` becomes `a.b.c.d`, so IPv4 rules also match IPv4 clients of a dual-stack socket.
    var unmapped: IPAddress {
        if bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff {
            return IPAddress(bytes: Array(bytes[12...]))
        }
        return self
    }
}
