import Credentials
import MariaDB
import TodoSyncCore

/// An answer kept for an `Idempotency-Key`: replayed byte for byte to a retry. The store knows
/// no HTTP types: headers are (name, value) pairs, as in `FastCGIResponse`.
public struct StoredResponse: Sendable, Equatable {
    public var status: Int
    /// The headers that belong to the answer (Content-Type, ETag, Location).
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// The body is not kept: a repeat of the request rebuilds it by running again, changing
    /// nothing (a push: every opId replays its stored result, so it answers the same bytes).
    /// Only the status and headers are stored (Sql/028).
    public var replay: Bool

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8], replay: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.replay = replay
    }

    public static func == (a: StoredResponse, b: StoredResponse) -> Bool {
        a.status == b.status && a.body == b.body && a.replay == b.replay
            && a.headers.elementsEqual(b.headers) { $0.name == $1.name && $0.value == $1.value }
    }

    /// What the answer's row costs its account (Sql/028 `stored_bytes`): the key, the
    /// fingerprint, the headers and the body as stored, plus the row's own overhead.
    func storedBytes(key: String) -> Int64 {
        Int64(key.utf8.count + 32 + headerText.utf8.count + (replay ? 0 : body.count) + Store.idempotencyRowOverhead)
    }

    /// Headers as stored: one `name: value` per line (values never contain line breaks).
    var headerText: String {
        headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    static func headers(fromText text: String) -> [(name: String, value: String)] {
        text.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), String(line[line.index(after: colon)...].dropFirst()))
        }
    }
}

/// A request's claim on its (user, key): it owns the key until it stores its answer or releases it.
public struct IdempotencyTicket: Sendable {
    public let userID: Int64
    public let key: String
    let claim: Int64
}

/// What a new request with an `Idempotency-Key` finds.
public enum IdempotencyClaim: Sendable {
    /// The key is new (or its earlier run was abandoned): run the request under this ticket.
    case claimed(IdempotencyTicket)
    /// The same request already completed: answer this, change nothing. When its `replay` is
    /// set, the body was not kept: run the request again with `Store.replayOnly` set, which
    /// rebuilds it (a push whose every opId replays its stored result).
    case completed(StoredResponse)
    /// The same key's first request is still running (409 `request_in_progress`); retry after
    /// this many seconds: 1 while it is seen running, else the time until it would be taken over.
    case inProgress(retryAfterSeconds: Int64)
    /// The key was used for another method, path or body (422 `idempotency_key_reused`).
    case reused
}

extension Store {
    /// SHA-256 of what makes two requests "the same" for a key (contract: method, path, body).
    public static func idempotencyFingerprint(method: String, path: String, body: [UInt8]) -> [UInt8] {
        BearerToken.sha256(Array("\(method)\n\(path)\n".utf8) + body)
    }

