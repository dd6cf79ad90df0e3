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
        return Base64URL.encode(Array("\(payload):\(checksum)".utf8))
    }

    /// Decodes a cursor of `userID`; nil when malformed, tampered with, or another user's.
    public init?(encoded text: String, userID: Int64) {
        guard text.utf8.count <= 200, let bytes = Base64URL.decode(text),
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
