import Foundation

/// One configuration variable the application reads: its name, its default (the only place the
/// default is written), and whether its value is a secret that is never printed.
public struct Setting: Sendable {
    public let name: String
    /// The value when neither the config file nor the environment sets it; "" means unset.
    public let defaultValue: String
    public let meaning: String
    public let isSecret: Bool
    /// What a set value must look like (`todosync config --check`, and every command at start).
    public let rule: Rule

    /// The shape of a valid value. An unset (empty) value is always valid: the program falls back
    /// to its documented behaviour.
    public enum Rule: Sendable {
        case any
        /// A decimal integer in this range.
        case integer(ClosedRange<Int>)
        /// One of these words, exactly.
        case oneOf([String])

        /// Why `value` breaks the rule, or nil.
        public func problem(with value: String) -> String? {
            switch self {
            case .any:
                return nil
            case .integer(let range):
                guard let number = Int(value), range.contains(number) else {
                    return "must be an integer from \(range.lowerBound) to \(range.upperBound)"
                }
                return nil
            case .oneOf(let words):
                return words.contains(value) ? nil : "must be one of \(words.joined(separator: ", "))"
            }
        }
    }

    public init(_ name: String, default defaultValue: String = "", secret: Bool = false, rule: Rule = .any,
                _ meaning: String) {
        self.name = name
        self.defaultValue = defaultValue
        self.meaning = meaning
        self.isSecret = secret
        self.rule = rule
    }
}

/// Where an effective value came from.
public enum ValueSource: Equatable, Sendable, CustomStringConvertible {
    case defaultValue
    case file(String)
    case environment

    public var description: String {
        switch self {
        case .defaultValue: "default"
        case .file(let path): "file \(path)"
        case .environment: "environment"
        }
    }
}

/// A config file line that is not `NAME=VALUE`, or a file that cannot be read.
public struct ConfigFileError: Error, CustomStringConvertible, Equatable {
    public let path: String
    public let line: Int
    public let message: String
    public var description: String { line > 0 ? "\(path):\(line): \(message)" : "\(path): \(message)" }
}

/// The config file: `NAME=VALUE` lines, the subset of shell syntax that `scripts/stack.sh` also
/// sources. Blank lines and `#` comments are skipped, `export ` is allowed, values may be
/// 'single-quoted' (literal) or "double-quoted" (\" \\ \$ \` escapes); unquoted values end at
/// whitespace, where a ` # comment` may follow.
public enum ConfigFile {
    public static func parse(_ text: String, path: String) throws -> [String: String] {
        var values: [String: String] = [:]
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            func fail(_ message: String) -> ConfigFileError {
                ConfigFileError(path: path, line: index + 1, message: message)
            }
            var line = Substring(rawLine.trimmingWhitespace())
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("export ") { line = Substring(line.dropFirst(7).trimmingWhitespace()) }
            guard let equals = line.firstIndex(of: "=") else { throw fail("expected NAME=VALUE") }
            let name = String(line[..<equals])
            guard let first = name.first, first == "_" || first.isASCIILetter,
                  name.allSatisfy({ $0 == "_" || $0.isASCIILetter || $0.isASCIIDigit })
            else { throw fail("'\(name)' is not a variable name") }
            var rest = line[line.index(after: equals)...]
            var value = ""
            switch rest.first {
            case "'":
                rest = rest.dropFirst()
                guard let close = rest.firstIndex(of: "'") else { throw fail("unterminated '") }
                value = String(rest[..<close])
                rest = rest[rest.index(after: close)...]
            case "\"":
                rest = rest.dropFirst()
                var closed = false
                while let character = rest.popFirst() {
                    if character == "\"" { closed = true; break }
                    if character == "\\", let next = rest.first, "\"\\$`".contains(next) {
                        value.append(next)
                        rest = rest.dropFirst()
                    } else if character == "$" || character == "`" {
                        throw fail("substitutions ($, `) are not supported")
                    } else {
                        value.append(character)
                    }
                }
                guard closed else { throw fail("unterminated \"") }
            default:
                let end = rest.firstIndex(where: { $0 == " " || $0 == "\t" }) ?? rest.endIndex
                value = String(rest[..<end])
                rest = rest[end...]
                if value.contains(where: { "$`'\"\\;&|<>()".contains($0) }) {
                    throw fail("quote the value of \(name) (it contains shell syntax)")
                }
            }
            let trailing = rest.trimmingWhitespace()
            guard trailing.isEmpty || trailing.hasPrefix("#") else { throw fail("unexpected text after the value of \(name)") }
            values[name] = value
        }
        return values
    }
}

