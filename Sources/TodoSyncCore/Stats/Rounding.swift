/// Exact rational rounding for the daily-stat formulas: `numerator / denominator` rounded to the
/// nearest integer, halves away from zero. Integer arithmetic only, so 0.125 never becomes 0.12.
public func roundedQuotient(_ numerator: Int64, _ denominator: Int64) -> Int64 {
    precondition(denominator > 0)
    let magnitude = numerator.magnitude
    let denominatorMagnitude = denominator.magnitude
    var quotient = magnitude / denominatorMagnitude
    if (magnitude % denominatorMagnitude) * 2 >= denominatorMagnitude { quotient += 1 }
    return numerator < 0 ? -Int64(quotient) : Int64(quotient)
}
