/// When a request must be finished: the moment nginx handed it to the responders plus the
/// configured budget (TodoSyncStore's `StoreConfiguration.requestBudgetMilliseconds`), on the wall clock.
///
/// nginx stops waiting `fastcgi_read_timeout` (30 s) after handing a request over and then
/// answers 504 `outcome_unknown`. A request whose work is not started and whose transaction is
/// not committed past its deadline can therefore only be applied while nginx still waits for
/// it: a 503 from the responder always means nothing was applied, and a timeout only happens
/// when a commit that began in time ran very late. The budget must leave room for one lock
/// wait, one statement and the COMMIT inside nginx's timeout (docs/OPERATIONS.md, "Timeouts and budgets").
///
/// The handover time is nginx's `$msec`, so the nginx and responder hosts' clocks must agree
/// (NTP) to well within the margin; a responder clock that runs ahead only shortens budgets.
public struct RequestDeadline: Sendable, Equatable {
    public let millisecondsSinceEpoch: Int64

    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// The deadline of a request handed over at `start` (nil: now, for a caller without nginx).
    /// A handover cannot lie in the future: a later `start` (only a peer speaking FastCGI
    /// directly could send one) counts from now, so no value stretches a request's budget, and
    /// none can overflow (issue 19, item 8: a huge one crashed the process).
    public init(start: Timestamp?, budgetMilliseconds: Int64) {
        let now = Timestamp.now().millisecondsSinceEpoch
        let from = min(start?.millisecondsSinceEpoch ?? now, now)
        let (sum, overflow) = from.addingReportingOverflow(budgetMilliseconds)
        self.init(millisecondsSinceEpoch: overflow ? (budgetMilliseconds < 0 ? .min : .max) : sum)
    }

    public var hasPassed: Bool { Timestamp.now().millisecondsSinceEpoch >= millisecondsSinceEpoch }

    /// The latest `$msec` taken for a handover time: 9999-12-31T23:59:59Z.
    static let latestMsecSeconds: Int64 = 253_402_300_799

    /// nginx's `$msec` ("1764000000.123": seconds and milliseconds since the epoch) as a
    /// timestamp; nil when it is not that: digits only (no sign), at most `latestMsecSeconds`.
    public static func parseMsec(_ text: String) -> Timestamp? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), (1...12).contains(parts[0].utf8.count),
              parts[0].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }),
              let seconds = Int64(parts[0]), seconds <= latestMsecSeconds else { return nil }
        var milliseconds: Int64 = 0
        if parts.count == 2 {
            let fraction = parts[1]
            guard (1...3).contains(fraction.count), fraction.allSatisfy({ $0.isASCII && $0.isNumber }),
                  var value = Int64(fraction) else { return nil }
            for _ in fraction.count..<3 { value *= 10 }
            milliseconds = value
        }
        return Timestamp(millisecondsSinceEpoch: seconds * 1000 + milliseconds)
    }
}
