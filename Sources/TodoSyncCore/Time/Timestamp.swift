#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A point in time with millisecond precision, UTC. Stored in MariaDB as `DATETIME(3)` text
/// (`2026-11-21 09:30:00.123`) and sent to clients as RFC 3339 (`2026-11-21T09:30:00.123Z`).
public struct Timestamp: Sendable, Hashable, Comparable {
    /// Milliseconds since 1970-01-01T00:00:00Z.
    public let millisecondsSinceEpoch: Int64

    public init(millisecondsSinceEpoch: Int64) {
        self.millisecondsSinceEpoch = millisecondsSinceEpoch
    }

    /// The current time from the system clock.
    public static func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(millisecondsSinceEpoch: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }

    /// This time plus `seconds`.
    public func adding(seconds: Int64) -> Timestamp {
        Timestamp(millisecondsSinceEpoch: millisecondsSinceEpoch + seconds * 1000)
    }

    /// `YYYY-MM-DD HH:MM:SS.mmm`, the form MariaDB accepts for DATETIME(3).
    public var databaseText: String { format(separator: UInt8(ascii: " "), zulu: false) }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, the contract's form.
    public var rfc3339: String { format(separator: UInt8(ascii: "T"), zulu: true) }

    /// Written digit by digit into one allocation: every write formats the transaction's clock
    /// several times per record, and string concatenation made that 14 % of a push (callgrind).
    private func format(separator: UInt8, zulu: Bool) -> String {
        let millis = Int(((millisecondsSinceEpoch % 1000) + 1000) % 1000)
        let seconds = (millisecondsSinceEpoch - Int64(millis)) / 1000
        var days = Int(seconds / 86400)
        var secondOfDay = Int(seconds % 86400)
        if secondOfDay < 0 { secondOfDay += 86400; days -= 1 }
        let (year, month, day) = Timestamp.civil(fromDays: days)
        guard (0...9999).contains(year) else {
            // Outside four-digit years (never stored): the plain, slower form.
            return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + String(UnicodeScalar(separator))
                + pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
                + "." + pad(millis, 3) + (zulu ? "Z" : "")
        }
        return String(unsafeUninitializedCapacity: 24) { output in
            func put(_ value: Int, _ width: Int, at start: Int) {
                var value = value
                for index in stride(from: start + width - 1, through: start, by: -1) {
                    output[index] = UInt8(ascii: "0") + UInt8(value % 10)
                    value /= 10
                }
            }
            put(year, 4, at: 0)
            output[4] = UInt8(ascii: "-")
            put(month, 2, at: 5)
            output[7] = UInt8(ascii: "-")
            put(day, 2, at: 8)
            output[10] = separator
            put(secondOfDay / 3600, 2, at: 11)
            output[13] = UInt8(ascii: ":")
            put(secondOfDay / 60 % 60, 2, at: 14)
            output[16] = UInt8(ascii: ":")
            put(secondOfDay % 60, 2, at: 17)
            output[19] = UInt8(ascii: ".")
            put(millis, 3, at: 20)
            if zulu { output[23] = UInt8(ascii: "Z") }
            return zulu ? 24 : 23
        }
    }

    /// Parses a client's RFC 3339 `date-time` (API.md, a todo's instants): `YYYY-MM-DDTHH:MM:SS`,
    /// optional fraction digits (cut to milliseconds, never rounded), then `Z` or `±HH:MM`; `T` and
    /// `Z` in either case; second 60 and impossible dates refused. Nil for anything else, and when
    /// the instant's UTC year is outside 2000–2999 (`Day`'s years).
    public init?(rfc3339Input text: String) {
        let b = Array(text.utf8)
        func number(_ range: Range<Int>) -> Int? { range.upperBound <= b.count ? Day.digits(b[range]) : nil }
        guard b.count >= 20, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t"), b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
              let hour = number(11..<13), let minute = number(14..<16), let second = number(17..<19),
              (1...12).contains(month), (1...Day.daysIn(month: month, year: year)).contains(day),
              hour < 24, minute < 60, second < 60 else { return nil }
        var index = 19
        var millis = 0
        if b[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < b.count, b[index] >= UInt8(ascii: "0"), b[index] <= UInt8(ascii: "9") {
                if index - start < 3 { millis = millis * 10 + Int(b[index] - UInt8(ascii: "0")) }
                index += 1
            }
            guard index > start else { return nil }
            for _ in 0..<max(0, 3 - (index - start)) { millis *= 10 }
        }
        guard index < b.count else { return nil }
        var offsetMinutes = 0
        switch b[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == b.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == b.count, b[index + 3] == UInt8(ascii: ":"),
                  let hours = number(index + 1..<index + 3), let minutes = number(index + 4..<index + 6),
                  hours < 24, minutes < 60 else { return nil }
            offsetMinutes = (hours * 60 + minutes) * (b[index] == UInt8(ascii: "-") ? -1 : 1)
        default: return nil
        }
        let days = Int64(Day.daysSinceEpoch(year: year, month: month, day: day))
        let seconds = days * 86400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetMinutes * 60)
        self.init(millisecondsSinceEpoch: seconds * 1000 + Int64(millis))
        let utcYear = Timestamp.civil(fromDays: Int(seconds.dividedRoundingDown(by: 86400))).0
        guard (Day.minimum.year...Day.maximum.year).contains(utcYear) else { return nil }
    }

    /// Howard Hinnant's civil_from_days.
    static func civil(fromDays days: Int) -> (Int, Int, Int) {
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Converts MariaDB's `YYYY-MM-DD HH:MM:SS[.fff]` text to RFC 3339 with milliseconds,
    /// without parsing it into numbers (the hot path of every record read).
    public static func rfc3339(fromDatabaseText text: String) -> String {
        var text = text
        return text.withUTF8 { source in
            guard source.count >= 19 else { return String(decoding: source, as: UTF8.self) }
            // `YYYY-MM-DDTHH:MM:SS.mmmZ`: 24 bytes, built in place in one allocation.
            return String(unsafeUninitializedCapacity: 24) { output in
                for index in 0..<19 { output[index] = source[index] }
                output[10] = UInt8(ascii: "T")
                output[19] = UInt8(ascii: ".")
                for index in 20..<23 { output[index] = index < source.count ? source[index] : UInt8(ascii: "0") }
                output[23] = UInt8(ascii: "Z")
                return 24
            }
        }
    }

    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        lhs.millisecondsSinceEpoch < rhs.millisecondsSinceEpoch
    }
}

extension Int64 {
    /// The quotient rounded towards negative infinity.
    fileprivate func dividedRoundingDown(by divisor: Int64) -> Int64 {
        let quotient = self / divisor
        return (self % divisor != 0 && (self < 0) != (divisor < 0)) ? quotient - 1 : quotient
    }
}
