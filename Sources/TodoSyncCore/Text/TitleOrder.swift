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
                key.append(lowercaseASCII(UInt8(scalar.value)))
            } else {
                UTF8.encode(simpleLowercase(scalar)) { key.append($0) }
            }
        }
        return key
    }

    /// The same key for a title given as UTF-8 bytes (a SQLite function's argument): an ASCII
    /// title, the common case, without making a String of it.
    public static func key(utf8 bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        guard bytes.allSatisfy({ $0 < 0x80 }) else { return key(String(decoding: bytes, as: UTF8.self)) }
        return bytes.map(lowercaseASCII)
    }

    /// A-Z to a-z; every other byte as it is.
    @inline(__always)
    public static func lowercaseASCII(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
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
