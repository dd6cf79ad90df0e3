import TodoSyncCore

/// A request as the API sees it, independent of the transport (FastCGI today).
public struct HTTPRequest: Sendable {
    public let method: String
    /// The normalised path, without the query string.
    public let path: String
    /// Decoded query parameters (the last one wins when a name repeats).
    public let query: [String: String]
    /// Request headers by lower-cased name.
    public let headers: [String: String]
    public let body: [UInt8]
    /// The body exceeded the transport's limit and was not read.
    public let bodyTooLarge: Bool
    /// The client's address as nginx saw it (`REMOTE_ADDR`, after its real-IP rules), or "".
    public let clientAddress: String

    public init(method: String, path: String, queryString: String, headers: [String: String], body: [UInt8],
                bodyTooLarge: Bool = false, clientAddress: String = "") {
        self.method = method
        self.path = path
        self.query = HTTPRequest.parseQuery(queryString)
        self.headers = headers
        self.body = body
        self.bodyTooLarge = bodyTooLarge
        self.clientAddress = clientAddress
    }

    /// A header by case-insensitive name.
    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// Parses `a=1&b=x%20y` (with `+` as space); malformed escapes are kept literally.
    /// Split on the bytes `&` and `=` (a query is bytes, not text: splitting by `Character`
    /// cost a grapheme-breaking pass, ~12k instructions for `date=2025-01-02`).
    static func parseQuery(_ string: String) -> [String: String] {
        var result: [String: String] = [:]
        let bytes = string.utf8
        var start = bytes.startIndex
        while start < bytes.endIndex {
            let end = bytes[start...].firstIndex(of: UInt8(ascii: "&")) ?? bytes.endIndex
            if start < end {
                if let equals = bytes[start..<end].firstIndex(of: UInt8(ascii: "=")) {
                    result[percentDecode(string[start..<equals])] = percentDecode(string[bytes.index(after: equals)..<end])
                } else {
                    result[percentDecode(string[start..<end])] = ""
                }
            }
            start = end < bytes.endIndex ? bytes.index(after: end) : end
        }
        return result
    }

    static func percentDecode(_ text: Substring) -> String {
        // Most names and values (dates, cursors, numbers) have nothing to decode.
        if !text.utf8.contains(where: { $0 == UInt8(ascii: "%") || $0 == UInt8(ascii: "+") }) { return String(text) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count)
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "+") {
                bytes.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), iterator.count >= 2,
                      let high = hexValue(iterator[iterator.startIndex]),
                      let low = hexValue(iterator[iterator.startIndex + 1]) {
                bytes.append(high << 4 | low)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
