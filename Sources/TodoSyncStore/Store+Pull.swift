import MariaDB
import TodoSyncCore

/// One page of changes, ready to encode.
public struct PullPage: Sendable {
    public var tags: [Tag] = []
    public var todos: [Todo] = []
    public var dailyStats: [DailyStat] = []
    public var cursor: SyncCursor
    public var hasMore: Bool

    /// The contract's pull response body.
    public var jsonBody: [UInt8] {
        var writer = JSONWriter(reservingCapacity: 256 + (tags.count + todos.count + dailyStats.count) * 360)
        writer.beginObject()
        writer.key("changes")
        writer.beginObject()
        writer.key("tags")
        PullPage.writeKind(tags, deletedAt: \.deletedAt, to: &writer) { tag, writer in tag.write(to: &writer) } tombstone: {
            ($0.id, $0.clientID, $0.version, $0.deletedAt ?? "")
        }
        writer.key("todos")
        PullPage.writeKind(todos, deletedAt: \.deletedAt, to: &writer) { todo, writer in todo.write(to: &writer) } tombstone: {
            ($0.id, $0.clientID, $0.version, $0.deletedAt ?? "")
        }
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
    public func pull(userID: Int64, cursor: SyncCursor?, limit: Int) throws -> PullPage {
        try guarded {
            try db.inTransaction {
                // The first read fixes the snapshot that every query below sees.
                guard let state = try db.queryOne(SQL.Pull.syncState, [.int(userID)]) else { throw APIError.unauthorized }
                let snapshotVersion = state.int64(0)!
                // Expired only if a purged tombstone is one this client is still owed: tombstones
                // up to `skipTombstonesThrough` are never sent on this cursor anyway.
                if let cursor, max(cursor.position, cursor.skipTombstonesThrough) < state.int64(1)! {
                    throw APIError.cursorExpired
                }
                let position = cursor?.position ?? 0
                let skipThrough = cursor?.skipTombstonesThrough ?? snapshotVersion
                let parameters: [DatabaseValue] = [.int(userID), .int(position), .int(skipThrough), .int(Int64(limit + 1))]
                let tags = try db.query(SQL.Pull.tagsChanged, parameters).map(Tag.init(row:))
                let todos = try db.query(SQL.Pull.todosChanged, parameters).map(Todo.init(row:))
                let stats = try db.query(SQL.Pull.dailyStatsChanged, parameters).map(DailyStat.init(row:))

                // The page is the `limit` lowest versions across the three kinds.
                var versions = tags.map(\.version) + todos.map(\.version) + stats.map(\.version)
                versions.sort()
                let hasMore = versions.count > limit
                let lastVersion = hasMore ? versions[limit - 1] : (versions.last ?? position)
                var page = PullPage(
                    tags: tags.filter { $0.version <= lastVersion },
                    todos: todos.filter { $0.version <= lastVersion },
                    dailyStats: stats.filter { $0.version <= lastVersion },
                    cursor: SyncCursor(
                        // At the end, jump to the snapshot: what lies between is only skipped tombstones.
                        position: hasMore ? lastVersion : max(lastVersion, snapshotVersion),
                        skipTombstonesThrough: skipThrough, userID: userID),
                    hasMore: hasMore)
                try addParentTags(to: &page, after: position, userID: userID)
                return page
            }
        }
    }

    /// Makes the page referentially complete: a tag that a todo or stat in the page refers to and
    /// that changed after the page's start (so the client may not have it yet) is sent with it.
    private func addParentTags(to page: inout PullPage, after position: Int64, userID: Int64) throws {
        var present = Set(page.tags.map(\.id))
        var needed: [Int64] = []
        let referenced = page.todos.filter { $0.deletedAt == nil }.compactMap(\.tagID)
            + page.dailyStats.filter { $0.deletedAt == nil }.flatMap { $0.content.tagStats.map(\.tagID) }
        for tagID in referenced where !present.contains(tagID) {
            present.insert(tagID)
            needed.append(tagID)
        }
        for tagID in needed {
            guard let row = try db.queryOne(SQL.Push.tagByID, [.int(tagID), .int(userID)]) else { continue }
            let tag = Tag(row: row)
            if tag.version > position && tag.deletedAt == nil { page.tags.append(tag) }
        }
        page.tags.sort { $0.version < $1.version }
    }
}
