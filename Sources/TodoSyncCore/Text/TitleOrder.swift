/// The contract's "title A→Z": titles compared after *simple* lowercasing (one scalar to one
/// scalar, no locale), by Unicode code point. The key's UTF-8 bytes compare (memcmp) in exactly
/// that order, so a database can sort on a binary column holding it — MariaDB on the server,
/// SQLite on a device — and both list a day's todos identically.
public enum TitleOrder {
    /// The sort key of `title`: its simple-lowercased UTF-8 bytes.
    public static func key(_ title: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(title.utf8.count)
        for scalar in title.unicodeScalars {
            bytes.append(contentsOf: String(simpleLowercase(scalar)).utf8)
        }
        return bytes
    }

    /// The simple lowercase mapping of one scalar (UnicodeData.txt's field 13). Swift exposes
    /// the full mapping; they differ only where the full one has several scalars, which among
    /// lowercase mappings is U+0130 (İ → i̇ in full, i in simple).
    public static func simpleLowercase(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        let mapping = scalar.properties.lowercaseMapping.unicodeScalars
        if mapping.count == 1, let only = mapping.first { return only }
        if scalar == "\u{130}" { return "i" }
        return scalar
    }

    /// Whether `a` sorts before `b` (ties are left to the caller, e.g. by id).
    public static func precedes(_ a: String, _ b: String) -> Bool {
        key(a).lexicographicallyPrecedes(key(b))
    }
}
