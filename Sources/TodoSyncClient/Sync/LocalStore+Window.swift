import GRDB
import TodoSyncCore

/// A todo a purge would remove that still has a change in the outbox: why the purge refused.
public struct QueuedPurgeChange: Sendable, Equatable {
    public var opID: String
    public var action: OperationAction
    public var status: OperationStatus
    public var todoLocalID: Int64
    public var title: String
    public var deadline: Day
}

/// Why `purge(before:)` removed nothing.
public enum PurgeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Some of the todos have changes not yet settled with the server (pending, sending, or
    /// rejected and not acknowledged); `force` drops them.
    case queuedChanges([QueuedPurgeChange])
    /// The date is after the end of the device's window: nothing would be left to hold.
    case afterWindow(before: Day, window: SyncWindow)

    public var description: String {
        switch self {
        case .queuedChanges(let changes):
            return "\(changes.count) change(s) of these todos are not on the server yet; sync first, or purge with force to drop them"
        case .afterWindow(let before, let window):
            return "\(before) is after the end of this device's window (\(window))"
        }
    }
}

/// What a purge did.
public struct PurgeReport: Sendable, Equatable {
    /// Todo rows removed (tombstones included) and daily stats removed.
    public var todosRemoved: Int
    public var statsRemoved: Int
    /// Queued changes dropped (only with `force`).
    public var changesDropped: Int
    /// The window the device asks for from now on.
    public var window: SyncWindow
}

// The window of a device (API.md "Windows (partial sync)", docs/CLIENT.md "Windows and purge").
// Four facts in `meta`: the setting (what the user asked for), the purge floor, the window the
// cursor (or the full pull under way) belongs to, and the window the device holds completely.
extension LocalStore {
    /// The window the user asked for (`.whole` until one is set).
    public func windowSetting() throws -> WindowSetting {
        try pool.read { try Meta.get($0, .windowSetting).flatMap(WindowSetting.init(stored:)) ?? .whole }
    }

    /// Remembers the window to hold from the next sync on. Setting another window than the one
    /// remembered also lifts a purge's floor (the user asked for those dates again).
    public func setWindowSetting(_ setting: WindowSetting) throws {
        if case .dates(let from?, let to?) = setting, to < from { throw LocalStoreError.validation(field: "to", problem: "is before from") }
        if case .lastDays(let days) = setting, days < 0 { throw LocalStoreError.validation(field: "days", problem: "is negative") }
        try pool.write { db in
            let current = try Meta.get(db, .windowSetting).flatMap(WindowSetting.init(stored:)) ?? .whole
            guard current != setting else { return }
            try Meta.set(db, .windowSetting, setting.stored)
            try Meta.set(db, .purgedBefore, nil)
        }
    }

    /// The window the device holds completely, as of its last complete pull (nil before one).
    /// A date outside it may hold only this device's own changes on their way.
    public func heldWindow() throws -> SyncWindow? {
        try pool.read { try Meta.get($0, .heldWindow).flatMap(SyncWindow.init(stored:)) }
    }

    /// The window a sync on `today` holds: the setting, starting no earlier than a purge's date.
    func resolvedWindow(today: Day) throws -> SyncWindow {
        try syncWindows(today: today).held
    }

    /// The windows of a sync on `today`: the one the device holds (`held`, as `resolvedWindow`),
    /// and the one it pulls, whose cursor it goes on with.
    ///
    /// They differ only for a window of the last N days on a later day. That window's start
    /// moves a day each day, and a cursor is bound to its window (another window is pulled anew
    /// without one): pulling the moved window would pull the whole window again every day.
    /// Nothing comes into the moved window (its end is open); the day that slid out only goes.
    /// So the device goes on pulling the window its cursor belongs to, which still contains the
    /// moved one, and treats what a page brings outside the held window as `left`
    /// (`DecodedPage.keeping`); until that cursor's start is more than N days behind (what it
    /// brings for nothing grows with that gap), then it pulls the moved window anew, once every
    /// N days instead of every day.
    func syncWindows(today: Day) throws -> (held: SyncWindow, pull: SyncWindow) {
        try pool.read { db in
            let setting = try Meta.get(db, .windowSetting).flatMap(WindowSetting.init(stored:)) ?? .whole
            let asked = setting.window(today: today)
            var held = asked
            if let floor = try Meta.get(db, .purgedBefore).flatMap(Day.init) { held = asked.starting(noEarlierThan: floor) }
            // A purge's floor narrowed it: that window is pulled as it is (nothing purged comes back).
            guard case .lastDays(let days) = setting, held == asked,
                  let current = try Meta.get(db, .pullWindow).flatMap(SyncWindow.init(stored:)),
                  try Meta.get(db, .cursor) != nil || Meta.get(db, .resyncActive) != nil,
                  current.to == held.to, let start = current.from, let from = held.from, start <= from,
                  from.daysSinceEpoch - start.daysSinceEpoch <= max(days, 1) else { return (held, held) }
            return (held, current)
        }
    }

