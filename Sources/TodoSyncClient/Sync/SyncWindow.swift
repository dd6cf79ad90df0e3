import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// `SyncWindow` (TodoSyncCore, beside the cursor that names it) is the contract's window; here
// what the client needs of it: the whole account as a value, its query, how the store keeps it.
extension SyncWindow: CustomStringConvertible {
    /// The whole account: no window on pulls and snapshots.
    public static let whole = SyncWindow(from: nil, to: nil)!

    public var isWhole: Bool { from == nil && to == nil }

    /// "from 2026-09-01", "from 2026-09-01 to 2026-11-30", "to 2026-01-01", "the whole account".
    public var description: String {
        switch (from, to) {
        case (nil, nil): return "the whole account"
        case (let from?, nil): return "from \(from)"
        case (nil, let to?): return "to \(to)"
        case (let from?, let to?): return "from \(from) to \(to)"
        }
    }

    /// `from`/`to` for a pull or snapshot query (nothing for the whole account).
    var queryItems: [URLQueryItem] {
        var items: [URLQueryItem] = []
        if let from { items.append(URLQueryItem(name: "from", value: from.description)) }
        if let to { items.append(URLQueryItem(name: "to", value: to.description)) }
        return items
    }

    /// How the store keeps it: `FROM..TO`, a side empty when open.
    var stored: String { "\(from?.description ?? "")..\(to?.description ?? "")" }

    init?(stored text: String) {
        let parts = text.components(separatedBy: "..")
        guard parts.count == 2 else { return nil }
        func side(_ part: String) -> Day?? { part.isEmpty ? .some(nil) : Day(part).map { .some($0) } }
        guard let from = side(parts[0]), let to = side(parts[1]) else { return nil }
        self.init(from: from, to: to)
    }

    /// This window starting at `day` instead, when that is later (its end stays; a start after
    /// the end leaves the end's day alone).
    func starting(noEarlierThan day: Day) -> SyncWindow {
        guard from.map({ $0 < day }) ?? true else { return self }
        if let to, to < day { return SyncWindow(from: to, to: to)! }
        return SyncWindow(from: day, to: to)!
    }
}

/// What a device asks to hold, as the user put it; resolved into a `SyncWindow` at each sync.
public enum WindowSetting: Sendable, Hashable, CustomStringConvertible {
    /// Every record of the account (the default).
    case whole
    /// Fixed dates (either side may be open).
    case dates(from: Day?, to: Day?)
    /// The last `days` days: from `days` days before today, with no end (todos due later are
    /// held too). It moves with the date: each day's first sync pulls the moved window anew.
    case lastDays(Int)

    /// The window this setting means on `today`.
    public func window(today: Day) -> SyncWindow {
        switch self {
        case .whole: return .whole
        // `from` after `to` (refused by `LocalStore.setWindowSetting`) would be the day `from`.
        case .dates(let from, let to): return SyncWindow(from: from, to: to) ?? SyncWindow(from: from, to: from)!
        case .lastDays(let days): return SyncWindow(from: today.adding(days: -days), to: nil)!
        }
    }

    public var description: String {
        switch self {
        case .whole: return "the whole account"
        case .dates(let from, let to): return (SyncWindow(from: from, to: to) ?? .whole).description
        case .lastDays(let days): return "the last \(days) day(s)"
        }
    }

    /// How the store keeps it: `whole`, `dates FROM..TO`, `days N`.
    var stored: String {
        switch self {
        case .whole: return "whole"
        case .dates(let from, let to): return "dates \(from?.description ?? "")..\(to?.description ?? "")"
        case .lastDays(let days): return "days \(days)"
        }
    }

    init?(stored text: String) {
        if text == "whole" {
            self = .whole
        } else if text.hasPrefix("dates "), let window = SyncWindow(stored: String(text.dropFirst(6))) {
            self = .dates(from: window.from, to: window.to)
        } else if text.hasPrefix("days "), let days = Int(text.dropFirst(5)), days >= 0 {
            self = .lastDays(days)
        } else {
            return nil
        }
    }
}

extension Day {
    /// The date `days` days later (earlier when negative), kept within the contract's dates.
    public func adding(days: Int) -> Day {
        let target = daysSinceEpoch + days
        if target <= Day.minimum.daysSinceEpoch { return .minimum }
        if target >= Day.maximum.daysSinceEpoch { return .maximum }
        // The date of that day's midnight, through the core's one civil-from-days.
        return Day(String(Timestamp(millisecondsSinceEpoch: Int64(target) * 86_400_000).rfc3339.prefix(10))) ?? .minimum
    }

    /// Today in the device's time zone.
    public static func today() -> Day {
        let parts = Calendar(identifier: .gregorian).dateComponents(in: TimeZone.current, from: Date())
        return Day(year: parts.year!, month: parts.month!, day: parts.day!) ?? .minimum
    }
}
