#if canImport(Glibc)
import Glibc
#endif

/// systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram to the unix socket
/// named by `NOTIFY_SOCKET`. With `Type=notify`, `systemctl start`/`restart` returns only after
/// `READY=1`, so a rolling restart waits for each instance to serve before stopping the next.
/// Without `NOTIFY_SOCKET` (the dev runner, a shell) it does nothing.
public enum SystemdNotify {
    /// Sends `state` (e.g. `READY=1`); false when there is no socket to tell or the send failed.
    @discardableResult
    public static func send(_ state: String, environment socketPath: String? = getenv("NOTIFY_SOCKET").map { String(cString: $0) }) -> Bool {
        guard var path = socketPath, !path.isEmpty else { return false }
        // A leading @ names an abstract socket: its name starts with a NUL byte.
        let abstract = path.hasPrefix("@")
        if abstract { path.removeFirst() }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let offset = abstract ? 1 : 0
        guard bytes.count + offset < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index + offset] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + offset + bytes.count + (abstract ? 0 : 1))
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let message = Array(state.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                sendto(fd, message, message.count, Int32(MSG_NOSIGNAL), sockaddrPointer, length)
            }
        }
        return sent == message.count
    }
}
