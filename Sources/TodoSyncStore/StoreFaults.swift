/// Server bugs switched on on purpose, to show that issue 38's history checker
/// (scripts/partition/checker.py) catches a real server's violation of a property, not only one
/// planted in its input (docs/HISTORY.md, "Bugs injected on purpose").
///
/// Why this exists in the store at all: the bugs have to happen where the real checks are (the
/// opId lookup, the version comparison, the daily-stats rebuild), so the store consults these
/// flags at those three places. Every flag is off by default, and nothing in the shipping
/// `todosync` turns one on: only the test hooks (`TodoSyncTestHooks`, linked into `todosync-test`
/// alone) set them, from `TODOSYNC_TEST_INJECT` read once when `serve --enable-test-hooks`
/// starts (`StoreConfiguration.faults`).
public struct StoreFaults: Sendable, Equatable {
    /// `skip-opid-lookup`: a push ignores the results already stored for its opIds, so an opId
    /// already applied is applied again (its first stored result is kept).
    public var skipOpIDLookup = false
    /// `ignore-version-check`: `If-Match` on PATCH/DELETE and a push's `baseVersion` are never
    /// found stale, so a write based on an old version wins under every policy.
    public var ignoreVersionCheck = false
    /// `skip-stats-rebuild`: a write that changes todos without creating or deleting one (an
    /// edit) leaves the daily stats as they were.
    public var skipStatsRebuild = false

    public init() {}

    /// No fault on: what every shipping responder runs with.
    public var isEmpty: Bool { self == StoreFaults() }
}
