import TodoSyncCore

extension Application {
    func registerDailyStatRoutes() {
        router.add("GET", "/api/v1/daily-stats") { context in
            let owner = try context.authenticationInRead()
            let (from, to) = try context.parseBeforeAuthentication { try MonthQuery.parse(context.request.query["month"]) }
            return context.items(try context.store.dailyStatList(owner, from: from, to: to))
        }
        router.add("GET", "/api/v1/daily-stats/:date") { context in
            let userID = try context.requireUser()
            guard let day = Day(context.pathParameters[0]) else {
                throw APIError.badRequest("The date must be a real date YYYY-MM-DD between 2000-01-01 and 2999-12-31.")
            }
            guard let stat = try context.store.dailyStat(userID: userID, day: day) else { throw DomainError.notFound }
            return .record(200, version: stat.version, write: stat.write)
        }
    }
}

/// The `month=YYYY-MM` query.
enum MonthQuery {
    /// The `month` query parameter of a month read (yours or a friend's): its first and last day,
    /// or 400 when absent or malformed.
    static func parse(_ text: String?) throws -> (Day, Day) {
        guard let text, let range = range(text) else {
            throw APIError.badRequest("`month` must be YYYY-MM between 2000-01 and 2999-12.")
        }
        return range
    }

    /// The first and last day of the month, or nil when malformed or out of range.
    static func range(_ text: String) -> (Day, Day)? {
        let bytes = Array(text.utf8)
        guard bytes.count == 7, bytes[4] == UInt8(ascii: "-"),
              bytes.allSatisfy({ $0 == UInt8(ascii: "-") || ($0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9")) }),
              let year = Int(String(decoding: bytes[0..<4], as: UTF8.self)),
              let month = Int(String(decoding: bytes[5..<7], as: UTF8.self)),
              let first = Day(year: year, month: month, day: 1),
              let last = Day(year: year, month: month, day: Day.daysIn(month: month, year: year)) else { return nil }
        return (first, last)
    }
}
