import MariaDB
import TodoSyncCore

/// One page of changes: the records' JSON as the change feed holds it, sorted into the contract's
/// six arrays (each kind's `upserted` and `deleted`), ready to be spliced into the response. An
/// older schema version's live records lose their newer fields as they are copied in
/// (`JSONMemberFilter.appendFlatObject`: the search stops at the last such field, the rest of the
/// record is copied unscanned).
public struct PullPage: Sendable {
    /// The contents (without brackets) of the arrays, indexed by `slot(kind, list)`.
    private var arrays: [[UInt8]] = Array(repeating: [], count: 9)
    /// A window pull's page: each kind has a third list, `left`.
    public let isWindow: Bool
    public var cursor: SyncCursor
    public var hasMore: Bool
    /// Records and tombstones in the page.
    public private(set) var recordCount = 0
    /// The schema version the page's records have (and the page names).
    public let schemaVersion: Int
    /// The fields each kind's records have in the feed (the current version) but not at
    /// `schemaVersion`, as `JSONMemberFilter.memberPattern`s, by `FeedKind` position.
    private let hiddenMembers: [[[UInt8]]]
    /// The records the page may hold (parent tags aside): sizes the arrays.
    private let limit: Int

    init(cursor: SyncCursor, hasMore: Bool, schemaVersion: Int, limit: Int) {
        self.cursor = cursor
        isWindow = cursor.window != nil
        self.hasMore = hasMore
        self.schemaVersion = schemaVersion
        self.limit = limit
        hiddenMembers = FeedKind.allCases.map { kind in
            let names = switch kind {
            case .tag: SchemaVersion.fieldsNewerThan(schemaVersion, todo: false)
            case .todo: SchemaVersion.fieldsNewerThan(schemaVersion, todo: true)
            case .dailyStat: [String]()
            }
            return names.map(JSONMemberFilter.memberPattern)
        }
    }

    private static func slot(_ kind: FeedKind, deleted: Bool) -> Int {
        Int(kind.rawValue - 1) * 3 + (deleted ? 1 : 0)
    }

    private static func leftSlot(_ kind: FeedKind) -> Int { Int(kind.rawValue - 1) * 3 + 2 }

