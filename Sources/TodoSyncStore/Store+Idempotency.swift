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

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func == (a: StoredResponse, b: StoredResponse) -> Bool {
        a.status == b.status && a.body == b.body
            && a.headers.elementsEqual(b.headers) { $0.name == $1.name && $0.value == $1.value }
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
    /// The same request already completed: answer this, change nothing.
    case completed(StoredResponse)
    /// The same key's first request is still running (409 `request_in_progress`).
    case inProgress
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
    /// A running claim older than the request budget plus a margin belongs to a request that can
    /// no longer commit (its deadline has passed; a responder that died): it is taken over.
    /// Even a takeover of a live run is safe: the answer is stored only where the claim still
    /// matches, in the write's own transaction, so exactly one of the two commits.
    public func claimIdempotencyKey(userID: Int64, key: String, fingerprint: [UInt8]) throws -> IdempotencyClaim {
        try guarded {
            for _ in 0..<3 {
                let claim = Int64.random(in: 1...Int64.max)
                let now = Timestamp.now()
                let inserted = try db.execute(SQL.Idempotency.claim, [
                    .int(userID), .blob(Array(key.utf8)), .blob(fingerprint), .int(claim), .timestamp(now),
                ])
                if inserted.affectedRows > 0 { return .claimed(IdempotencyTicket(userID: userID, key: key, claim: claim)) }
                let abandonedBefore = Timestamp(
                    millisecondsSinceEpoch: now.millisecondsSinceEpoch - configuration.requestBudgetMilliseconds - 10_000)
                guard let row = try db.queryOne(SQL.Idempotency.byKey, [
                    .timestamp(abandonedBefore), .int(userID), .blob(Array(key.utf8)),
                ]) else { continue }  // released meanwhile: claim again
                guard row.bytes(0) == fingerprint else { return .reused }
                let status = Int(row.int64(1)!)
                if status != 0 {
                    return .completed(StoredResponse(
                        status: status, headers: StoredResponse.headers(fromText: row.string(4) ?? ""),
                        body: row.bytes(5) ?? []))
                }
                guard row.int64(3) == 1 else { return .inProgress }
                let taken = try db.execute(SQL.Idempotency.takeOver, [
                    .int(claim), .timestamp(now), .int(userID), .blob(Array(key.utf8)), .int(row.int64(2)!),
                ])
                if taken.affectedRows > 0 { return .claimed(IdempotencyTicket(userID: userID, key: key, claim: claim)) }
            }
            return .inProgress
        }
    }

    /// Runs a claimed request in one transaction that first takes the user's write lock (so its
    /// reads see every earlier write of the user), then `body` (whose `write` calls become
    /// savepoints of this transaction), then stores `answer(result)` under the key, and commits
    /// only within the deadline. `answer` nil: nothing is stored (release the claim after).
    public func runIdempotent<T>(_ ticket: IdempotencyTicket, _ body: () throws -> T,
                                 answer: (T) -> StoredResponse?) throws -> T {
        try guarded {
            try db.inTransaction {
                try checkDeadline()
                guard try db.queryOne(SQL.Idempotency.lockUser, [.int(ticket.userID)]) != nil else {
                    throw DomainError.unauthenticated
                }
                let result = try body()
                if let stored = answer(result) {
                    let saved = try db.execute(SQL.Idempotency.complete, [
                        .int(Int64(stored.status)), .text(stored.headerText), .blob(stored.body),
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

    /// Gives the key up after its request applied nothing (an error, or an answer not kept), so
    /// that a retry runs afresh. Best effort: a claim left behind is taken over once abandoned.
    public func releaseIdempotencyKey(_ ticket: IdempotencyTicket) {
        _ = try? db.execute(SQL.Idempotency.release, [
            .int(ticket.userID), .blob(Array(ticket.key.utf8)), .int(ticket.claim),
        ])
    }
}
