import TodoSyncCore

extension LocalDailyStat {
    /// A stat from the server's DailyStat JSON (a pull page's, or a friend's month): nil when it
    /// lacks `id`, `date`, `balance` or `center`.
    init?(json: String) {
        guard let parsed = try? JSONParser.parse(Array(json.utf8)), let object = parsed.objectValue,
              let id = object["id"]?.int64Value, let date = object["date"]?.stringValue.flatMap(Day.init),
              let balance = object["balance"]?.objectValue, let center = object["center"]?.objectValue else { return nil }
        let tagStats = (object["tagStats"]?.arrayValue ?? []).compactMap { item -> LocalDailyStat.TagStat? in
            guard let stat = item.objectValue, let tagID = stat["tagId"]?.int64Value else { return nil }
            return LocalDailyStat.TagStat(
                tagID: tagID, name: stat["name"]?.stringValue ?? "", color: stat["color"]?.stringValue ?? "",
                count: Int(stat["count"]?.int64Value ?? 0))
        }
        self.init(
            serverID: id, date: date, todoCount: Int(object["todoCount"]?.int64Value ?? 0),
            completedCount: Int(object["completedCount"]?.int64Value ?? 0),
            productivityNum: object["productivityNum"]?.doubleValue ?? 0, balanceNum: Int(balance["num"]?.int64Value ?? 0),
            balanceTitle: balance["title"]?.stringValue ?? "", balanceMessage: balance["message"]?.stringValue ?? "",
            tagStats: tagStats, centerX: center["x"]?.doubleValue ?? 0, centerY: center["y"]?.doubleValue ?? 0,
            version: object["version"]?.int64Value ?? 0, createdAt: object["createdAt"]?.stringValue ?? "",
            updatedAt: object["updatedAt"]?.stringValue ?? "", json: json)
    }
}
