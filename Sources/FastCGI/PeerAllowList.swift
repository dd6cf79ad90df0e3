#if canImport(Glibc)
import Glibc
#endif

/// Which TCP peers may talk FastCGI to the server: addresses and CIDR ranges, IPv4 or IPv6.
///
/// Empty means everyone (a unix socket is protected by its file mode instead). Unix-socket peers
/// are always allowed. The check (one `getpeername`) runs for every request, before the handler
/// sees it; a refused connection is closed without an answer.
///
/// libfcgi has its own filter, `FCGI_WEB_SERVER_ADDRS`, but it is read once per process (by the
/// first `FCGX_Init`) and ignores IPv6 peers entirely; this list has neither limit.
public struct PeerAllowList: Sendable, Equatable, CustomStringConvertible {
    struct Rule: Sendable, Equatable {
        let network: IPAddress
        let prefixLength: Int
    }

    let rules: [Rule]
    /// The entries as given, for logs.
    public let entries: [String]

    /// Everyone may connect.
    public static let everyone = PeerAllowList(rules: [], entries: [])

    /// Parses entries like `10.213.0.2`, `10.213.0.0/24`, `::1` or `fd00::/8`; nil if one does not parse.
    public init?(_ entries: [String]) {
        var rules: [Rule] = []
        for entry in entries {
            let parts = entry.split(separator: "/", maxSplits: 1).map(String.init)
            guard let first = parts.first, let address = IPAddress(first) else { return nil }
            let bits = address.bytes.count * 8
            var prefix = bits
            if parts.count == 2 {
                guard let value = Int(parts[1]), (0...bits).contains(value) else { return nil }
                prefix = value
            }
            rules.append(Rule(network: address, prefixLength: prefix))
        }
        self.init(rules: rules, entries: entries)
    }

    /// Parses a comma- or space-separated list (the form of `--allow` and `TODOSYNC_ALLOW`).
    public init?(list: String) {
        self.init(list.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init))
    }

    private init(rules: [Rule], entries: [String]) {
        self.rules = rules
        self.entries = entries
    }

    /// True when no rule restricts peers.
    public var allowsEveryone: Bool { rules.isEmpty }

    /// Whether `address` matches one of the rules.
    func allows(_ address: IPAddress) -> Bool {
        if rules.isEmpty { return true }
        let candidate = address.unmapped
        return rules.contains { rule in
            guard rule.network.bytes.count == candidate.bytes.count else { return false }
            var remaining = rule.prefixLength
            for (a, b) in zip(rule.network.bytes, candidate.bytes) where remaining > 0 {
                let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
                if a & mask != b & mask { return false }
                remaining -= 8
            }
            return true
        }
    }

    /// Whether the peer of the connected socket `fd` may be served. Unix peers always may; a peer
    /// whose address cannot be read may not.
    func allowsPeer(of fd: Int32) -> Bool {
        if rules.isEmpty { return true }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard status == 0 else { return false }
        switch Int32(storage.ss_family) {
        case AF_UNIX:
            return true
        case AF_INET:
            let address = withUnsafeBytes(of: &storage) { raw in
                raw.load(as: sockaddr_in.self).sin_addr
            }
            return allows(IPAddress(bytes: withUnsafeBytes(of: address) { Array($0) }))
        case AF_INET6:
            let address = withUnsafeBytes(of: &storage) { raw in
                raw.load(as: sockaddr_in6.self).sin6_addr
            }
            return allows(IPAddress(bytes: withUnsafeBytes(of: address) { Array($0) }))
        default:
            return false
        }
    }

    public var description: String { rules.isEmpty ? "everyone" : entries.joined(separator: ",") }
}
