/// A pull cursor: a position in one user's change sequence. Opaque to clients: versioned,
/// base64url-encoded and checksummed, so a truncated or edited cursor is a 400, not a silent
/// jump to another position. It names its user, so another account's cursor is rejected too.
public struct SyncCursor: Sendable, Equatable {
    /// Every change with a version above this has not been delivered yet.
    public let position: Int64
    /// During a first pull (no cursor), tombstones up to this version are left out: they delete
    /// records the client never received. Later deletions are delivered.
    public let skipTombstonesThrough: Int64
    public let userID: Int64

    static let formatVersion = 1

    public init(position: Int64, skipTombstonesThrough: Int64, userID: Int64) {
        self.position = position
        self.skipTombstonesThrough = skipTombstonesThrough
        self.userID = userID
    }

    /// The opaque text handed to clients.
    public var encoded: String {
        let payload = "\(SyncCursor.formatVersion):\(userID):\(position):\(skipTombstonesThrough)"
        let checksum = String(SyncCursor.checksum(payload), radix: 16)
        return base64URLEncode(Array("\(payload):\(checksum)".utf8))
    }

    /// Decodes a cursor of `userID`; nil when malformed, tampered with, or another user's.
    public init?(encoded text: String, userID: Int64) {
        guard text.utf8.count <= 200, let bytes = base64URLDecode(text),
              let decoded = String(validating: bytes, as: UTF8.self) else { return nil }
        let parts = decoded.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 5, parts[0] == "\(SyncCursor.formatVersion)",
              let owner = Int64(parts[1]), let position = Int64(parts[2]), let skip = Int64(parts[3]),
              position >= 0, skip >= 0, owner == userID,
              String(SyncCursor.checksum(parts[0...3].joined(separator: ":")), radix: 16) == parts[4]
        else { return nil }
        self.init(position: position, skipTombstonesThrough: skip, userID: userID)
    }

    /// FNV-1a, 64 bit: detects corruption and casual edits (integrity, not secrecy: a cursor only
    /// ever reads its own user's data, so forging one gains nothing).
    static func checksum(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in "todosync-cursor|\(text)".utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        return hash
    }
}

private let base64URLAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

/// Unpadded base64url.
func base64URLEncode(_ bytes: [UInt8]) -> String {
    var output: [UInt8] = []
    var index = 0
    while index < bytes.count {
        let chunk = bytes[index..<min(index + 3, bytes.count)]
        var value: UInt32 = 0
        for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
        for sextet in 0..<(chunk.count + 1) { output.append(base64URLAlphabet[Int(value >> (18 - 6 * sextet) & 63)]) }
        index += 3
    }
    return String(decoding: output, as: UTF8.self)
}

/// Decodes unpadded base64url; nil on any other character or an impossible length.
func base64URLDecode(_ text: String) -> [UInt8]? {
    var values: [UInt8] = []
    for byte in text.utf8 {
        guard let index = base64URLAlphabet.firstIndex(of: byte) else { return nil }
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
