/// Unpadded base64url (RFC 4648 §5): bearer tokens and pull cursors.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes `bytes` without padding.
    public static func encode(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for sextet in 0..<(chunk.count + 1) { output.append(alphabet[Int(value >> (18 - 6 * sextet) & 63)]) }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Standard base64 with padding (RFC 4648 §4), as HTTP's structured byte sequences carry it
    /// (`Repr-Digest`).
    public static func encodeStandard(_ bytes: [UInt8]) -> String {
        let url = encode(bytes).map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 }
        return String(url) + String(repeating: "=", count: (4 - url.count % 4) % 4)
    }

    /// Decodes unpadded base64url; nil on any other character or an impossible length.
    public static func decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        for byte in text.utf8 {
            guard let index = alphabet.firstIndex(of: byte) else { return nil }
            values.append(UInt8(index))
        }
        guard values.count % 4 != 1 else { return nil }
        var output: [UInt8] = []
        var index = 0
        while index < values.count {
            let chunk = values[index..<min(index + 4, values.count)]
            var value: UInt32 = 0
            for (offset, sextet) in chunk.enumerated() { value |= UInt32(sextet) << (18 - 6 * offset) }
            for octet in 0..<(chunk.count - 1) { output.append(UInt8(value >> (16 - 8 * octet) & 0xFF)) }
            index += 4
        }
        return output
    }
}
