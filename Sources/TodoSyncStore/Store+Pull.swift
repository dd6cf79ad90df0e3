import MariaDB
import TodoSyncCore

/// One page of changes, ready to encode. Todos, by far the most numerous, are already JSON
/// (written straight from their rows); tags and daily stats are records.
public struct PullPage: Sendable {
    public var tags: [Tag] = []
    /// The page's live todos and tombstones, as the contents of the two JSON arrays.
    var todos = EncodedTodos()
    public var dailyStats: [DailyStat] = []
    public var cursor: SyncCursor
    public var hasMore: Bool

    /// Todos written by `TodoRowJSON` into the `upserted` and `deleted` arrays; `close()` ends
    /// both once the page is complete (`jsonBody` requires it).
    struct EncodedTodos: Sendable {
        var upserted = JSONWriter(reservingCapacity: 1024)
        var deleted = JSONWriter(reservingCapacity: 256)
        private(set) var isClosed = false
        /// Tags that the live todos refer to, in order of first reference.
        var tagIDs: [Int64] = []

        init() {
            upserted.beginArray()
            deleted.beginArray()
        }

        /// Adds the todo row `row` to the right array.
        mutating func add(_ row: RowCursor) throws(DatabaseError) {
            precondition(!isClosed, "todos added to a closed page")
            if TodoRowJSON.isDeleted(row) {
                try TodoRowJSON.write(row, asTombstone: true, to: &deleted)
            } else {
                try TodoRowJSON.write(row, to: &upserted)
                if let tagID = try TodoRowJSON.tagID(row) { tagIDs.append(tagID) }
            }
        }

        mutating func close() {
            precondition(!isClosed, "page closed twice")
            upserted.endArray()
            deleted.endArray()
            isClosed = true
        }
    }

    /// The contract's pull response body.
    public var jsonBody: [UInt8] {
        precondition(todos.isClosed, "pull page encoded before its todos were closed")
        var writer = JSONWriter(
            reservingCapacity: 256 + todos.upserted.bytes.count + todos.deleted.bytes.count
                + (tags.count + dailyStats.count) * 360)
        writer.beginObject()
        writer.key("changes")
        writer.beginObject()
        writer.key("tags")
        PullPage.writeKind(tags, deletedAt: \.deletedAt, to: &writer) { tag, writer in tag.write(to: &writer) } tombstone: {
            ($0.id, $0.clientID, $0.version, $0.deletedAt ?? "")
        }
        writer.key("todos")
        writer.beginObject()
        writer.key("upserted")
        writer.raw(todos.upserted.bytes)
        writer.key("deleted")
        writer.raw(todos.deleted.bytes)
        writer.endObject()
        writer.key("dailyStats")
        PullPage.writeKind(dailyStats, deletedAt: \.deletedAt, to: &writer) { stat, writer in stat.write(to: &writer) } tombstone: {
            ($0.id, nil, $0.version, $0.deletedAt ?? "")
        }
        writer.endObject()
        writer.field("cursor", cursor.encoded)
        writer.field("hasMore", hasMore)
        writer.endObject()
        return writer.bytes
    }

