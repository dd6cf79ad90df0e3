/// One todo parsed from a quick-add line, before the store gives it an id.
public struct QuickAddLine: Sendable, Equatable {
    public var title: String
    public var raw: String
    public var isImportant = false
    public var isLife = false
    public var tagID: Int64?
    public var estimatedTime: Int?
    public var difficulty: Int?

    public init(title: String, raw: String, isImportant: Bool = false, isLife: Bool = false, tagID: Int64? = nil,
                estimatedTime: Int? = nil, difficulty: Int? = nil) {
        self.title = title
        self.raw = raw
        self.isImportant = isImportant
        self.isLife = isLife
        self.tagID = tagID
        self.estimatedTime = estimatedTime
        self.difficulty = difficulty
    }
}

/// Parses `POST /todos/quick-add` text, one todo per non-blank line:
/// `!` at the start marks it important; `#name` picks a tag (unknown names stay in the title);
/// `@life` sets isLife; `30m`, `2h`, `1h30m` set estimatedTime (0–1440); `*1`…`*5` set difficulty.
/// Out-of-range tokens are ordinary words; the last token of a kind wins.
public enum QuickAddParser {
    /// At most this many non-blank lines per request.
    public static let maximumLines = 50

    /// Parses `text`; `tagNamed` maps a lower-cased tag name to the user's tag id (first by id).
    /// Throws a 422 naming the first bad line if any line is invalid (nothing is created then).
    public static func parse(_ text: String, tagNamed: (String) -> Int64?) throws(DomainError) -> [QuickAddLine] {
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" })
            .map { $0.trimmingWhitespace() }
            .filter { !$0.isEmpty }
        guard !lines.isEmpty else { throw DomainError.validation(field: "text", "must contain at least one non-blank line") }
        guard lines.count <= maximumLines else {
            throw DomainError.validation(field: "text", "must have at most \(maximumLines) non-blank lines (got \(lines.count))")
        }
        var result: [QuickAddLine] = []
        for (index, line) in lines.enumerated() {
            let parsed = parseLine(line, tagNamed: tagNamed)
            let field = "text[\(index)]"
            if parsed.title.isEmpty { throw DomainError.validation(field: field, "leaves an empty title") }
            if parsed.title.unicodeScalars.count > TodoField.titleLength.upperBound {
                throw DomainError.validation(field: field, "title is longer than \(TodoField.titleLength.upperBound) characters")
            }
            if parsed.raw.unicodeScalars.count > TodoField.rawLength.upperBound {
                throw DomainError.validation(field: field, "is longer than \(TodoField.rawLength.upperBound) characters")
            }
            result.append(parsed)
        }
        return result
    }

    /// Parses one trimmed, non-blank line.
    public static func parseLine(_ line: String, tagNamed: (String) -> Int64?) -> QuickAddLine {
        var parsed = QuickAddLine(title: "", raw: line)
        var rest = Substring(line)
        if rest.hasPrefix("!") {
            parsed.isImportant = true
            rest = rest.dropFirst()
        }
        var words: [Substring] = []
        for token in rest.split(whereSeparator: { $0.isWhitespace }) {
            if token.count > 1, token.hasPrefix("#"), let tagID = tagNamed(String(token.dropFirst()).lowercased()) {
                parsed.tagID = tagID
            } else if token.lowercased() == "@life" {
                parsed.isLife = true
            } else if let minutes = duration(token) {
                parsed.estimatedTime = minutes
            } else if let difficulty = difficulty(token) {
                parsed.difficulty = difficulty
            } else {
                words.append(token)
            }
        }
        parsed.title = words.joined(separator: " ")
        return parsed
    }

    /// `30m`, `2h`, `1h30m` → minutes, when 0…1440; else nil.
    static func duration(_ token: Substring) -> Int? {
        var hours: Int?
        var minutes: Int?
        var digits = ""
        for character in token {
            if let digit = character.wholeNumberValue, character.isASCII {
                digits.append(character)
                guard digits.count <= 5 else { return nil }
                _ = digit
            } else if character == "h", hours == nil, minutes == nil, !digits.isEmpty {
                hours = Int(digits)
                digits = ""
            } else if character == "m", minutes == nil, !digits.isEmpty {
                minutes = Int(digits)
                digits = ""
            } else {
                return nil
            }
        }
        guard digits.isEmpty, hours != nil || minutes != nil else { return nil }
        let total = (hours ?? 0) * 60 + (minutes ?? 0)
        return TodoField.estimatedTimeRange.contains(Int64(total)) ? total : nil
    }

    /// `*1`…`*5` → difficulty; else nil.
    static func difficulty(_ token: Substring) -> Int? {
        guard token.count == 2, token.hasPrefix("*"), let value = token.last?.wholeNumberValue,
              token.last!.isASCII, (1...5).contains(value) else { return nil }
        return value
    }
}
