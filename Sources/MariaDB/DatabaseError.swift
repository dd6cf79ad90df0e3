/// A failure reported by the server or by Connector/C.
///
/// Carries the SQL text (with `?` placeholders) but never bound values. Server messages that
/// quote a value (duplicate entries, invalid values) have the quoted value replaced by `'?'`.
public struct DatabaseError: Error, Sendable, CustomStringConvertible {
    /// MariaDB / Connector/C error number (e.g. 1062, 2013).
    public let code: UInt32
    /// Five-character SQLSTATE (e.g. `"23000"`); `"HY000"` when unknown.
    public let sqlState: String
    /// Human-readable message, with quoted values redacted.
    public let message: String
    /// The statement's SQL text, when the error belongs to one.
    public let sql: String?
    /// Set when establishing a connection failed, whatever the code (bad credentials included).
    let isConnectFailure: Bool
    /// Set when the connection was lost during COMMIT: the transaction may or may not have been
    /// applied, and nothing here can tell (`inTransaction` never retries it). The API answers
    /// 504 `outcome_unknown`, not 503 (which promises that nothing was applied).
    public internal(set) var isCommitOutcomeUnknown = false

    /// Creates an error (mainly for tests and fakes of other layers).
    public init(code: UInt32, sqlState: String = "HY000", message: String, sql: String? = nil) {
        self.init(code: code, sqlState: sqlState, message: message, sql: sql, isConnectFailure: false)
    }

    init(code: UInt32, sqlState: String, message: String, sql: String?, isConnectFailure: Bool) {
        self.code = code
        self.sqlState = sqlState
        self.message = Self.redactingValues(in: message, code: code)
        self.sql = sql
        self.isConnectFailure = isConnectFailure
    }

    /// True when the server could not be reached or the connection was lost; the operation
    /// may succeed on a new connection (the API answers 503).
    public var isConnectionError: Bool {
        isConnectFailure || Self.connectionErrorCodes.contains(code) || isOutsidePrimaryComponent
    }

    /// A Galera node that left the primary component (a view change after another node died)
    /// fails COMMIT with 1180 "Error while appending streaming replication fragment (provider
    /// status: Not connected to Primary Component)": the provider could not replicate the write
    /// set, so it was rolled back and applied nowhere. Like 1047, another node must be used: the
    /// session is dropped like a lost one (the API answers 503). Other 1180s (a storage engine's
    /// error during COMMIT) stay ordinary errors.
    var isOutsidePrimaryComponent: Bool {
        code == Self.errorDuringCommit && message.contains("Primary Component")
    }

    /// True for deadlock (1213) and lock wait timeout (1205): retrying the transaction may succeed.
    public var isRetryableTransactionError: Bool {
        code == Self.deadlock || code == Self.lockWaitTimeout
    }

    /// True when a UNIQUE or PRIMARY KEY constraint was violated (1062, also 1022 and 1586).
    public var isDuplicateKey: Bool {
        code == 1062 || code == 1022 || code == 1586
    }

    /// For a duplicate-key error, the name of the violated key (`"PRIMARY"`, `"uq_users_email"`).
    public var duplicateKeyName: String? {
        guard isDuplicateKey else { return nil }
        let utf8 = Array(message.utf8)
        guard let start = Self.lastIndex(of: Array("for key '".utf8), in: utf8) else { return nil }
        let nameStart = start + 9
        guard let end = utf8.lastIndex(of: UInt8(ascii: "'")), end > nameStart else { return nil }
        var name = utf8[nameStart..<end]
        // MySQL 8 style "table.key": keep the key.
        if let dot = name.lastIndex(of: UInt8(ascii: ".")) { name = name[(dot + 1)...] }
        return String(decoding: name, as: UTF8.self)
    }

    /// `MariaDB error <code> (<sqlState>): <message> [SQL: <sql>]`.
    public var description: String {
        var text = "MariaDB error \(code) (\(sqlState)): \(message)"
        if let sql { text += " [SQL: \(sql)]" }
        return text
    }

    static let deadlock: UInt32 = 1213
    static let lockWaitTimeout: UInt32 = 1205
    static let unknownStatementHandler: UInt32 = 1243
    static let serverGoneAway: UInt32 = 2006
    static let savepointDoesNotExist: UInt32 = 1305
    static let errorDuringCommit: UInt32 = 1180

    /// Codes after which the connection is unusable (client 2xxx) or was closed by the server.
    static let connectionErrorCodes: Set<UInt32> = [
        // Connector/C
        2001, 2002, 2003, 2004, 2005, 2006, 2011, 2012, 2013, 2026, 2047, 2055, 5013, 5014,
        // Server: too many connections, handshake, shutdown, aborted/killed connection,
        // network read/write errors, unknown statement handler (statement lost with the
        // session), 4031 (MySQL 8: closed for inactivity; in MariaDB this number means
        // "referenced trigger does not exist", a DDL-only error, so the overlap is harmless).
        1040, 1042, 1043, 1053, 1152, 1154, 1156, 1157, 1158, 1159, 1160, 1161, 1184, 1203,
        1243, 1927, 4031,
        // ER_UNKNOWN_COM_ERROR: a Galera node that is not (or no longer) part of the primary
        // component answers "WSREP has not yet prepared node for application use"; another node
        // must be used, so the session is dropped like a lost one.
        1047,
    ]

    /// Codes after which the session cannot be trusted although it may still be open:
    /// commands out of sync, malformed packet, packet too large (the server closes the
    /// connection after 1153).
    static let sessionBreakingCodes: Set<UInt32> = [2014, 2020, 2027, 1153]

    /// Messages that quote a user-supplied value, as `prefix 'VALUE' suffix`.
    private static let valueQuotingCodes: Set<UInt32> = [
        1062,  // Duplicate entry '%s' for key '%s'
        1586,  // Duplicate entry '%s' for key '%s'
        1366,  // Incorrect %s value: '%s' for column ...
        1292,  // Truncated incorrect %s value: '%s'
        1367,  // Illegal %s '%s' value found during parsing
        1411,  // Incorrect %s value: '%s' for function %s
    ]

    /// Replaces the quoted value in messages known to quote one by `'?'`.
    static func redactingValues(in message: String, code: UInt32) -> String {
        guard valueQuotingCodes.contains(code) else { return message }
        let utf8 = Array(message.utf8)
        guard let open = utf8.firstIndex(of: UInt8(ascii: "'")) else { return message }
        // The value ends at the quote that starts "' for " (1062, 1366, ...), else at the last quote.
        var close = lastIndex(of: Array("' for ".utf8), in: utf8)
        if close == nil || close! <= open {
            close = utf8.lastIndex(of: UInt8(ascii: "'"))
        }
        guard let close, close > open else { return message }
        let redacted = utf8[...open] + Array("?".utf8) + utf8[close...]
        return String(decoding: redacted, as: UTF8.self)
    }

    /// Start of the last occurrence of `needle` in `haystack`.
    private static func lastIndex(of needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
        var i = haystack.count - needle.count
        while i >= 0 {
            if haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i -= 1
        }
        return nil
    }
}