    /// Claims `key` for this request, or says why not. The claim is committed at once (its own
    /// statement), so a concurrent duplicate sees it without waiting for the first's locks.
    ///
    /// A running claim is taken over when its request is known to be gone:
    /// - on one database server, at once when no transaction holds the user's row lock: a keyed
    ///   request holds it for its whole transaction (`runIdempotent`), and the server rolls a
    ///   dead responder's transaction back as soon as its connection drops (issue 19: a retry
    ///   after a responder crash waited 30 s on 409s);
    /// - in any case (also on Galera, whose row locks are each node's own), once it is older than
    ///   the request budget plus a margin: its deadline has passed, so it can no longer commit.
    /// Otherwise the answer is `inProgress` with the seconds to wait. Even a takeover of a live
    /// run is safe: the answer is stored only where the claim still matches, in the write's own
    /// transaction, so exactly one of the two commits (the other is 503, nothing applied).
    public func claimIdempotencyKey(userID: Int64, key: String, fingerprint: [UInt8]) throws -> IdempotencyClaim {
        try guarded {
            for _ in 0..<3 {
                let claim = Int64.random(in: 1...Int64.max)
                let now = Timestamp.now()
                let inserted = try db.execute(SQL.Idempotency.claim, [
                    .int(userID), .blob(Array(key.utf8)), .blob(fingerprint), .int(claim), .timestamp(now),
                ])
                if inserted.affectedRows > 0 { return .claimed(IdempotencyTicket(userID: userID, key: key, claim: claim)) }
                let abandonedBefore = Timestamp(millisecondsSinceEpoch: now.millisecondsSinceEpoch
                    - configuration.requestBudgetMilliseconds - Self.claimMarginMilliseconds)
                guard let row = try db.queryOne(SQL.Idempotency.byKey, [
                    .timestamp(abandonedBefore), .int(userID), .blob(Array(key.utf8)),
                ]) else { continue }  // released meanwhile: claim again
                typealias C = SQL.Idempotency.KeyColumn
                guard row.bytes(C.fingerprint) == fingerprint else { return .reused }
                let status = Int(row.int64(C.status)!)
                if status != 0 {
                    return .completed(StoredResponse(
                        status: status, headers: StoredResponse.headers(fromText: row.string(C.responseHeaders) ?? ""),
                        body: row.bytes(C.responseBody) ?? [], replay: row.bool(C.replay) == true))
                }
                let secondsUntilAbandoned = row.int64(C.secondsUntilAbandoned) ?? 0
                if secondsUntilAbandoned > 0 {
                    guard let gone = try claimHolderIsGone(userID: userID) else {
                        return .inProgress(retryAfterSeconds: secondsUntilAbandoned)  // Galera: only time tells
                    }
                    guard gone else { return .inProgress(retryAfterSeconds: 1) }
                }
                let taken = try db.execute(SQL.Idempotency.takeOver, [
                    .int(claim), .timestamp(now), .int(userID), .blob(Array(key.utf8)), .int(row.int64(C.claim)!),
                ])
                if taken.affectedRows > 0 { return .claimed(IdempotencyTicket(userID: userID, key: key, claim: claim)) }
            }
            return .inProgress(retryAfterSeconds: 1)
        }
    }

    /// A claim this much older than the request budget is abandoned whatever else is known (the
    /// margin covers clocks of responder hosts that differ a little).
    static let claimMarginMilliseconds: Int64 = 2_000

    /// Whether the request holding a running claim of `userID` is gone: true when no transaction
    /// holds the user's row lock on this server, false when one does, nil on a Galera node
    /// (where a request on another node holds its locks there, unseen here).
    private func claimHolderIsGone(userID: Int64) throws -> Bool? {
        if let galera = try db.queryOne(SQL.Idempotency.isGaleraNode)?.int64(OnlyColumn.value), galera != 0 { return nil }
        return try db.queryOne(SQL.Idempotency.userUnlocked, [.int(userID)]) != nil
    }

    /// Runs a claimed request in one transaction that first takes the user's write lock (so its
    /// reads see every earlier write of the user, and a repeat of its key sees it running:
    /// `claimIdempotencyKey`), then `body` (whose `write` calls become
    /// savepoints of this transaction), then stores `answer(result)` under the key, and commits
    /// only within the deadline. `answer` nil: nothing is stored (release the claim after).
    ///
    /// What the answer stores is bounded (issue 34, item 4): its bytes (`StoredResponse.storedBytes`)
    /// are charged to the account's stored bytes per hour (Sql/020), and the account's records
    /// may not pass its ceiling of rows and bytes (`StoreConfiguration.idempotencyKeysPerAccount`,
    /// `idempotencyBytesPerAccount`): past either, 429 until its oldest record expires. An answer
    /// that could never be kept (over `maximumStoredAnswerBytes` or the account's whole byte
    /// ceiling) is 422 on the `Idempotency-Key` field. Each of these rolls the request back: nothing
    /// applied, a definite answer, the same on every repeat.
    public func runIdempotent<T>(_ ticket: IdempotencyTicket, _ body: () throws -> T,
                                 answer: (T) -> StoredResponse?) throws -> T {
        try guarded {
            try db.inTransaction {
                try checkDeadline()
                guard let user = try db.queryOne(SQL.Idempotency.lockUser, [
                    .int(configuration.quotaStoredBytesPerHour), .int(configuration.idempotencyKeysPerAccount),
                    .int(configuration.idempotencyBytesPerAccount), .int(ticket.userID),
                ]) else {
                    throw DomainError.unauthenticated
                }
                isIdempotentRequest = true
                defer { isIdempotentRequest = false }
                let result = try body()
                if let stored = answer(result) {
                    let bytes = stored.storedBytes(key: ticket.key)
                    typealias C = SQL.Idempotency.LockUserColumn
                    try admitAnswer(stored, bytes: bytes, userID: ticket.userID,
                                    storedBytesQuota: user.int64(C.storedBytesQuota)!,
                                    keysCeiling: user.int64(C.keysCeiling)!, bytesCeiling: user.int64(C.bytesCeiling)!)
                    let saved = try db.execute(SQL.Idempotency.complete, [
                        .int(Int64(stored.status)), .text(stored.headerText), stored.replay ? .null : .blob(stored.body),
                        .int(stored.replay ? 1 : 0), .int(bytes),
                        .int(ticket.userID), .blob(Array(ticket.key.utf8)), .int(ticket.claim),
                    ])
                    // Another request took the key over: it will do the work, this one must not.
                    if saved.affectedRows == 0 { throw DomainError.unavailable }
                }
                try checkDeadline()
                return result
            }
        }
    }

