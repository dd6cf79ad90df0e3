import CMariaDB

/// Formats `MYSQL_TIME` values as MariaDB prints them, without Foundation.
enum TemporalFormat {
    /// `YYYY-MM-DD`, `YYYY-MM-DD HH:MM:SS[.f…]` or `[-]HH:MM:SS[.f…]`, with exactly `decimals`
    /// fractional digits (1…6); for undeclared precision (decimals > 6) six digits when nonzero.
    static func string(_ time: MYSQL_TIME, fieldType: enum_field_types, decimals: UInt32) -> String {
        let fractionDigits: Int
        if decimals == 0 {
            fractionDigits = 0
        } else if decimals <= 6 {
            fractionDigits = Int(decimals)
        } else {
            fractionDigits = time.second_part == 0 ? 0 : 6
        }
        return String(unsafeUninitializedCapacity: 48) { buffer in
            var position = 0
            func put(_ byte: UInt8) {
                buffer[position] = byte
                position += 1
            }
            func number(_ value: UInt, width: Int) {
                var digits = 1
                var rest = value / 10
                while rest > 0 {
                    digits += 1
                    rest /= 10
                }
                let count = max(digits, width)
                var remaining = value
                var index = position + count - 1
                while index >= position {
                    buffer[index] = UInt8(ascii: "0") + UInt8(remaining % 10)
                    remaining /= 10
                    index -= 1
                }
                position += count
            }
            func clock() {
                number(UInt(time.hour), width: 2)
                put(UInt8(ascii: ":"))
                number(UInt(time.minute), width: 2)
                put(UInt8(ascii: ":"))
                number(UInt(time.second), width: 2)
                if fractionDigits > 0 {
                    put(UInt8(ascii: "."))
                    var value = UInt(time.second_part) % 1_000_000
                    for _ in fractionDigits..<6 { value /= 10 }
                    number(value, width: fractionDigits)
                }
            }
            func date() {
                number(UInt(time.year), width: 4)
                put(UInt8(ascii: "-"))
                number(UInt(time.month), width: 2)
                put(UInt8(ascii: "-"))
                number(UInt(time.day), width: 2)
            }
            switch fieldType {
            case MYSQL_TYPE_DATE, MYSQL_TYPE_NEWDATE:
                date()
            case MYSQL_TYPE_TIME:
                if time.neg != 0 { put(UInt8(ascii: "-")) }
                clock()
            default:
                date()
                put(UInt8(ascii: " "))
                clock()
            }
            return position
        }
    }
}