    /// Appends an entry of a window page's `left`: `{"id", "clientId", "version"}`, `clientID`
    /// being the JSON string of the record's clientId (nil: `null`). In version order, as `append`.
    mutating func appendLeft(_ kind: FeedKind, id: Int64, clientID: UnsafeRawBufferPointer?, version: Int64) {
        let index = PullPage.leftSlot(kind)
        recordCount += 1
        if !arrays[index].isEmpty { arrays[index].append(UInt8(ascii: ",")) }
        arrays[index].append(contentsOf: #"{"id":"#.utf8)
        PullPage.appendDecimal(id, to: &arrays[index])
        arrays[index].append(contentsOf: #","clientId":"#.utf8)
        if let clientID { arrays[index].append(contentsOf: clientID) } else { arrays[index].append(contentsOf: "null".utf8) }
        arrays[index].append(contentsOf: #","version":"#.utf8)
        PullPage.appendDecimal(version, to: &arrays[index])
        arrays[index].append(UInt8(ascii: "}"))
    }

    /// A non-negative integer's digits, without making a String.
    private static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // room for 20 digits, written from the end
        withUnsafeMutableBytes(of: &digits) { buffer in
            var rest = UInt64(max(value, 0)), end = buffer.count
            repeat {
                end -= 1
                buffer[end] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[end...]))
        }
    }

    /// Appends a record (or tombstone) encoded as JSON at the current schema version, without
    /// the fields the page's version does not have. Within an array, records must come in
    /// version order.
    mutating func append(_ kind: FeedKind, deleted: Bool, _ json: UnsafeRawBufferPointer) {
        let index = PullPage.slot(kind, deleted: deleted)
        recordCount += 1
        if arrays[index].isEmpty {
            // Room for the rest of the page at this record's size and a quarter more, up to 1 MiB
            // (malloc's mmap threshold): an array that grows copies everything it holds
            // (measured: the growth of a page's arrays copied twice its bytes).
            arrays[index].reserveCapacity(min((json.count + 1) * max(limit - recordCount + 1, 1) * 5 / 4, 1 << 20))
        } else {
            arrays[index].append(UInt8(ascii: ","))
        }
        let hidden = deleted ? [] : hiddenMembers[Int(kind.rawValue - 1)]
        if hidden.isEmpty {
            arrays[index].append(contentsOf: json)
        } else {
            JSONMemberFilter.appendFlatObject(json, removing: hidden, to: &arrays[index])
        }
    }

    /// The contract's pull response body.
    public var jsonBody: [UInt8] {
        var tail = JSONWriter(reservingCapacity: 120)
        tail.beginObject()
        tail.field("cursor", cursor.encoded)
        tail.field("hasMore", hasMore)
        tail.field("schemaVersion", schemaVersion)
        tail.endObject()
        // Exactly sized (the keys and brackets take 128 bytes): had the tail not fitted, the last
        // append would have copied the whole page once more.
        var bytes: [UInt8] = []
        bytes.reserveCapacity(arrays.reduce(tail.bytes.count + 128 + (isWindow ? 30 : 0)) { $0 + $1.count })
        bytes.append(contentsOf: #"{"changes":{"#.utf8)
        for kind in FeedKind.allCases {
            if kind != .tag { bytes.append(UInt8(ascii: ",")) }
            bytes.append(contentsOf: PullPage.keys[Int(kind.rawValue - 1)].utf8)
            bytes.append(contentsOf: #":{"upserted":["#.utf8)
            bytes.append(contentsOf: arrays[PullPage.slot(kind, deleted: false)])
            bytes.append(contentsOf: #"],"deleted":["#.utf8)
            bytes.append(contentsOf: arrays[PullPage.slot(kind, deleted: true)])
            if isWindow {
                bytes.append(contentsOf: #"],"left":["#.utf8)
                bytes.append(contentsOf: arrays[PullPage.leftSlot(kind)])
            }
            bytes.append(contentsOf: "]}".utf8)
        }
        bytes.append(contentsOf: "},".utf8)
        bytes.append(contentsOf: tail.bytes.dropFirst())  // `"cursor":…}` closes the body
        return bytes
    }

    private static let keys = [#""tags""#, #""todos""#, #""dailyStats""#]
}

extension Store {
    /// One page of the user's changes after `cursor` (nil: a first pull of live records), in a
    /// single consistent snapshot. Versions are handed out in commit order under the user's lock,
    /// so everything at or below a page's last version is already committed and visible: paging
    /// by version never skips a change that commits meanwhile.
    ///
    /// The page is one range read of the change feed (`sync_feed`, clustered by user and version)
    /// whose rendered records are copied as they are, plus the parent tags it needs (looked up
    /// only when a tag changed after the page's start).
    ///
    /// With `deviceID`, tags and todos whose latest change was an operation pushed by that device
    /// are left out (the device holds them from its push results). They still count toward
    /// `limit`, so paging and `hasMore` are the same with or without it.
    ///
    /// The feed holds records at the current schema version; a client of an older one
    /// (`schemaVersion`) gets them without the fields its version lacks.
    ///
    /// `window`: a window pull (`windowPage`); a cursor's window must be the same (the caller
    /// checks: a mismatch is the client's error).
    public func pull(userID: Int64, cursor: SyncCursor?, window: SyncWindow? = nil, limit: Int,
                     deviceID: String? = nil, schemaVersion: Int = SchemaVersion.current) throws -> PullPage {
        precondition(cursor == nil || cursor?.window == window, "a cursor continues its own window only")
        let page = try guarded {
            try db.inTransaction(readOnly: true) {
                // The first read fixes the snapshot that every query below sees.
                guard let state = try db.queryOne(SQL.Pull.syncState, [.text(deviceID ?? ""), .int(userID)]) else {
                    throw DomainError.unauthenticated
                }
                // The user's feed is still being back-filled by `todosync migrate`.
                typealias S = SQL.Pull.SyncStateColumn
                if state.bool(S.backfilling) == true { throw DomainError.unavailable }
                let snapshotVersion = state.int64(S.changeSequence)!
                // Device numbers start at 1, so 0 matches no record's device.
                let device = deviceID == nil ? 0 : state.int64(S.device) ?? 0
                let epoch = UInt64(bitPattern: state.int64(S.epoch)!)
                if let cursor {
                    // Another history of the database (a restore, another installation, or a
                    // cursor from before epochs), or a position this history never reached (a
                    // restore not followed by `todosync new-epoch`): the changes it stands for are
                    // not the ones here. Never a silent skip.
                    guard cursor.epoch == epoch, cursor.position <= snapshotVersion,
                          cursor.skipTombstonesThrough <= snapshotVersion else {
                        throw DomainError.cursorFromAnotherHistory
                    }
                    // Expired if a purged tombstone is one this client is still owed: tombstones
                    // up to `skipTombstonesThrough` are never sent on this cursor anyway.
                    if max(cursor.position, cursor.skipTombstonesThrough) < state.int64(S.purgedThrough)! {
                        throw DomainError.cursorExpired
                    }
                }
                if let window {
                    return try windowPage(userID: userID, window: window, cursor: cursor,
                                          snapshotVersion: snapshotVersion, epoch: epoch, device: device,
                                          tagSequence: state.int64(S.tagSequence)!, limit: limit, schemaVersion: schemaVersion)
                }
                let position = cursor?.position ?? 0
                let skipThrough = cursor?.skipTombstonesThrough ?? snapshotVersion

                var page = PullPage(
                    cursor: SyncCursor(position: position, skipTombstonesThrough: skipThrough, userID: userID,
                                       epoch: epoch),
                    hasMore: false, schemaVersion: schemaVersion, limit: limit)
                var rows = 0
                var lastVersion = position
                var parents = ParentTags()
                try db.forEachRow(SQL.Feed.page, [.int(userID), .int(position), .int(skipThrough), .int(Int64(limit + 1))]) {
                    row throws(DatabaseError) in
                    rows += 1
                    guard rows <= limit else { return page.hasMore = true }
                    typealias C = SQL.Feed.PageColumn
                    lastVersion = try row.int64(C.version)!
                    let kind = FeedKind(rawValue: try row.int64(C.kind)!)!
                    let deleted = !row.isNull(C.deletedAt)
                    if kind == .tag { parents.held(try row.int64(C.recordID)!) }
                    // Left out: the pulling device made this version itself.
                    if device != 0, try row.int64(C.device) == device { return }
                    _ = try row.withBytes(C.body) { page.append(kind, deleted: deleted, $0) }
                    if !deleted { _ = try row.withBytes(C.parentTags) { parents.referenced($0) } }
                }
                // At the end, jump to the snapshot: what lies between is only skipped tombstones.
                page.cursor = SyncCursor(
                    position: page.hasMore ? lastVersion : max(lastVersion, snapshotVersion),
                    skipTombstonesThrough: skipThrough, userID: userID, epoch: epoch)
                // No tag of the user has a version above the page's start (`users.tag_seq`, read
                // in the same snapshot): the lookup could find nothing.
                if state.int64(S.tagSequence)! > position {
                    try addParentTags(parents.missing, to: &page, after: position, userID: userID, device: device)
                }
                return page
            }
        }
        SyncMetrics.pulled(records: page.recordCount)
        return page
    }

    /// Makes the page referentially complete: a live tag that a todo or stat in the page refers to,
    /// that changed after the page's start (so the client may not have it yet) and that the pulling
    /// device did not change itself, is sent with it. Tags at or below the start were sent earlier
    /// in this pull or were unchanged since it began. Such a tag's version lies beyond the page's
    /// (a live tag within the page's range is in the page), so it goes after the page's tags.
    /// Not called when the user's latest tag version is at or below the start (most pages after a
    /// pull's first: tags rarely change), which spares the page the lookup's ~45 key probes.
    func addParentTags(_ ids: [Int64], to page: inout PullPage, after position: Int64, userID: Int64,
                               device: Int64) throws {
        let batch = SQL.Pull.parentTagBatch
        var found: [(version: Int64, json: [UInt8])] = []
        for start in stride(from: 0, to: ids.count, by: batch) {
            let chunk = ids[start..<min(start + batch, ids.count)]
            let slots = (0..<batch).map { DatabaseValue.int(chunk[chunk.startIndex + min($0, chunk.count - 1)]) }
            for row in try db.query(SQL.Feed.parentTags, [.int(userID), .int(position), .int(device)] + slots) {
                found.append((row.int64(SQL.Feed.ParentTagColumn.version)!, row.bytes(SQL.Feed.ParentTagColumn.body)!))
            }
        }
        found.sort { $0.version < $1.version }
        for tag in found { tag.json.withUnsafeBytes { page.append(.tag, deleted: false, $0) } }
    }
}

/// The tags a page refers to and the tags it holds, in order of first reference.
struct ParentTags {
    private var seen = IDSet()
    private(set) var missing: [Int64] = []

    /// A tag in the page (sent, or held by the pulling device).
    mutating func held(_ id: Int64) {
        if !seen.insert(id) { missing.removeAll { $0 == id } }
    }

    /// The comma-separated tag ids of a feed row's `parent_tags`.
    mutating func referenced(_ list: UnsafeRawBufferPointer) {
        var value: Int64 = 0
        var digits = 0
        for byte in list {
            if byte == UInt8(ascii: ",") {
                if digits > 0 { add(value) }
                value = 0
                digits = 0
            } else {
                value = value * 10 + Int64(byte &- UInt8(ascii: "0"))
                digits += 1
            }
        }
        if digits > 0 { add(value) }
    }

    private mutating func add(_ id: Int64) {
        if seen.insert(id) { missing.append(id) }
    }
}

/// A set of record ids (positive) for ParentTags, which asks it once per tag reference of every
/// row: open addressing with a multiplicative hash, where `Set<Int64>`'s seeded SipHash was 5 % of
/// a page's instructions.
struct IDSet {
    private var slots = [Int64](repeating: 0, count: 64)  // 0: empty
    private var count = 0
    private var shift = 64 - 6

    /// Inserts `id`; false when it was there already.
    mutating func insert(_ id: Int64) -> Bool {
        let mask = slots.count - 1
        var index = Int(truncatingIfNeeded: (UInt64(bitPattern: id) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
        while slots[index] != 0 {
            if slots[index] == id { return false }
            index = (index + 1) & mask
        }
        slots[index] = id
        count += 1
        if count * 2 > slots.count { grow() }
        return true
    }

    private mutating func grow() {
        let old = slots
        slots = [Int64](repeating: 0, count: old.count * 2)
        count = 0
        shift -= 1
        for id in old where id != 0 { _ = insert(id) }
    }
}

extension SQL {
    /// Pull reads the change feed (`Feed`); this is its per-user state.
    enum Pull {
        /// The user's sync state, the number of the pulling device (NULL: none, or a device that
        /// never pushed), the database's epoch, whether the user's feed still waits for its
        /// back-fill, and the user's latest tag version (a page starting at or above it needs no
        /// parent-tag lookup, Sql/024). Parameters: device key ('' without a deviceId), user id.
        static let syncState = """
            SELECT u.change_seq, u.purged_through, d.id, e.epoch, q.user_id IS NOT NULL, u.tag_seq
              FROM users u JOIN sync_epoch e ON e.id = 1
              LEFT JOIN sync_devices d ON d.user_id = u.id AND d.device_key = ?
              LEFT JOIN sync_feed_backfill q ON q.user_id = u.id
             WHERE u.id = ?
            """
        enum SyncStateColumn: Int, ResultColumns {
            case changeSequence, purgedThrough, device, epoch, backfilling, tagSequence
        }

        /// Parent tags are looked up 64 ids per query, so that a page referring to a typical
        /// user's tags (tens) costs one round trip.
        static let parentTagBatch = 64
    }
}