    private static func writeKind<Record>(
        _ records: [Record], deletedAt: KeyPath<Record, String?>, to writer: inout JSONWriter,
        upserted: (Record, inout JSONWriter) -> Void, tombstone: (Record) -> (Int64, String?, Int64, String)
    ) {
        writer.beginObject()
        writer.key("upserted")
        writer.beginArray()
        for record in records where record[keyPath: deletedAt] == nil { upserted(record, &writer) }
        writer.endArray()
        writer.key("deleted")
        writer.beginArray()
        for record in records where record[keyPath: deletedAt] != nil {
            let (id, clientID, version, deletedAt) = tombstone(record)
            writer.beginObject()
            writer.field("id", id)
            writer.field("clientId", clientID)
            writer.field("version", version)
            writer.field("deletedAt", deletedAt)
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
    }
}

extension Store {
    /// One page of the user's changes after `cursor` (nil: a first pull of live records), in a
    /// single consistent snapshot. Versions are handed out in commit order under the user's lock,
    /// so everything at or below a page's last version is already committed and visible: paging
    /// by version never skips a change that commits meanwhile.
    ///
    /// With `deviceID`, tags and todos whose latest change was an operation pushed by that device
    /// are left out (the device holds them from its push results). The page's version range is
    /// found without that filter, so paging and `hasMore` are the same with or without it.
    public func pull(userID: Int64, cursor: SyncCursor?, limit: Int, deviceID: String? = nil) throws -> PullPage {
        try guarded {
            try db.inTransaction {
                // The first read fixes the snapshot that every query below sees.
                guard let state = try db.queryOne(SQL.Pull.syncState, [.text(deviceID ?? ""), .int(userID)]) else {
                    throw APIError.unauthorized
                }
                let snapshotVersion = state.int64(0)!
                // Device numbers start at 1, so 0 matches no record's device.
                let device = DatabaseValue.int(deviceID == nil ? 0 : state.int64(2) ?? 0)
                let epoch = UInt64(bitPattern: state.int64(3)!)
                if let cursor {
                    // Another history of the database (a restore, another installation, or a
                    // cursor from before epochs), or a position this history never reached (a
                    // restore not followed by `todosync new-epoch`): the changes it stands for are
                    // not the ones here. Never a silent skip.
                    guard cursor.epoch == epoch, cursor.position <= snapshotVersion,
                          cursor.skipTombstonesThrough <= snapshotVersion else {
                        throw APIError.cursorFromAnotherHistory
                    }
                    // Expired if a purged tombstone is one this client is still owed: tombstones
                    // up to `skipTombstonesThrough` are never sent on this cursor anyway.
                    if max(cursor.position, cursor.skipTombstonesThrough) < state.int64(1)! {
                        throw APIError.cursorExpired
                    }
                }
                let position = cursor?.position ?? 0
                let skipThrough = cursor?.skipTombstonesThrough ?? snapshotVersion

                // Step 1: where does the page end? The `limit` lowest versions across the kinds.
                let bounds: [DatabaseValue] = [.int(userID), .int(position), .int(skipThrough), .int(Int64(limit + 1))]
                // The lowest next version of each kind (tags, todos, stats; nil: nothing to send).
                var firstVersions: [Int64?] = []
                var versions: [Int64] = []
                for sql in [SQL.Pull.tagVersions, SQL.Pull.todoVersions, SQL.Pull.dailyStatVersions] {
                    let kindVersions = try db.query(sql, bounds).map { $0.int64(0)! }
                    firstVersions.append(kindVersions.first)
                    versions += kindVersions
                }
                versions.sort()
                let hasMore = versions.count > limit
                let lastVersion = hasMore ? versions[limit - 1] : (versions.last ?? position)

                // Step 2: exactly the page's rows.
                var page = PullPage(
                    cursor: SyncCursor(
                        // At the end, jump to the snapshot: what lies between is only skipped tombstones.
                        position: hasMore ? lastVersion : max(lastVersion, snapshotVersion),
                        skipTombstonesThrough: skipThrough, userID: userID, epoch: epoch),
                    hasMore: hasMore)
                if !versions.isEmpty {
                    // A kind whose lowest next version lies beyond the page has no rows in it: skip its query.
                    let inPage = firstVersions.map { $0.map { $0 <= lastVersion } ?? false }
                    let range: [DatabaseValue] = [.int(userID), .int(position), .int(lastVersion), .int(skipThrough)]
                    if inPage[0] { page.tags = try db.query(SQL.Pull.tagPage, range + [device]).map(Tag.init(row:)) }
                    if inPage[1] {
                        try db.forEachRow(SQL.Pull.todoPage, range + [device]) { row throws(DatabaseError) in
                            try page.todos.add(row)
                        }
                    }
                    if inPage[2] { page.dailyStats = try db.query(SQL.Pull.dailyStatPage, range).map(DailyStat.init(row:)) }
                    try addParentTags(to: &page, after: position, userID: userID, device: device)
                }
                page.todos.close()
                return page
            }
        }
    }

    /// Makes the page referentially complete: a tag that a todo or stat in the page refers to and
    /// that changed after the page's start (so the client may not have it yet) is sent with it.
    /// Tags at or below the start were sent earlier in this pull or were unchanged since it began.
    /// A tag the pulling device changed itself is held by it already (`device`, 0 for none).
    private func addParentTags(to page: inout PullPage, after position: Int64, userID: Int64,
                               device: DatabaseValue) throws {
        var present = Set(page.tags.map(\.id))
        var needed: [Int64] = []
        for tagID in page.todos.tagIDs where present.insert(tagID).inserted { needed.append(tagID) }
        for stat in page.dailyStats where stat.deletedAt == nil {
            for tagID in stat.content.tagIDs where present.insert(tagID).inserted { needed.append(tagID) }
        }
        guard !needed.isEmpty else { return }
        let batch = SQL.Pull.parentTagBatch
        for start in stride(from: 0, to: needed.count, by: batch) {
            let ids = Array(needed[start..<min(start + batch, needed.count)])
            let slots = (0..<batch).map { DatabaseValue.int(ids[min($0, ids.count - 1)]) }
            page.tags += try db.query(SQL.Pull.parentTags, [.int(userID), .int(position), device] + slots)
                .map(Tag.init(row:))
        }
        page.tags.sort { $0.version < $1.version }
    }
}
