/// The CGI response head for one ``FastCGIResponse``: `Status:` line, headers, `Content-Length`
/// (none for a streamed body: the web server frames it), blank line, encoded into one buffer so it reaches libfcgi in a single `FCGX_PutStr`.
struct ResponseHead {
    /// The encoded head, ending with the blank line.
    var bytes: [UInt8]
    /// Whether the response body follows the head (false for 1xx, 204, 304 and invalid statuses).
    var includesBody: Bool
    /// The status that was written (500 when the handler's status was out of range).
    var status: Int
    /// Names of header lines that were dropped because they were malformed.
    var droppedHeaderNames: [String]

    init(_ response: FastCGIResponse) {
        let statusIsValid = (100...599).contains(response.status)
        status = statusIsValid ? response.status : 500
        includesBody = statusIsValid && Self.statusAllowsBody(status)
        droppedHeaderNames = []

        var bytes: [UInt8] = []
        bytes.reserveCapacity(64 + response.headers.count * 48)
        bytes.append(contentsOf: "Status: ".utf8)
        Self.appendDecimal(status, to: &bytes)
        bytes.append(UInt8(ascii: " "))
        bytes.append(contentsOf: HTTPReasonPhrase.for(status).utf8)
        bytes.append(contentsOf: Self.crlf)
        if statusIsValid {
            for header in response.headers {
                if Self.isIgnoredName(header.name) { continue }
                guard Self.isValidName(header.name), Self.isValidValue(header.value) else {
                    droppedHeaderNames.append(header.name)
                    continue
                }
                bytes.append(contentsOf: header.name.utf8)
                bytes.append(contentsOf: Self.colonSpace)
                bytes.append(contentsOf: header.value.utf8)
                bytes.append(contentsOf: Self.crlf)
            }
        }
        if (includesBody && response.stream == nil) || !statusIsValid {
            bytes.append(contentsOf: "Content-Length: ".utf8)
            Self.appendDecimal(includesBody ? response.body.count : 0, to: &bytes)
            bytes.append(contentsOf: Self.crlf)
        }
        bytes.append(contentsOf: Self.crlf)
        self.bytes = bytes
    }

    private static let crlf: [UInt8] = [13, 10]
    private static let colonSpace: [UInt8] = [UInt8(ascii: ":"), UInt8(ascii: " ")]

    /// 1xx, 204 and 304 responses never carry a body (RFC 9110 §6.4.1).
    static func statusAllowsBody(_ status: Int) -> Bool {
        !(100...199).contains(status) && status != 204 && status != 304
    }

    /// Headers the server writes itself.
    private static func isIgnoredName(_ name: String) -> Bool {
        asciiCaseInsensitiveEquals(name, "content-length") || asciiCaseInsensitiveEquals(name, "status")
    }

    /// An RFC 9110 token: visible ASCII except separators.
    static func isValidName(_ name: String) -> Bool {
        guard !name.isEmpty else { return false }
        for byte in name.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                continue
            case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
                UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
                UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
                continue
            default:
                return false
            }
        }
        return true
    }

    /// No CR, LF or NUL (which would split or truncate the header block).
    static func isValidValue(_ value: String) -> Bool {
        !value.utf8.contains { $0 == 13 || $0 == 10 || $0 == 0 }
    }

    private static func asciiCaseInsensitiveEquals(_ name: String, _ lowercase: StaticString) -> Bool {
        let utf8 = name.utf8
        guard utf8.count == lowercase.utf8CodeUnitCount else { return false }
        return lowercase.withUTF8Buffer { expected in
            zip(utf8, expected).allSatisfy { byte, lower in
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte) == lower
            }
        }
    }

    private static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: String(value).utf8)
    }
}
