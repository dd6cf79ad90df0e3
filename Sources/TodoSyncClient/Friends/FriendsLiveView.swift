import Foundation

/// What a live friends view shows (`FriendsLiveView.state`).
public enum FriendsViewState<Value: Sendable & Equatable>: Sendable {
    /// Not loaded yet.
    case loading
    case loaded(Value)
    /// The last refresh failed (`FriendsError.notFound` once the friendship ended; `SyncError`
    /// offline…); `last` is what was shown before, if anything. The next event or `refresh()`
    /// tries again.
    case failed(any Error, last: Value?)

    /// The value to show: the loaded one, or the last one before a failure.
    public var value: Value? {
        switch self {
        case .loading: return nil
        case .loaded(let value): return value
        case .failed(_, let last): return last
        }
    }
}

/// A view of something on the friends routes that keeps itself right while the engine's live
/// stream is open (the app's social tab): a friend's month (`SyncEngine.friendMonthView`) or the
/// friends list with the requests (`SyncEngine.friendsView`).
///
/// `start()` loads it and asks the engine for friends events (`SyncEngine.friendSignals()`:
/// the stream reopens with `friends=1`); every matching event, and every reopening of the
/// stream (events may have been lost meanwhile), refreshes it. Events that come during a
/// refresh make one more refresh after it, never one each. Each new state (a value different
/// from the last, or a failure) is published on `states` and kept in `state`. `stop()` ends it,
/// and the stream stops asking for friends events when no view watches any more.
/// Nothing of it is stored: it is read from the server each time.
public actor FriendsLiveView<Value: Sendable & Equatable> {
    public private(set) var state: FriendsViewState<Value> = .loading
    /// Every new state, as it happens; finishes at `stop()` or when the engine stops.
    public nonisolated let states: AsyncStream<FriendsViewState<Value>>
    /// How many times it was read from the server (for tests and the benchmark).
    public private(set) var refreshes = 0

    private let engine: SyncEngine
    private let matches: @Sendable (FriendSignal) -> Bool
    private let fetch: @Sendable () async throws -> Value
    private let emit: AsyncStream<FriendsViewState<Value>>.Continuation
    private var listener: Task<Void, Never>?
    private var refreshing = false
    private var dirty = false
    private var stopped = false

    init(engine: SyncEngine, matches: @escaping @Sendable (FriendSignal) -> Bool, fetch: @escaping @Sendable () async throws -> Value) {
        self.engine = engine
        self.matches = matches
        self.fetch = fetch
        (states, emit) = AsyncStream.makeStream(of: FriendsViewState<Value>.self, bufferingPolicy: .bufferingNewest(100))
    }

    /// Loads the view, then keeps it right until `stop()`. Returns after the first load.
    public func start() async {
        guard listener == nil, !stopped else { return }
        let signals = await engine.friendSignals()
        let matches = self.matches
        listener = Task {
            for await signal in signals where matches(signal) {
                await self.refreshSoon()
            }
            await self.stop()
        }
        await refresh()
    }

    /// Stops watching (the engine's stream drops `friends=1` when no other view watches).
    public func stop() {
        guard !stopped else { return }
        stopped = true
        listener?.cancel()
        emit.finish()
    }

    /// A refresh without waiting for it: the listener goes on reading events meanwhile, so
    /// that events during a refresh fold into the one that follows it.
    private func refreshSoon() {
        if refreshing {
            dirty = true
        } else {
            Task { await self.refresh() }
        }
    }

    /// Reads the view again now (or once more after the refresh under way).
    public func refresh() async {
        guard !stopped else { return }
        dirty = true
        guard !refreshing else { return }
        refreshing = true
        defer { refreshing = false }
        while dirty && !stopped {
            dirty = false
            refreshes += 1
            let next: FriendsViewState<Value>
            do {
                next = .loaded(try await fetch())
            } catch {
                next = .failed(error, last: state.value)
            }
            guard !stopped else { return }
            if case .loaded(let value) = next, case .loaded(let shown) = state, value == shown { continue }
            state = next
            emit.yield(next)
        }
    }
}

/// The friends list and the pending requests, as a social tab's first screen shows them.
public struct FriendsOverview: Sendable, Equatable {
    public var friends: [Friend]
    public var requests: FriendRequests
}

extension SyncEngine {
    /// A friend's month that refreshes when the friend changes it, when the friends list changes
    /// (the friendship may have ended: `FriendsError.notFound`), and when the stream reopens.
    /// Call `start()` on it.
    public nonisolated func friendMonthView(friendID: Int64, month: CalendarMonth) -> FriendsLiveView<FriendMonth> {
        let client = self.client
        return FriendsLiveView(engine: self, matches: { signal in
            switch signal {
            case .streamOpened, .friendsChanged: return true
            case .friend(let id): return id == friendID
            }
        }, fetch: { try await client.friendMonth(friendID, month: month) })
    }

    /// The friends list and requests, refreshed on `{"friendId": null}` and when the stream
    /// reopens. Call `start()` on it.
    public nonisolated func friendsView() -> FriendsLiveView<FriendsOverview> {
        let client = self.client
        return FriendsLiveView(engine: self, matches: { !Self.isFriendChange($0) }, fetch: {
            // Both awaited before either error is thrown (`TodoSyncClient.settled`).
            async let friends = TodoSyncClient.settled { try await client.friends() }
            async let requests = TodoSyncClient.settled { try await client.friendRequests() }
            let (friendsResult, requestsResult) = await (friends, requests)
            return FriendsOverview(friends: try friendsResult.get(), requests: try requestsResult.get())
        })
    }

    private nonisolated static func isFriendChange(_ signal: FriendSignal) -> Bool {
        if case .friend = signal { return true }
        return false
    }
}
