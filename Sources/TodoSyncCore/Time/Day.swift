/// A calendar date (`YYYY-MM-DD`) within the contract's range, 2000-01-01 to 2999-12-31.
public struct Day: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let year: Int
    public let month: Int
    public let day: Int

    /// The earliest and latest dates the contract accepts.
    public static let minimum = Day(uncheckedYear: 2000, month: 1, day: 1)
    public static let maximum = Day(uncheckedYear: 2999, month: 12, day: 31)

    private init(uncheckedYear year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    /// A real calendar date in range, or nil.
    public init?(year: Int, month: Int, day: Int) {
        guard (2000...2999).contains(year), (1...12).contains(month),
              (1...Day.daysIn(month: month, year: year)).contains(day) else { return nil }
        self.init(uncheckedYear: year, month: month, day: day)
    }

    /// Parses exactly `YYYY-MM-DD`; nil for anything else (including `2026-02-30` and `1999-12-31`).
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"),
              let year = Day.digits(bytes[0..<4]), let month = Day.digits(bytes[5..<7]),
              let day = Day.digits(bytes[8..<10]) else { return nil }
        self.init(year: year, month: month, day: day)
    }

    static func digits(_ bytes: ArraySlice<UInt8>) -> Int? {
        var value = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return value
    }

    static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    /// The number of days in `month` of `year`.
    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 (proleptic Gregorian), for date arithmetic.
    public var daysSinceEpoch: Int { Day.daysSinceEpoch(year: year, month: month, day: day) }

    /// Days since 1970-01-01 of any proleptic Gregorian date (Howard Hinnant's days_from_civil).
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = y / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    public var description: String {
        pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
    }

    public static func < (lhs: Day, rhs: Day) -> Bool {
        (lhs.year, lhs.month, lhs.day) < (rhs.year, rhs.month, rhs.day)
    }
}

/// Zero-pads a non-negative number to `width` digits.
@inline(__always)
func pad(_ value: Int, _ width: Int) -> String {
    let text = String(value)
    return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
}
