import MariaDB
import TodoSyncCore

/// One page of changes: the contract's pull response body, assembled around the six arrays
/// (each kind's `upserted` and `deleted`) that MariaDB concatenates from the change feed's
/// rendered records (`SQL.Feed.page`). Each array's bytes are copied once, from Connector/C's
/// row into the body.
public struct PullPage: Sendable {
    /// The contract's pull response body.
    public private(set) var jsonBody: [UInt8]
    public let cursor: SyncCursor
    public let hasMore: Bool
    /// Records and tombstones in the page.
    public private(set) var recordCount: Int
    /// The schema version the page's records have (and the page names).
    public let schemaVersion: Int
    /// Where the tags' `upserted` array ends in `jsonBody` (parent tags go there), and whether
    /// it holds a record.
    private var tagsEnd: Int
    private var tagsEmpty: Bool

    /// The page whose six arrays are columns `first ..< first + 6` of `row` (by
    /// `slot(kind, deleted)`, NULL for an empty one), holding records at the current schema
    /// version: a live record loses the fields `schemaVersion` does not have.
    init(row: RowCursor, arraysAt first: Int, recordCount: Int, cursor: SyncCursor, hasMore: Bool,
         schemaVersion: Int) throws(DatabaseError) {
        self.cursor = cursor
        self.hasMore = hasMore
        self.recordCount = recordCount
        self.schemaVersion = schemaVersion
        var tail = JSONWriter(reservingCapacity: 120)
        tail.beginObject()
        tail.field("cursor", cursor.encoded)
        tail.field("hasMore", hasMore)
        tail.field("schemaVersion", schemaVersion)
        tail.endObject()
        let close = Array("]}},".utf8) + tail.bytes.dropFirst()  // `"cursor":…}` closes the body
        var lengths = Array(repeating: 0, count: 6)
        for slot in 0..<6 { lengths[slot] = row.byteCount(first + slot) ?? 0 }
        let capacity = PullPage.openers.reduce(close.count) { $0 + $1.count } + lengths.reduce(0, +)
        var failure: DatabaseError?
        var tagsEnd = 0
        jsonBody = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, initialized in
            var offset = 0
            func put(_ bytes: [UInt8]) {
                _ = UnsafeMutableBufferPointer(rebasing: buffer[offset...]).initialize(from: bytes)
                offset += bytes.count
            }
            for slot in 0..<6 {
                put(PullPage.openers[slot])
                if lengths[slot] > 0 {
                    let array = UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[offset..<(offset + lengths[slot])])
                    do throws(DatabaseError) {
                        try row.copyBytes(first + slot, to: array.baseAddress!)
                    } catch {
                        failure = error
                        return initialized = 0
                    }
                    // An older version's records lose their newer fields where they lie.
                    let hidden = PullPage.hiddenKeys(slot: slot, schemaVersion: schemaVersion)
                    offset += hidden.isEmpty ? array.count : JSONMemberFilter.removeFromFlatObjects(array, keys: hidden)
                }
                if slot == 0 { tagsEnd = offset }
            }
            put(close)
            initialized = offset
        }
        if let failure { throw failure }
        self.tagsEnd = tagsEnd
        tagsEmpty = lengths[0] == 0
    }

    /// Appends live tags (JSON at the current schema version, in version order, each beyond the
    /// page's own) to the tags' `upserted` array.
    mutating func appendTags(_ tags: [[UInt8]]) {
        guard !tags.isEmpty else { return }
        let hidden = PullPage.hiddenKeys(slot: 0, schemaVersion: schemaVersion)
        var bytes: [UInt8] = []
        for tag in tags {
            if !(tagsEmpty && bytes.isEmpty) { bytes.append(UInt8(ascii: ",")) }
            tag.withUnsafeBytes { JSONMemberFilter.append($0, removing: hidden, to: &bytes) }
        }
        jsonBody.insert(contentsOf: bytes, at: tagsEnd)
        tagsEnd += bytes.count
        tagsEmpty = false
        recordCount += tags.count
    }

    /// The index of a kind's array of live records (`deleted` false) or tombstones.
    static func slot(_ kind: FeedKind, deleted: Bool) -> Int {
        Int(kind.rawValue - 1) * 2 + (deleted ? 1 : 0)
    }

    /// What precedes each array in the body: `{"changes":{"tags":{"upserted":[`,
    /// `],"deleted":[`, `]},"todos":{"upserted":[`, …
    private static let openers: [[UInt8]] = FeedKind.allCases.flatMap { kind in
        let key = #"""# + keys[Int(kind.rawValue - 1)] + #"""#
        let upserted = (kind == .tag ? #"{"changes":{"# : #"]},"#) + key + #":{"upserted":["#
        return [Array(upserted.utf8), Array(#"],"deleted":["#.utf8)]
    }

    private static let keys = ["tags", "todos", "dailyStats"]

    /// The keys of the fields an array's live records have in the feed (the current version) but
    /// not at `schemaVersion`.
    private static func hiddenKeys(slot: Int, schemaVersion: Int) -> [[UInt8]] {
        let names = switch slot {
        case PullPage.slot(.tag, deleted: false): SchemaVersion.fieldsNewerThan(schemaVersion, todo: false)
        case PullPage.slot(.todo, deleted: false): SchemaVersion.fieldsNewerThan(schemaVersion, todo: true)
        default: [String]()
        }
        return names.map { Array($0.utf8) }
    }
}

extension Store {
    /// One page of the user's changes after `cursor` (nil: a first pull of live records), in a
    /// single consistent snapshot. Versions are handed out in commit order under the user's lock,
    /// so everything at or below a page's last version is already committed and visible: paging
    /// by version never skips a change that commits meanwhile.
    ///
    /// The page is one range read of the change feed (`sync_feed`, clustered by user and version)
    /// whose rendered records MariaDB concatenates into the page's six arrays (one row of a few
    /// values instead of a row per record), plus the parent tags it needs.
    ///
    /// With `deviceID`, tags and todos whose latest change was an operation pushed by that device
    /// are left out (the device holds them from its push results). They still count toward
    /// `limit`, so paging and `hasMore` are the same with or without it.
    ///
    /// The feed holds records at the current schema version; a client of an older one
    /// (`schemaVersion`) gets them without the fields its version lacks. A page's records take
    /// at most `pageBytes` (`SQL.Pull.pageBytes`; tests make it smaller), or one record.
    public func pull(userID: Int64, cursor: SyncCursor?, limit: Int, deviceID: String? = nil,
                     schemaVersion: Int = SchemaVersion.current) throws -> PullPage {
        try pull(userID: userID, cursor: cursor, limit: limit, deviceID: deviceID, schemaVersion: schemaVersion,
                 pageBytes: SQL.Pull.pageBytes)
    }

    func pull(userID: Int64, cursor: SyncCursor?, limit: Int, deviceID: String?, schemaVersion: Int,
              pageBytes: Int64) throws -> PullPage {
        let page = try guarded {
            try db.inTransaction {
                // The first read fixes the snapshot that every query below sees.
                guard let state = try db.queryOne(SQL.Pull.syncState, [.text(deviceID ?? ""), .int(userID)]) else {
                    throw DomainError.unauthenticated
                }
                // The user's feed is still being back-filled by `todosync migrate`.
                if state.bool(4) == true { throw DomainError.unavailable }
                let snapshotVersion = state.int64(0)!
                // Device numbers start at 1, so 0 matches no record's device.
                let device = deviceID == nil ? 0 : state.int64(2) ?? 0
                let epoch = UInt64(bitPattern: state.int64(3)!)
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
                    if max(cursor.position, cursor.skipTombstonesThrough) < state.int64(1)! {
                        throw DomainError.cursorExpired
                    }
                }
                let position = cursor?.position ?? 0
                let skipThrough = cursor?.skipTombstonesThrough ?? snapshotVersion

                var page: PullPage?
                var parents: [Int64] = []
                let parameters: [DatabaseValue] = [
                    .int(Int64(limit)), .int(pageBytes), .int(device), .int(userID), .int(position),
                    .int(skipThrough), .int(Int64(limit + 1)),
                ]
                try db.forEachRow(SQL.Feed.page, parameters) { row throws(DatabaseError) in
                    let hasMore = try row.bool(1) ?? false
                    let lastVersion = try row.int64(2) ?? position
                    let sent = try row.int64(3) ?? 0
                    // Every sent record whole in its array: no value was cut at group_concat_max_len.
                    let arrays = (0..<6).compactMap { row.byteCount(SQL.Feed.pageArrays + $0) }
                    guard arrays.reduce(0, +) == Int((try row.int64(4) ?? 0) + sent) - arrays.count else {
                        throw DatabaseError(code: 0, message: "a pull page's arrays were cut short",
                                            sql: SQL.Feed.page)
                    }
                    // At the end, jump to the snapshot: what lies between is only skipped tombstones.
                    let next = SyncCursor(
                        position: hasMore ? lastVersion : max(lastVersion, snapshotVersion),
                        skipTombstonesThrough: skipThrough, userID: userID, epoch: epoch)
                    page = try PullPage(row: row, arraysAt: SQL.Feed.pageArrays, recordCount: Int(sent),
                                        cursor: next, hasMore: hasMore, schemaVersion: schemaVersion)
                    // The tags the page's sent records refer to that it does not hold (sent, or
                    // held by the pulling device), in order of first reference.
                    var held = Set<Int64>()
                    _ = try row.withBytes(SQL.Feed.pageArrays + 6) { held = Set(Self.ids(in: $0)) }
                    _ = try row.withBytes(SQL.Feed.pageArrays + 7) {
                        var seen = held
                        parents = Self.ids(in: $0).filter { seen.insert($0).inserted }
                    }
                }
                guard var page else {
                    throw DatabaseError(code: 0, message: "a pull page query returned no row", sql: SQL.Feed.page)
                }
                page.appendTags(try parentTags(parents, after: position, userID: userID, device: device))
                return page
            }
        }
        SyncMetrics.pulled(records: page.recordCount)
        return page
    }

    /// What makes a page referentially complete: of `ids`, the live tags that changed after the
    /// page's start (so the client may not have them yet) and that the pulling device did not
    /// change itself, in version order. Tags at or below the start were sent earlier in this pull
    /// or were unchanged since it began. Such a tag's version lies beyond the page's (a live tag
    /// within the page's range is in the page), so it goes after the page's tags.
    private func parentTags(_ ids: [Int64], after position: Int64, userID: Int64, device: Int64) throws -> [[UInt8]] {
        let batch = SQL.Pull.parentTagBatch
        var found: [(version: Int64, json: [UInt8])] = []
        for start in stride(from: 0, to: ids.count, by: batch) {
            let chunk = ids[start..<min(start + batch, ids.count)]
            let slots = (0..<batch).map { DatabaseValue.int(chunk[chunk.startIndex + min($0, chunk.count - 1)]) }
            for row in try db.query(SQL.Feed.parentTags, [.int(userID), .int(position), .int(device)] + slots) {
                found.append((row.int64(0)!, row.bytes(1)!))
            }
        }
        return found.sorted { $0.version < $1.version }.map(\.json)
    }

    /// The numbers of a comma-separated list of ids (`parent_tags`, or the page's tag ids).
    private static func ids(in list: UnsafeRawBufferPointer) -> [Int64] {
        var ids: [Int64] = []
        var value: Int64 = 0
        var digits = 0
        for byte in list {
            if byte == UInt8(ascii: ",") {
                if digits > 0 { ids.append(value) }
                value = 0
                digits = 0
            } else {
                value = value * 10 + Int64(byte &- UInt8(ascii: "0"))
                digits += 1
            }
        }
        if digits > 0 { ids.append(value) }
        return ids
    }
}