    /// Makes `window` the one pulls use. When the cursor (or a full pull under way) belongs to
    /// another window, the pull starts anew without a cursor (a new generation: what the new
    /// window's pull does not bring is forgotten at its end, unless a change of it is queued).
    /// One transaction: a crash leaves either the old window's cursor or the new full pull.
    /// Returns true when the window changed.
    @discardableResult
    func enterWindow(_ window: SyncWindow) throws -> Bool {
        try pool.write { db in
            let current = try Meta.get(db, .pullWindow).flatMap(SyncWindow.init(stored:)) ?? .whole
            let started = try Meta.get(db, .cursor) != nil || Meta.get(db, .resyncActive) != nil
            try Meta.set(db, .pullWindow, window.stored)
            guard started, current != window else { return false }
            try Meta.set(db, .resyncActive, nil)
            try Self.openGeneration(db)
            return true
        }
    }

    /// After a complete pull of `window`: forgets what lies outside it and has nothing queued
    /// (the device's own moves, acknowledged now), and notes the window as held.
    func settleWindow(_ window: SyncWindow) throws {
        try pool.write { db in
            if !window.isWhole { try Self.forgetOutside(db, window) }
            try Meta.set(db, .heldWindow, window.stored)
        }
    }

    /// Forgets the todos of `left` (unless a change of theirs is in the outbox or the conflict
    /// inbox: those stay until settled) and the daily stats of `left`.
    static func forgetLeft(_ db: Database, todos: [ServerRecord], stats: [ServerRecord]) throws {
        guard !todos.isEmpty || !stats.isEmpty else { return }
        let kept = try unsettledTodoIDs(db)
        for record in todos {
            guard let localID = try ServerRecords.localID(db, TodoRecord.self, id: record.id, clientID: record.clientID),
                  !kept.contains(localID) else { continue }
            _ = try TodoRecord.deleteOne(db, key: localID)
        }
        let ids = stats.compactMap(\.id)
        if !ids.isEmpty { try DailyStatRecord.filter(ids.contains(DailyStatRecord.Columns.id)).deleteAll(db) }
    }

    /// Forgets the todos outside `window` with nothing unsettled, and the stats of dates outside.
    @discardableResult
    static func forgetOutside(_ db: Database, _ window: SyncWindow) throws -> Int {
        let deadline = TodoRecord.Columns.deadline, date = DailyStatRecord.Columns.date
        let kept = try unsettledTodoIDs(db)
        var removed = 0
        for (todoSide, statSide) in outside(window, deadline, date) {
            removed += try TodoRecord.filter(todoSide && !kept.contains(SyncState.Columns.localID)).deleteAll(db)
            try DailyStatRecord.filter(statSide).deleteAll(db)
        }
        return removed
    }

    /// The conditions "before the window" and "after the window", for todos and for stats.
    private static func outside(_ window: SyncWindow, _ deadline: Column, _ date: Column) -> [(SQLExpression, SQLExpression)] {
        var sides: [(SQLExpression, SQLExpression)] = []
        if let from = window.from { sides.append((deadline < from.description, date < from.description)) }
        if let to = window.to { sides.append((deadline > to.description, date > to.description)) }
        return sides
    }

    private static func unsettledTodoIDs(_ db: Database) throws -> Set<Int64> { try unsettledIDs(db, .todo) }

