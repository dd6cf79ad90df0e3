/// A client-controlled value as it may appear in a log line (issue 19, item 6): at most `limit`
/// bytes of UTF-8, cut at a character boundary, then how many bytes were left out. A request
/// carries up to 16 KB per header line (nginx's `large_client_header_buffers`), and a line per
/// request that grows with it lets one client write the disk full at its own bandwidth.
public enum LogField {
    /// Method names: the longest standard one is 7 bytes.
    public static let methodLimit = 16
    /// Paths, request ids and error texts.
    public static let textLimit = 256

    public static func capped(_ value: String, limit: Int = textLimit) -> String {
        let total = value.utf8.count
        guard total > limit else { return value }
        var kept = String.UnicodeScalarView()
        var bytes = 0
        for scalar in value.unicodeScalars {
            let width = UTF8.width(scalar)
            if bytes + width > limit { break }
            kept.append(scalar)
            bytes += width
        }
        return String(kept) + "…(+\(total - bytes) bytes)"
    }
}
