/// An `If-Match` precondition: `"7"`, `7`, `W/"7"`, a comma-separated list of those, or `*`.
public struct IfMatch: Sendable, Equatable {
    /// The versions the client accepts; empty with `any` false means nothing can match.
    public let versions: [Int64]
    /// `*`: any current version matches.
    public let any: Bool

    /// Parses the header value; nil when the header is absent.
    public init?(header: String?) {
        guard let header else { return nil }
        var versions: [Int64] = []
        var any = false
        for part in header.split(separator: ",") {
            var tag = part.trimmingWhitespace()
            if tag == "*" { any = true; continue }
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if tag.count >= 2, tag.hasPrefix("\""), tag.hasSuffix("\"") { tag = String(tag.dropFirst().dropLast()) }
            if let version = Int64(tag) { versions.append(version) }
        }
        self.versions = versions
        self.any = any
    }

    /// Whether a record at `version` satisfies the precondition. An unparseable value matches
    /// nothing, so it is answered like a stale one (412 with the current record).
    public func matches(_ version: Int64) -> Bool { any || versions.contains(version) }
}
