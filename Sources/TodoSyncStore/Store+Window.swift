import MariaDB
import TodoSyncCore

/// Window pulls (API.md "Windows (partial sync)"; docs/WINDOWS.md): every tag, and the todos and
/// daily stats of a window of dates.
///
/// A window's first pull reads in two parts. First what was live at its start (the cursor's
/// `skipTombstonesThrough`, S) inside the window: the tags, then the window's dates, each by
/// version, one ordered range of `sync_feed_window` (Sql/031) continued from the cursor's `scan`
/// position; a page's records are then put in version order within each kind. Then, as any
/// window cursor, every change after S by version (the primary key), each row sent as an upsert
/// (a tag, or a live todo or stat inside the window), a tombstone, or an entry of `left` (a live
/// todo or stat outside the window). A record changed after S has a version above S: the first
/// part skips it and the second sends it, so nothing is sent twice or missed.
enum WindowPull {
    /// The columns both statements read.
    enum Column: Int, ResultColumns {
        case version, kind, recordID, device, deletedAt, parentTags, body, liveDay
    }

    /// The first part: live rows at or below S inside the window, from the scan position on, in
    /// `sync_feed_window` order. Parameters: user, S, scan day (`FeedEntry.tagDay` among the
    /// tags), scan version, scan day again, the window's first and last dates, limit.
    static let scan = """
        SELECT version, kind, record_id, device, deleted_at, parent_tags, body, live_day
          FROM sync_feed FORCE INDEX (sync_feed_window)
         WHERE user_id = ? AND version <= ?
           AND ((live_day = ? AND version > ?) OR (live_day > ? AND live_day BETWEEN ? AND ?))
         ORDER BY live_day, version LIMIT ?
        """

    /// The second part: `SQL.Feed.page` with the rows' `live_day`. Parameters as there.
    static let page = """
        SELECT version, kind, record_id, device, deleted_at, parent_tags, body, live_day FROM sync_feed
         WHERE user_id = ? AND version > ? AND (deleted_at IS NULL OR version > ?)
         ORDER BY version LIMIT ?
        """

    /// A window's snapshot (`Store.snapshot`): its live records, read by `sync_feed_window` (the
    /// tags, then the window's dates). Parameters: user, the window's first and last dates.
    /// Columns: kind, body (as `SQL.Snapshot.liveRecords`, read through its `LiveRecordColumn`).
    static let snapshotRecords = """
        SELECT kind, body FROM sync_feed FORCE INDEX (sync_feed_window)
         WHERE user_id = ? AND (live_day = '\(FeedEntry.tagDay)' OR live_day BETWEEN ? AND ?)
        """

    /// A date as a comparable integer (yyyymmdd).
    static func key(_ day: Day) -> Int { day.year * 10000 + day.month * 100 + day.day }
    static func key(_ parts: DateTimeParts) -> Int { parts.year * 10000 + parts.month * 100 + parts.day }

    /// The bytes of the JSON string of a record's `clientId` in its feed body (a tag's or todo's
    /// JSON begins `{"id":N,"clientId":`); nil when it has none (`null`), or for a daily stat.
    static func clientID(in body: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let prefix = #","clientId":""#.utf8
        var index = 6  // past `{"id":`
        while index < body.count, body[index] >= UInt8(ascii: "0"), body[index] <= UInt8(ascii: "9") { index += 1 }
        guard body.count > index + prefix.count,
              zip(body[index..<(index + prefix.count)], prefix).allSatisfy({ $0 == $1 }) else { return nil }
        let start = index + prefix.count - 1  // the opening quote
        var end = start + 1
        while end < body.count, body[end] != UInt8(ascii: "\"") {
            end += body[end] == UInt8(ascii: "\\") ? 2 : 1
        }
        guard end < body.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: body[start...end])
    }
}

