#if canImport(Glibc)
import Glibc
#endif

/// A minimal FastCGI client (the web server's side of the protocol) for driving the server in tests.
struct FastCGITestClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// What came back for one request.
    struct Reply {
        var stdout: [UInt8] = []
        var stderr: [UInt8] = []
        var appStatus: UInt32 = 0
        var protocolStatus: UInt8 = 0

        /// `stdout` split into the CGI head lines and the body.
        func parsed() throws -> ParsedResponse {
            guard let split = stdout.firstRange(of: [13, 10, 13, 10]) else {
                throw Failure(description: "no blank line in response: \(String(decoding: stdout, as: UTF8.self))")
            }
            let head = String(decoding: stdout[..<split.lowerBound], as: UTF8.self)
            var lines = head.components(separatedBy: "\r\n")
            let statusLine = lines.removeFirst()
            let headers = lines.map { line -> (String, String) in
                let colon = line.firstIndex(of: ":")!
                return (String(line[..<colon]), String(line[line.index(after: colon)...].drop(while: { $0 == " " })))
            }
            return ParsedResponse(statusLine: statusLine, headers: headers, body: Array(stdout[split.upperBound...]))
        }
    }

    struct ParsedResponse {
        var statusLine: String
        var headers: [(String, String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    enum RecordType: UInt8 {
        case beginRequest = 1, abortRequest, endRequest, params, stdin, stdout, stderr
    }

    let fd: Int32

    /// Connects to a unix socket; reads and writes time out after `timeoutSeconds`.
    static func connect(to path: String, timeoutSeconds: Int = 15) throws -> FastCGITestClient {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Failure(description: "connect(\(path)): errno \(code)")
        }
        return FastCGITestClient(fd: fd)
    }

    /// Connects to an IPv4 TCP address (`host` a literal such as 127.0.0.1).
    /// `from`: the local address to connect from (any 127.x.y.z works on Linux loopback).
    static func connect(host: String, port: UInt16, from: String? = nil, timeoutSeconds: Int = 15) throws -> FastCGITestClient {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        if let from {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, from, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                Glibc.close(fd)
                throw Failure(description: "bind(\(from)): errno \(errno)")
            }
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Failure(description: "connect(\(host):\(port)): errno \(code)")
        }
        return FastCGITestClient(fd: fd)
    }

    /// Connects over TCP, sends one request, reads the reply and closes.
    static func send(
        host: String, port: UInt16, params: [(String, String)], body: [UInt8] = []
    ) throws -> Reply {
        let client = try connect(host: host, port: port)
        defer { client.close() }
        try client.write(encodeRequest(params: params.map { ($0.0, Array($0.1.utf8)) }, body: body))
        return try client.readReply()
    }

    /// Connects, sends one request, reads the reply and closes (as nginx does without keep_conn).
    static func send(
        to path: String, params: [(String, String)], body: [UInt8] = []
    ) throws -> Reply {
        let client = try connect(to: path)
        defer { client.close() }
        try client.write(encodeRequest(params: params.map { ($0.0, Array($0.1.utf8)) }, body: body))
        return try client.readReply()
    }

    func close() {
        _ = Glibc.close(fd)
    }

    func write(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Failure(description: "send: errno \(errno)") }
            offset += written
        }
    }

    /// Reads records until FCGI_END_REQUEST for `requestID`.
    func readReply(requestID: UInt16 = 1) throws -> Reply {
        var reply = Reply()
        while true {
            let header = try readExactly(8)
            let type = header[1]
            let id = UInt16(header[2]) << 8 | UInt16(header[3])
            let length = Int(header[4]) << 8 | Int(header[5])
            let content = try readExactly(length)
            _ = try readExactly(Int(header[6]))
            guard header[0] == 1 else { throw Failure(description: "bad version \(header[0])") }
            guard id == requestID else { throw Failure(description: "record for request \(id)") }
            switch RecordType(rawValue: type) {
            case .stdout: reply.stdout += content
            case .stderr: reply.stderr += content
            case .endRequest:
                reply.appStatus = content[0..<4].reduce(0) { $0 << 8 | UInt32($1) }
                reply.protocolStatus = content[4]
                return reply
            default: throw Failure(description: "unexpected record type \(type)")
            }
        }
    }

    /// True when the server closed the connection (read returns EOF).
    func serverClosedConnection() -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    /// True when the server closes the connection within `timeoutMilliseconds` (false when it
    /// is still open then, or sends bytes instead).
    func serverClosedConnection(timeoutMilliseconds: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, timeoutMilliseconds) == 1 else { return false }
        var byte: UInt8 = 0
        let read = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
        return read == 0 || (read < 0 && errno == ECONNRESET)
    }

    private func readExactly(_ count: Int) throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let read = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress! + offset, count - offset, 0) }
            if read == 0 { throw Failure(description: "connection closed by server") }
            guard read > 0 else { throw Failure(description: "recv: errno \(errno)") }
            offset += read
        }
        return buffer
    }

    // MARK: Encoding

    /// BEGIN_REQUEST, PARAMS (then the empty PARAMS record), STDIN (then the empty STDIN record).
    static func encodeRequest(
        requestID: UInt16 = 1, params: [(String, [UInt8])], body: [UInt8], keepConnection: Bool = false
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes += record(.beginRequest, requestID, [0, 1, keepConnection ? 1 : 0, 0, 0, 0, 0, 0])
        var encodedParams: [UInt8] = []
        for (name, value) in params {
            encodedParams += encodeLength(name.utf8.count) + encodeLength(value.count)
            encodedParams += Array(name.utf8) + value
        }
        bytes += stream(.params, requestID, encodedParams)
        bytes += stream(.stdin, requestID, body)
        return bytes
    }

    /// Content split into records of at most 65535 bytes (padded to 8), then an empty record.
    static func stream(_ type: RecordType, _ requestID: UInt16, _ content: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        var offset = 0
        while offset < content.count {
            let end = min(offset + 65535, content.count)
            bytes += record(type, requestID, Array(content[offset..<end]))
            offset = end
        }
        bytes += record(type, requestID, [])
        return bytes
    }

    static func record(_ type: RecordType, _ requestID: UInt16, _ content: [UInt8]) -> [UInt8] {
        let padding = (8 - content.count % 8) % 8
        var bytes: [UInt8] = [
            1, type.rawValue, UInt8(requestID >> 8), UInt8(requestID & 0xff),
            UInt8(content.count >> 8), UInt8(content.count & 0xff), UInt8(padding), 0,
        ]
        bytes += content
        bytes += [UInt8](repeating: 0, count: padding)
        return bytes
    }

    static func encodeLength(_ length: Int) -> [UInt8] {
        if length < 128 { return [UInt8(length)] }
        return [UInt8((length >> 24) | 0x80), UInt8((length >> 16) & 0xff), UInt8((length >> 8) & 0xff), UInt8(length & 0xff)]
    }
}
