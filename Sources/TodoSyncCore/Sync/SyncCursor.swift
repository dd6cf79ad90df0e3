/// A pull cursor: a position in one user's change sequence, in one history of the database.
/// Opaque to clients: versioned, base64url-encoded and checksummed, so a truncated or edited
/// cursor is a 400, not a silent jump to another position. It names its user, so another
/// account's cursor is rejected too.
///
/// `epoch` names the database history the position belongs to. It is created at install and
/// renewed by every restore from backup (`todosync new-epoch`), because a restore rewinds the
/// change sequences: positions handed out before the restore would then name other changes.
/// A cursor of another epoch is 410 `cursor_expired`, never a silent skip.
public struct SyncCursor: Sendable, Equatable {
    /// Every change with a version above this has not been delivered yet.
    public let position: Int64
    /// During a first pull (no cursor), tombstones up to this version are left out: they delete
    /// records the client never received. Later deletions are delivered.
    public let skipTombstonesThrough: Int64
    public let userID: Int64
    /// The database history this cursor came from. 0 for a cursor of the first format (before
    /// epochs existed): no database has epoch 0, so such a cursor is always expired.
    public let epoch: UInt64

    static let formatVersion = 2
    static let firstFormatVersion = 1

    public init(position: Int64, skipTombstonesThrough: Int64, userID: Int64, epoch: UInt64) {
        self.position = position
        self.skipTombstonesThrough = skipTombstonesThrough
        self.userID = userID
        self.epoch = epoch
    }

    /// The opaque text handed to clients.
    public var encoded: String {
        let payload = "\(SyncCursor.formatVersion):\(userID):\(position):\(skipTombstonesThrough):\(String(epoch, radix: 16))"
        let checksum = String(SyncCursor.checksum(payload), radix: 16)
        return Base64URL.encode(Array("\(payload):\(checksum)".utf8))
    }

    /// Decodes a cursor of `userID`; nil when malformed, tampered with, or another user's. A
    /// well-formed cursor of the first format decodes with epoch 0.
    public init?(encoded text: String, userID: Int64) {
        guard text.utf8.count <= 200, let bytes = Base64URL.decode(text),
              let decoded = String(validating: bytes, as: UTF8.self) else { return nil }
        // Split as bytes: a split by Characters (grapheme breaking) was 3 % of a pull page's instructions.
        let parts = decoded.utf8.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            .map { String(decoding: $0, as: UTF8.self) }
        let epoch: UInt64
        switch (parts.count, parts.first) {
        case (6, "\(SyncCursor.formatVersion)"):
            guard let value = UInt64(parts[4], radix: 16), parts[4].count <= 16 else { return nil }
            epoch = value
        case (5, "\(SyncCursor.firstFormatVersion)"):
            epoch = 0
        default:
            return nil
        }
        guard let owner = Int64(parts[1]), let position = Int64(parts[2]), let skip = Int64(parts[3]),
              position >= 0, skip >= 0, owner == userID,
              String(SyncCursor.checksum(parts.dropLast().joined(separator: ":")), radix: 16) == parts.last!
        else { return nil }
        self.init(position: position, skipTombstonesThrough: skip, userID: userID, epoch: epoch)
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