    /// The longest body an `Idempotency-Key` answer may store: well inside the column
    /// (MEDIUMBLOB, 16 MiB) and MariaDB's `max_allowed_packet` (16 MiB), past which the answer's
    /// write failed as a lost connection, a 503 on every repeat. No answer of today's routes
    /// comes near it but a push's, which is never stored (`StoredResponse.replay`).
    public static let maximumStoredAnswerBytes = 8 << 20

    /// What an `Idempotency-Key` record costs beyond what it stores: its index entries and row
    /// header, counted so that many tiny answers still meet the byte ceiling.
    static let idempotencyRowOverhead = 96

    /// Checks that the answer may be kept (see `runIdempotent`) and charges it. Under the user's
    /// row lock, so the account's concurrent keyed requests are counted one after the other.
    private func admitAnswer(_ stored: StoredResponse, bytes: Int64, userID: Int64, storedBytesQuota: Int64,
                             keysCeiling: Int64, bytesCeiling: Int64) throws {
        let limit = min(Int64(Self.maximumStoredAnswerBytes), bytesCeiling)
        if bytes > limit {
            throw DomainError.validation(field: "Idempotency-Key", "the answer (\(bytes) bytes) is larger than an "
                + "Idempotency-Key can keep (\(limit) bytes); send this request without one")
        }
        let horizon = DatabaseValue.timestamp(Timestamp.now().adding(seconds: -configuration.idempotencyRetentionSeconds))
        func usage() throws -> (rows: Int64, bytes: Int64, secondsToExpiry: Int64) {
            let row = try db.queryOne(SQL.Idempotency.usage, [horizon, .int(userID)])!
            typealias C = SQL.Idempotency.UsageColumn
            return (row.int64(C.rows) ?? 0, row.int64(C.bytes) ?? 0, row.int64(C.secondsToExpiry) ?? 0)
        }
        // The rows counted include this request's own claim.
        var used = try usage()
        if used.rows > keysCeiling || used.bytes + bytes > bytesCeiling {
            // Records past retention that the daily purge has not removed yet do not count.
            try db.execute(SQL.Idempotency.purgeUser, [.int(userID), horizon])
            used = try usage()
            if used.rows > keysCeiling || used.bytes + bytes > bytesCeiling {
                throw DomainError.throttled(
                    message: "This account keeps the most Idempotency-Key answers it may (\(keysCeiling) keys, "
                        + "\(bytesCeiling) bytes) until the oldest expires; retry then, or without a key.",
                    retryAfterSeconds: max(1, used.secondsToExpiry))
            }
        }
        try chargeStoredBytes(userID: userID, bytes, quota: storedBytesQuota, at: Timestamp.now())
    }

    /// Gives the key up after its request applied nothing (an error, or an answer not kept), so
    /// that a retry runs afresh. Best effort: a claim left behind is taken over once abandoned.
    public func releaseIdempotencyKey(_ ticket: IdempotencyTicket) {
        _ = try? db.execute(SQL.Idempotency.release, [
            .int(ticket.userID), .blob(Array(ticket.key.utf8)), .int(ticket.claim),
        ])
    }
}

