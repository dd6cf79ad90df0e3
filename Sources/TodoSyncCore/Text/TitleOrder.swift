/// The contract's "title A→Z": titles compared after *simple* lowercasing, by Unicode code point,
/// with no locale and no collation, so a device's local store can list exactly like the server.
public enum TitleOrder {
    /// The sort key of `title`: its simple-lowercased UTF-8 bytes. UTF-8 preserves code point
    /// order, so comparing keys bytewise (a VARBINARY column, `[UInt8].lexicographicallyPrecedes`)
    /// is comparing the lowercased titles by code point.
    public static func key(_ title: String) -> [UInt8] {
        var key: [UInt8] = []
        key.reserveCapacity(title.utf8.count)
        for scalar in title.unicodeScalars {
            if scalar.isASCII {
                let byte = UInt8(scalar.value)
                key.append(byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte)
            } else {
                UTF8.encode(simpleLowercase(scalar)) { key.append($0) }
            }
        }
        return key
    }

    /// The simple lowercase mapping (UnicodeData.txt field 13): one scalar for one scalar. Swift's
    /// `lowercaseMapping` is the *full* mapping, which differs only where SpecialCasing.txt gives
    /// an unconditional lowercase of several scalars: U+0130 (İ → i + U+0307); its simple
    /// mapping is plain i.
    static func simpleLowercase(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        if scalar == "\u{130}" { return "i" }
        let mapped = scalar.properties.lowercaseMapping.unicodeScalars
        return mapped.count == 1 ? mapped.first! : scalar
    }
}
