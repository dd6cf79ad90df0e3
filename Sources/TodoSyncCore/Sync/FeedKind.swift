/// The kinds of synced records as `sync_feed.kind` stores them; also the order of a pull page and
/// of a snapshot file's tables.
public enum FeedKind: Int64, CaseIterable, Sendable {
    case tag = 1, todo = 2, dailyStat = 3
}
