import MariaDB
import TodoSyncCore

extension Store {
    /// Creates one todo per quick-add line, all in one transaction: either every line is created
    /// or (on a validation error) none is. Tags are matched against the user's live tags, case-insensitively.
    /// Each non-blank line is one write operation against the hourly quota (at least one).
    public func quickAdd(userID: Int64, text: String, deadline: Day) throws -> [Todo] {
        let lines = text.split(whereSeparator: \.isNewline).count { $0.contains { !$0.isWhitespace } }
        return try write(userID: userID, operations: max(lines, 1)) { transaction in
            var tagsByName: [String: Int64] = [:]
            for tag in try db.query(SQL.Tags.listLive, [.int(userID)]).map(Tag.init(row:)) {
                let key = tag.name.lowercased()
                if tagsByName[key] == nil { tagsByName[key] = tag.id }  // ordered by id: first wins
            }
            let lines = try QuickAddParser.parse(text) { tagsByName[$0] }
            return try lines.map { line in
                let draft = TodoDraft(
                    title: line.title, raw: line.raw, isImportant: line.isImportant, isLife: line.isLife,
                    tagID: line.tagID, difficulty: line.difficulty ?? 0, estimatedTime: line.estimatedTime ?? 0,
                    deadline: deadline)
                return try createTodo(draft, in: transaction).record
            }
        }
    }
}