extension Store {
    /// One page of a window pull (`pull`, with the user's sync state read in its transaction).
    /// `position`/`skipThrough`: the cursor's, or S and S for a first pull.
    func windowPage(userID: Int64, window: SyncWindow, cursor: SyncCursor?, snapshotVersion: Int64, epoch: UInt64,
                    device: Int64, tagSequence: Int64, limit: Int, schemaVersion: Int) throws -> PullPage {
        let position = cursor?.position ?? snapshotVersion
        let skipThrough = cursor?.skipTombstonesThrough ?? snapshotVersion
        var scan = cursor == nil ? WindowScan.start : cursor!.scan
        var page = PullPage(
            cursor: SyncCursor(position: position, skipTombstonesThrough: skipThrough, userID: userID, epoch: epoch,
                               window: window, scan: scan),
            hasMore: false, schemaVersion: schemaVersion, limit: limit)
        var parents = ParentTags()
        var rows = 0
        typealias C = WindowPull.Column

        if let start = scan {
            // The first part: read by (live_day, version), sent by version within each kind. The
            // bodies wait in one buffer (one allocation, not one per record) until sorted.
            var found: [(version: Int64, kind: FeedKind, range: Range<Int>)] = []
            var bodies: [UInt8] = []
            bodies.reserveCapacity(min(limit * 512, 1 << 20))
            var last = start
            let day: DatabaseValue = start.day.map(DatabaseValue.day) ?? .text(FeedEntry.tagDay)
            try db.forEachRow(WindowPull.scan, [
                .int(userID), .int(skipThrough), day, .int(start.version), day, .day(window.lowerBound),
                .day(window.upperBound), .int(Int64(limit + 1)),
            ]) { row throws(DatabaseError) in
                rows += 1
                guard rows <= limit else { return page.hasMore = true }
                let version = try row.int64(C.version)!
                let kind = FeedKind(rawValue: try row.int64(C.kind)!)!
                let parts = row.dateTime(C.liveDay)!
                last = WindowScan(day: kind == .tag ? nil : Day(year: parts.year, month: parts.month, day: parts.day),
                                  version: version)
                if kind == .tag { parents.held(try row.int64(C.recordID)!) }
                if device != 0, try row.int64(C.device) == device { return }
                let start = bodies.count
                _ = try row.withBytes(C.body) { bodies.append(contentsOf: $0) }
                found.append((version, kind, start..<bodies.count))
                _ = try row.withBytes(C.parentTags) { parents.referenced($0) }
            }
            if page.hasMore {
                rows = limit
                scan = last
            } else {
                scan = nil
                rows = min(rows, limit)
            }
            found.sort { $0.version < $1.version }
            bodies.withUnsafeBytes { all in
                for record in found {
                    page.append(record.kind, deleted: false, UnsafeRawBufferPointer(rebasing: all[record.range]))
                }
            }
        }

        var lastVersion = position
        if scan == nil {
            // The second part: every change after the position, by version.
            let remaining = limit - rows
            var read = 0
            let lower = WindowPull.key(window.lowerBound), upper = WindowPull.key(window.upperBound)
            try db.forEachRow(WindowPull.page, [.int(userID), .int(position), .int(skipThrough),
                                                .int(Int64(remaining + 1))]) { row throws(DatabaseError) in
                read += 1
                guard read <= remaining else { return page.hasMore = true }
                lastVersion = try row.int64(C.version)!
                let kind = FeedKind(rawValue: try row.int64(C.kind)!)!
                let deleted = !row.isNull(C.deletedAt)
                if kind == .tag { parents.held(try row.int64(C.recordID)!) }
                if device != 0, try row.int64(C.device) == device { return }
                if !deleted, kind != .tag, let parts = row.dateTime(C.liveDay),
                   !(lower...upper).contains(WindowPull.key(parts)) {
                    let id = try row.int64(C.recordID)!
                    _ = try row.withBytes(C.body) {
                        page.appendLeft(kind, id: id, clientID: WindowPull.clientID(in: $0), version: lastVersion)
                    }
                    return
                }
                _ = try row.withBytes(C.body) { page.append(kind, deleted: deleted, $0) }
                if !deleted { _ = try row.withBytes(C.parentTags) { parents.referenced($0) } }
            }
            // At the end, jump to the snapshot: what lies between is only skipped tombstones.
            lastVersion = page.hasMore ? lastVersion : max(lastVersion, snapshotVersion)
        }
        page.cursor = SyncCursor(position: lastVersion, skipTombstonesThrough: skipThrough, userID: userID,
                                 epoch: epoch, window: window, scan: scan)
        // Tags at or below the position were sent earlier in this pull (a first pull's tags come
        // first), or were unchanged since the cursor: only later ones may be missing.
        if tagSequence > position {
            try addParentTags(parents.missing, to: &page, after: position, userID: userID, device: device)
        }
        return page
    }
}