extension SQL {
    /// `Idempotency-Key` records (Store+Idempotency.swift, Sql/013).
    enum Idempotency {
        /// Claims a new key (status 0 = running); 0 rows affected when the key exists.
        static let claim = """
            INSERT INTO idempotency_keys (user_id, idem_key, fingerprint, claim, status, created_at)
            VALUES (?, ?, ?, ?, 0, ?) ON DUPLICATE KEY UPDATE user_id = user_id
            """
        /// An existing key: its request, whether it is still running, the seconds until its run
        /// counts as abandoned (parameter: the instant before which a claim is abandoned; 0 or
        /// less: abandoned now), and the stored answer.
        static let byKey = """
            SELECT fingerprint, status, claim, CEILING(TIMESTAMPDIFF(MICROSECOND, ?, created_at) / 1000000),
                   response_headers, response_body, replay
              FROM idempotency_keys WHERE user_id = ? AND idem_key = ?
            """
        enum KeyColumn: Int, ResultColumns {
            case fingerprint, status, claim, secondsUntilAbandoned, responseHeaders, responseBody, replay
        }
        /// Whether this server is a Galera node (its row locks are its own, not the cluster's).
        static let isGaleraNode = "SELECT @@wsrep_on"
        /// The user's row if no transaction holds its lock: a keyed request holds it from the start
        /// of its transaction to its commit (`lockUser`), so a running claim whose user row is
        /// free belongs to a request that is not running (its responder died, and the database
        /// rolled its transaction back when the connection dropped).
        static let userUnlocked = "SELECT id FROM users WHERE id = ? FOR UPDATE SKIP LOCKED"
        /// Takes over an abandoned claim (compare-and-set on the old claim).
        static let takeOver = """
            UPDATE idempotency_keys SET claim = ?, created_at = ?
             WHERE user_id = ? AND idem_key = ? AND claim = ? AND status = 0
            """
        /// Stores the answer, in the transaction of the write; 0 rows when the claim was lost.
        static let complete = """
            UPDATE idempotency_keys SET status = ?, response_headers = ?, response_body = ?, replay = ?, stored_bytes = ?
             WHERE user_id = ? AND idem_key = ? AND claim = ? AND status = 0
            """
        /// The account's records (claims included), the bytes they store, and the seconds until
        /// the oldest passes the retention horizon (the first parameter): a range read of
        /// `idempotency_keys_user_usage` (Sql/028). Parameters: horizon, user.
        static let usage = """
            SELECT COUNT(*), COALESCE(SUM(stored_bytes), 0),
                   CEILING(TIMESTAMPDIFF(MICROSECOND, ?, MIN(created_at)) / 1000000)
              FROM idempotency_keys WHERE user_id = ?
            """
        enum UsageColumn: Int, ResultColumns { case rows, bytes, secondsToExpiry }
        /// The account's completed records past the retention horizon. Parameters: user, horizon.
        static let purgeUser = "DELETE FROM idempotency_keys WHERE user_id = ? AND created_at < ? AND status <> 0"
        /// Drops a claim whose request applied nothing (the key can be used again).
        static let release = """
            DELETE FROM idempotency_keys WHERE user_id = ? AND idem_key = ? AND claim = ? AND status = 0
            """
        /// The user's row lock, taken first by a keyed request's transaction, so that its reads see
        /// every earlier write of the user (the route's own `write` takes it again, a no-op).
        /// Answers the account's stored bytes per hour quota and its Idempotency-Key ceilings
        /// (Sql/020, Sql/028). Parameters: the defaults of the three, user.
        static let lockUser = """
            SELECT COALESCE(quota_stored_bytes_per_hour, ?), COALESCE(quota_idempotency_keys, ?),
                   COALESCE(quota_idempotency_bytes, ?)
              FROM users WHERE id = ? AND deleted_at IS NULL FOR UPDATE
            """
        enum LockUserColumn: Int, ResultColumns { case storedBytesQuota, keysCeiling, bytesCeiling }
        static let purge = "DELETE FROM idempotency_keys WHERE created_at < ?"
        /// Records whose answer is rebuilt from stored push results, past the horizon of those
        /// results (the shorter of the two retentions): they must not outlive what rebuilds them.
        static let purgeReplays = "DELETE FROM idempotency_keys WHERE replay = 1 AND created_at < ?"
    }
}
