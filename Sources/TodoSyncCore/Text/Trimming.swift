extension StringProtocol {
    /// The text without leading and trailing whitespace (Unicode White_Space: spaces, tabs,
    /// line breaks, NBSP…). The one trimming rule for headers, If-Match and quick-add lines.
    public func trimmingWhitespace() -> String {
        let scalars = String(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let last = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(String.UnicodeScalarView(scalars[first...last]))
    }
}