/// Defaults, then the config file (`$TODOSYNC_CONFIG`), then the environment: the last layer
/// that sets a variable to a non-empty value wins.
public struct LayeredConfiguration: Sendable {
    /// The variable naming the config file.
    public static let fileVariable = "TODOSYNC_CONFIG"

    public let settings: [Setting]
    /// The config file read, nil when `TODOSYNC_CONFIG` is unset or empty.
    public let filePath: String?
    private let file: [String: String]
    private let environment: [String: String]
    private let byName: [String: Setting]

    /// `readFile` returns a file's text, nil when it cannot be read.
    public init(settings: [Setting], environment: [String: String],
                readFile: (String) -> String? = LayeredConfiguration.readFile) throws {
        self.settings = settings
        self.environment = environment
        byName = Dictionary(settings.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        if let path = environment[Self.fileVariable], !path.isEmpty {
            guard let text = readFile(path) else {
                throw ConfigFileError(path: path, line: 0, message: "cannot read the config file (\(Self.fileVariable))")
            }
            filePath = path
            file = try ConfigFile.parse(text, path: path)
        } else {
            filePath = nil
            file = [:]
        }
    }

    public static func readFile(_ path: String) -> String? {
        // stdio, not FileManager or FileHandle: those fail on /dev/null (what test.sh passes).
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = [], buffer = [UInt8](repeating: 0, count: 4096)
        while case let count = fread(&buffer, 1, buffer.count, file), count > 0 {
            bytes.append(contentsOf: buffer[..<count])
        }
        return ferror(file) == 0 ? String(decoding: bytes, as: UTF8.self) : nil
    }

    /// The effective value and where it came from; nil value: unset everywhere.
    public func lookup(_ name: String) -> (value: String?, source: ValueSource) {
        if let value = environment[name], !value.isEmpty { return (value, .environment) }
        if let value = file[name], !value.isEmpty, let filePath { return (value, .file(filePath)) }
        let fallback = byName[name]?.defaultValue ?? ""
        return (fallback.isEmpty ? nil : fallback, .defaultValue)
    }

    public func value(_ name: String) -> String? { lookup(name).value }

    /// Every setting whose effective value breaks its rule, as `NAME=VALUE (source): problem`
    /// (secret values are not shown). Empty when the configuration is valid.
    public func problems() -> [String] {
        settings.compactMap { setting in
            let (value, source) = lookup(setting.name)
            guard let value, let problem = setting.rule.problem(with: value) else { return nil }
            return "\(setting.name)=\(Self.shown(value, secret: setting.isSecret)) (\(source)): \(problem)"
        }
    }

    /// One line of `todosync config`.
    public struct Entry: Equatable, Sendable {
        public let name: String
        /// The value as printed: secrets that are set show as `<redacted>`.
        public let shownValue: String
        public let source: ValueSource
        /// False for a TODOSYNC_* variable set in the file or environment that no setting reads.
        public let isKnown: Bool
    }

    /// Every setting in order, then the other TODOSYNC_* variables that are set (read by the
    /// scripts, or misspelt), sorted.
    public func entries(prefix: String = "TODOSYNC_") -> [Entry] {
        var result = settings.map { setting in
            let (value, source) = lookup(setting.name)
            return Entry(name: setting.name, shownValue: Self.shown(value, secret: setting.isSecret),
                         source: source, isKnown: true)
        }
        let others = Set(environment.keys).union(file.keys)
            .filter { $0.hasPrefix(prefix) && byName[$0] == nil && $0 != Self.fileVariable }
            .sorted()
        for name in others {
            let (value, source) = lookup(name)
            guard value != nil else { continue }
            result.append(Entry(name: name, shownValue: Self.shown(value, secret: Self.looksSecret(name)),
                                source: source, isKnown: false))
        }
        return result
    }

    /// A `TODOSYNC_*` name set (to a non-empty value, in the file or the environment) that no
    /// setting reads, with where it is set and the setting it most likely misspells.
    public struct UnknownName: Equatable, Sendable, CustomStringConvertible {
        public let name: String
        public let source: ValueSource
        /// The nearest name of ``LayeredConfiguration/settings`` (or `TODOSYNC_CONFIG`), when close.
        public let suggestion: String?

        public var description: String {
            "\(name) (\(source)): no setting reads it" + (suggestion.map { "; did you mean \($0)?" } ?? "")
        }
    }

    /// The `TODOSYNC_*` names set that no setting reads: what `todosync config --check` refuses
    /// (a misspelt name is otherwise ignored, and its setting silently keeps its default). The
    /// known names are ``settings``, the one declaration, and `TODOSYNC_CONFIG`.
    public func unknownNames(prefix: String = "TODOSYNC_") -> [UnknownName] {
        entries(prefix: prefix).filter { !$0.isKnown }.map {
            UnknownName(name: $0.name, source: $0.source, suggestion: nearestName(to: $0.name, prefix: prefix))
        }
    }

    /// The known name nearest to `name` by edit distance, when it is close enough to be a
    /// misspelling (at most a third of the part after the prefix, at least 2), or when one
    /// name is the start of the other (`TODOSYNC_WORKER`).
    public func nearestName(to name: String, prefix: String = "TODOSYNC_") -> String? {
        let known = settings.map(\.name) + [Self.fileVariable]
        let word = Array(name.utf8)
        let scored = known.map { (name: $0, distance: Self.editDistance(word, Array($0.utf8))) }
        if let best = scored.min(by: { $0.distance < $1.distance }),
           best.distance <= max(2, (name.count - prefix.count) / 3) {
            return best.name
        }
        return known.first { $0.hasPrefix(name) || name.hasPrefix($0 + "_") }
    }

    /// Levenshtein distance (insertions, deletions, substitutions).
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        guard !a.isEmpty else { return b.count }
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

    /// Names that hold secrets even when no setting says so.
    static func looksSecret(_ name: String) -> Bool {
        name.contains("PASSWORD") || name.contains("SECRET") || name.hasSuffix("_KEY")
    }

    static func shown(_ value: String?, secret: Bool) -> String {
        guard let value else { return "" }
        return secret ? "<redacted>" : value
    }

    /// The text `todosync config` prints: `NAME=VALUE  # source`, with each meaning when `verbose`.
    public func render(verbose: Bool = false) -> String {
        var text = "# \(Self.fileVariable): \(filePath ?? "unset (no config file)")\n"
        let all = entries()
        let width = min(all.map { $0.name.count + 1 + $0.shownValue.count }.max() ?? 0, 60)
        var printedOthersHeader = false
        for entry in all {
            if !entry.isKnown && !printedOthersHeader {
                text += "# set, but not read by todosync (scripts/stack.sh reads its own; or a misspelling):\n"
                printedOthersHeader = true
            }
            if verbose, let meaning = byName[entry.name]?.meaning, !meaning.isEmpty {
                text += "# \(meaning)\n"
            }
            let assignment = "\(entry.name)=\(entry.shownValue)"
            let padding = String(repeating: " ", count: max(1, width + 2 - assignment.count))
            text += assignment + padding + "# " + (entry.source == .defaultValue && entry.shownValue.isEmpty
                ? "unset" : entry.source.description) + "\n"
        }
        return text
    }
}

extension LayeredConfiguration {
    /// `NAME=VALUE` lines of every setting, for scripts (`scripts/stack.sh env`); unset ones
    /// with an empty value. Secrets are left out altogether, not redacted.
    public func renderAssignments() -> String {
        settings.filter { !$0.isSecret }.map { "\($0.name)=\(value($0.name) ?? "")\n" }.joined()
    }
}

extension Character {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}

extension StringProtocol {
    fileprivate func trimmingWhitespace() -> SubSequence {
        var slice = self[...]
        while let first = slice.first, first == " " || first == "\t" || first == "\r" { slice = slice.dropFirst() }
        while let last = slice.last, last == " " || last == "\t" || last == "\r" { slice = slice.dropLast() }
        return slice
    }
}
