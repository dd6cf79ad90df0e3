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
    /// The window this cursor belongs to (API.md "Windows (partial sync)"); nil for a whole pull.
    public let window: SyncWindow?
    /// Within a window's first pull: how far its date-ordered read of what was live at its start
    /// (`skipTombstonesThrough`) has come; nil once that read is done (then the pull goes on by
    /// version from `position`, as any cursor).
    public let scan: WindowScan?

    static let formatVersion = 2
    static let firstFormatVersion = 1
    /// A window cursor: the second format plus the window and the scan position.
    static let windowFormatVersion = 3

    public init(position: Int64, skipTombstonesThrough: Int64, userID: Int64, epoch: UInt64,
                window: SyncWindow? = nil, scan: WindowScan? = nil) {
        self.position = position
        self.skipTombstonesThrough = skipTombstonesThrough
        self.userID = userID
        self.epoch = epoch
        self.window = window
        self.scan = window == nil ? nil : scan
    }

    /// The opaque text handed to clients.
    public var encoded: String {
        var payload = "\(SyncCursor.formatVersion):\(userID):\(position):\(skipTombstonesThrough):\(String(epoch, radix: 16))"
        if let window {
            payload = "\(SyncCursor.windowFormatVersion):\(userID):\(position):\(skipTombstonesThrough):"
                + "\(String(epoch, radix: 16)):\(window.from?.description ?? ""):\(window.to?.description ?? ""):"
                + (scan.map { "\($0.day?.description ?? "tags"):\($0.version)" } ?? ":")
        }
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
        var window: SyncWindow?
        var scan: WindowScan?
        switch (parts.count, parts.first) {
        case (6, "\(SyncCursor.formatVersion)"):
            guard let value = UInt64(parts[4], radix: 16), parts[4].count <= 16 else { return nil }
            epoch = value
        case (10, "\(SyncCursor.windowFormatVersion)"):
            guard let value = UInt64(parts[4], radix: 16), parts[4].count <= 16 else { return nil }
            epoch = value
            func day(_ text: String) -> Day?? { text.isEmpty ? .some(nil) : Day(text).map { .some($0) } }
            guard let from = day(parts[5]), let to = day(parts[6]) else { return nil }
            // A window has at least one side (neither is a whole pull).
            guard from != nil || to != nil, let parsed = SyncWindow(from: from, to: to) else { return nil }
            window = parsed
            switch (parts[7], Int64(parts[8])) {
            case ("", nil) where parts[8].isEmpty: scan = nil
            case ("tags", let version?) where version >= 0: scan = WindowScan(day: nil, version: version)
            case (let text, let version?) where version >= 0:
                guard let scanDay = Day(text) else { return nil }
                scan = WindowScan(day: scanDay, version: version)
            default: return nil
            }
        case (5, "\(SyncCursor.firstFormatVersion)"):
            epoch = 0
        default:
            return nil
        }
        guard let owner = Int64(parts[1]), let position = Int64(parts[2]), let skip = Int64(parts[3]),
              position >= 0, skip >= 0, owner == userID,
              String(SyncCursor.checksum(parts.dropLast().joined(separator: ":")), radix: 16) == parts.last!
        else { return nil }
        self.init(position: position, skipTombstonesThrough: skip, userID: userID, epoch: epoch, window: window,
                  scan: scan)
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

/// A pull's window of dates (API.md "Windows (partial sync)"): the todos whose deadline, and the
/// daily stats whose date, lie between `from` and `to` (both inclusive; nil: that side open).
public struct SyncWindow: Sendable, Equatable {
    public let from: Day?
    public let to: Day?

    /// nil when `from` is after `to`.
    public init?(from: Day?, to: Day?) {
        if let from, let to, from > to { return nil }
        self.from = from
        self.to = to
    }

    /// The window's bounds with open sides closed at the contract's first and last dates.
    public var lowerBound: Day { from ?? .minimum }
    public var upperBound: Day { to ?? .maximum }

    public func contains(_ day: Day) -> Bool { lowerBound <= day && day <= upperBound }
}

/// Where a window's first pull stands in its read of the records live at its start, in the order
/// that read goes: tags (`day` nil) first, then by date, each by version.
public struct WindowScan: Sendable, Equatable {
    /// nil: still among the tags.
    public let day: Day?
    /// The last version read at `day` (0: none yet).
    public let version: Int64

    public init(day: Day?, version: Int64) {
        self.day = day
        self.version = version
    }

    /// Before everything.
    public static let start = WindowScan(day: nil, version: 0)
}