    /// Records of `entity` with an operation in the outbox (any state) or a conflict waiting for the app.
    static func unsettledIDs(_ db: Database, _ entity: EntityKind) throws -> Set<Int64> {
        try OutboxOperation.recordLocalIDs(db, entity).union(
            ConflictRecord.filter(ConflictRecord.Columns.entity == entity.rawValue)
                .select(ConflictRecord.Columns.recordLocalID, as: Int64.self).fetchAll(db))
    }

    // MARK: Purge

    /// Removes the todos due before `before` (tombstones too) and the daily stats of those
    /// dates, and narrows the window to start at `before` so that no pull brings them back.
    /// Refuses (`PurgeError.queuedChanges`, nothing removed) when any of them has a change in the
    /// outbox or a conflict waiting, unless `force`: then those changes are dropped, unsent.
    /// One transaction. The caller holds the sync lock (`TodoSyncClient.purge`).
    func purge(before: Day, force: Bool, today: Day) throws -> PurgeReport {
        try pool.write { db in
            let setting = try Meta.get(db, .windowSetting).flatMap(WindowSetting.init(stored:)) ?? .whole
            let asked = setting.window(today: today)
            if let to = asked.to, to < before { throw PurgeError.afterWindow(before: before, window: asked) }
            let deadline = TodoRecord.Columns.deadline
            let doomed = try TodoRecord.filter(deadline < before.description).select(SyncState.Columns.localID, as: Int64.self).fetchAll(db)
            let doomedSet = Set(doomed)
            let queued = try OutboxOperation.filter(OutboxOperation.Columns.entity == EntityKind.todo.rawValue)
                .order(OutboxOperation.Columns.seq).fetchAll(db).filter { doomedSet.contains($0.recordLocalID) }
            let conflicted = ConflictRecord.filter(ConflictRecord.Columns.entity == EntityKind.todo.rawValue)
                .filter(doomed.contains(ConflictRecord.Columns.recordLocalID))
            let hasConflicts = try !conflicted.isEmpty(db)
            if !force && (!queued.isEmpty || hasConflicts) {
                var changes: [QueuedPurgeChange] = []
                for op in queued {
                    guard let todo = try TodoRecord.filter(key: op.recordLocalID).fetchOne(db) else { continue }
                    changes.append(QueuedPurgeChange(opID: op.opID, action: op.action, status: op.state, todoLocalID: op.recordLocalID,
                                                     title: todo.title, deadline: todo.syncedFields["deadline"]?.stringValue.flatMap(Day.init) ?? .minimum))
                }
                throw PurgeError.queuedChanges(changes)
            }
            let dropped = try OutboxOperation.filter(queued.compactMap(\.seq).contains(OutboxOperation.Columns.seq)).deleteAll(db)
            try conflicted.deleteAll(db)
            let todos = try TodoRecord.filter(doomed.contains(SyncState.Columns.localID)).deleteAll(db)
            let stats = try DailyStatRecord.filter(DailyStatRecord.Columns.date < before.description).deleteAll(db)
            let floor = try Meta.get(db, .purgedBefore).flatMap(Day.init)
            if floor.map({ $0 < before }) ?? true { try Meta.set(db, .purgedBefore, before.description) }
            if let held = try Meta.get(db, .heldWindow).flatMap(SyncWindow.init(stored:)) {
                try Meta.set(db, .heldWindow, held.starting(noEarlierThan: before).stored)
            }
            return PurgeReport(todosRemoved: todos, statsRemoved: stats, changesDropped: dropped,
                               window: asked.starting(noEarlierThan: before))
        }
    }
}

extension TodoSyncClient {
    /// Forgets the local todos due before `before` and their daily stats, and narrows the
    /// window to start there (Azure's `purgeWithQuery`; nothing changes on the server). Throws
    /// `PurgeError.queuedChanges` (nothing removed) when any of them has a change not yet settled
    /// with the server, unless `force`, which drops those changes unsent (`PurgeReport`
    /// says how many). Throws `SyncError.alreadyRunning` while a sync of the store runs.
    @discardableResult
    public func purge(before: Day, force: Bool = false) throws -> PurgeReport {
        let lock = try SyncFileLock(storePath: store.path)
        defer { lock.release() }
        if let window { try store.setWindowSetting(window) }
        return try store.purge(before: before, force: force, today: today())
    }
}
