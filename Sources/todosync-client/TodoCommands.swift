import ArgumentParser
import Foundation
import TodoSyncClient
import TodoSyncCore

/// One todo as `list` and `add` print it; what waits for the server or for the user is marked
/// at the end of the line (`[pending]`, `[conflict]`, `[rejected]`), after today's text.
func todoLine(_ todo: LocalTodo, tags: [Int64: LocalTag], marks: RecordMarks) -> String {
    var line = String(format: "%5lld  [%@] ", todo.localID, todo.isCompleted ? "x" : " ")
    if todo.isImportant { line += "! " }
    line += todo.title
    var extras: [String] = [todo.deadline.description]
    if let tag = todo.tagLocalID.flatMap({ tags[$0] }) { extras.append("#\(tag.name)") }
    if todo.isLife { extras.append("@life") }
    if todo.estimatedTime > 0 { extras.append("\(todo.estimatedTime)m") }
    if todo.difficulty > 0 { extras.append("*\(todo.difficulty)") }
    if let remindAt = todo.remindAt { extras.append("remind \(remindAt)") }
    if todo.serverID == nil { extras.append("not synced") }
    line += "  (" + extras.joined(separator: " ") + ")" + compactNotes(todo.notes)
    let mark = marks.todo(todo.localID)
    if mark.conflict { line += "  [conflict]" }
    if mark.rejected { line += "  [rejected]" }
    if mark.pending { line += "  [pending]" }
    return line
}

/// Notes on the todo's line: `  -- ` and their first 60 characters, newlines as `⏎`.
func compactNotes(_ notes: String?) -> String {
    guard let notes, !notes.isEmpty else { return "" }
    let flat = notes.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\n", with: " ⏎ ")
    return "  -- " + (flat.count > 60 ? String(flat.prefix(59)) + "…" : flat)
}

struct Add: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add todos in the quick-add syntax (one per line): !important #tag @life 30m/2h *1..*5.")
    @OptionGroup var options: StoreOptions
    @Option(help: "Deadline (YYYY-MM-DD); today when omitted.") var date: String?
    @Option(help: "Notes for each added todo (up to 10,000 characters).") var notes: String?
    @Option(help: "When to remind (RFC 3339, e.g. 2026-12-24T09:00:00+01:00; kept in UTC).") var remindAt: String?
    @Argument(help: "The text; each argument is one line.") var lines: [String]

    func run() throws {
        let store = try options.openStore()
        let changes = try store.quickAdd(lines.joined(separator: "\n"), date: try parseDay(date), with: try extra())
        let tags = try Render.tagsByID(store)
        let marks = try RecordMarks(store)
        let added = try changes.compactMap { try store.todo($0.localID) }
        for todo in added { options.output.say(todoLine(todo, tags: tags, marks: marks)) }
        let pending = try store.pendingCount()
        options.output.finish(
            human: "\(changes.count) added; \(pending) change(s) waiting to sync.",
            json: .object(["added": .array(added.map { Render.todo($0, tags: tags, marks: marks) }), "pending": .int(pending)]))
    }

    /// How `add` takes each field (a new field does not compile until it is decided): the
    /// quick-add syntax, an option (the same for every line), or not at all.
    func extra() throws -> TodoChanges {
        var extra = TodoChanges()
        for field in TodoField.allCases {
            switch field {
            case .title, .raw, .isImportant, .isLife, .tagId, .difficulty, .estimatedTime: break  // the syntax
            case .deadline: break  // --date, the day of every line
            case .isCompleted: break  // a todo is added open
            case .notes: extra.notes = notes.map { .some($0) }
            case .remindAt: extra.remindAt = remindAt.map { .some($0) }
            }
        }
        return extra
    }
}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List todos of a day (the server's order), or of a range.",
        discussion: "A day outside this device's window (`sync --window-days`, `--from`/`--to`, `purge`) says so instead of showing it empty.")
    @OptionGroup var options: StoreOptions
    @Option(help: "The day (YYYY-MM-DD); today when omitted.") var date: String?
    @Option var from: String?
    @Option var to: String?
    @Flag(help: "Every todo in the store.") var all = false

    func run() throws {
        let store = try options.openStore()
        let todos: [LocalTodo]
        var outside: String?
        if all {
            todos = try store.allTodos()
        } else if from != nil || to != nil {
            todos = try store.todos(from: try parseDay(from), to: try parseDay(to))
        } else {
            let day = try parseDay(date)
            todos = try store.todos(on: day)
            outside = try WindowRender.outside(store, day)
        }
        let tags = try Render.tagsByID(store)
        let marks = try RecordMarks(store)
        for todo in todos { options.output.say(todoLine(todo, tags: tags, marks: marks)) }
        var json: [String: JSONValue] = ["todos": .array(todos.map { Render.todo($0, tags: tags, marks: marks) })]
        if outside != nil { json["outsideWindow"] = WindowRender.json(try store.heldWindow()) }
        options.output.finish(
            // Outside the window an empty day means "not held here", not "nothing to do"
            // (only this device's own changes on their way can show).
            human: outside ?? (todos.isEmpty ? "Nothing to do." : nil),
            json: .object(json))
    }
}

struct Done: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Mark a todo completed (--undo: not completed).")
    @OptionGroup var options: StoreOptions
    @Argument var ref: Int64
    @Flag var undo = false

    func run() throws {
        let store = try options.openStore()
        try store.updateTodo(ref, TodoChanges(isCompleted: !undo))
        options.output.finish(
            human: undo ? "Reopened \(ref)." : "Completed \(ref).",
            json: .object(["localId": .int(ref), "isCompleted": .bool(!undo), "pending": .int(try store.pendingCount())]))
    }
}

struct Edit: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Change a todo's fields.")
    @OptionGroup var options: StoreOptions
    @Argument var ref: Int64
    @Option var title: String?
    @Option(help: "New deadline (YYYY-MM-DD).") var date: String?
    @Option(help: "true or false.") var important: Bool?
    @Option(help: "true or false.") var life: Bool?
    @Option(help: "0 to 5.") var difficulty: Int?
    @Option(help: "Estimated minutes, 0 to 1440.") var minutes: Int?
    @Option(help: "A tag name or number; '-' removes the tag.") var tag: String?
    @Option(help: "New notes (up to 10,000 characters); '-' removes them.") var notes: String?
    @Option(help: "When to remind (RFC 3339, kept in UTC); '-' removes the reminder.") var remindAt: String?

    func run() throws {
        let store = try options.openStore()
        var changes = TodoChanges()
        // How `edit` takes each field (a new field does not compile until it is decided).
        for field in TodoField.allCases {
            switch field {
            case .title: changes.title = title
            case .raw: break  // the quick-add text the todo was made from; edit changes the title
            case .notes: if let notes { changes.notes = notes == "-" ? .some(nil) : .some(notes) }
            case .remindAt: if let remindAt { changes.remindAt = remindAt == "-" ? .some(nil) : .some(remindAt) }
            case .isImportant: changes.isImportant = important
            case .isLife: changes.isLife = life
            case .tagId: if let tag { changes.tag = tag == "-" ? .some(nil) : .some(try resolveTag(store, tag)) }
            case .difficulty: changes.difficulty = difficulty
            case .estimatedTime: changes.estimatedTime = minutes
            case .deadline: if let date { changes.deadline = try parseDay(date) }
            case .isCompleted: break  // `done` and `done --undo`
            }
        }
        try store.updateTodo(ref, changes)
        let pending = try store.pendingCount()
        let todo = try store.todo(ref)
        options.output.finish(
            human: "Changed \(ref); \(pending) change(s) waiting to sync.",
            json: .object([
                "todo": try todo.map { Render.todo($0, tags: try Render.tagsByID(store), marks: try RecordMarks(store)) } ?? .null,
                "pending": .int(pending),
            ]))
    }
}

/// The todo fields `resolve` takes (every synced field, under the contract's names: a tag by its
/// server id), beside `edit`'s options so that a new field's options are decided in one file.
struct ResolveTodoOptions: ParsableArguments {
    @Option(help: "A todo's title.") var title: String?
    @Option(help: "A todo's quick-add text.") var raw: String?
    @Option(help: "A todo's notes (up to 10,000 characters); '-' removes them.") var notes: String?
    @Option(help: "When to remind (RFC 3339, kept in UTC); '-' removes the reminder.") var remindAt: String?
    @Option(help: "A todo's deadline (YYYY-MM-DD).") var date: String?
    @Option(help: "true or false.") var completed: Bool?
    @Option(help: "true or false.") var important: Bool?
    @Option(help: "true or false.") var life: Bool?
    @Option(help: "0 to 5.") var difficulty: Int?
    @Option(help: "Estimated minutes, 0 to 1440.") var minutes: Int?
    @Option(help: "A tag name or number ('-': no tag); the tag must be on the server.") var tag: String?

    /// The given values under the contract's names (a new field does not compile until it has one).
    func values(_ store: LocalStore) throws -> [String: JSONValue] {
        var fields: [String: JSONValue] = [:]
        for field in TodoField.allCases {
            let value: JSONValue?
            switch field {
            case .title: value = title.map { .string($0) }
            case .raw: value = raw.map { .string($0) }
            case .notes: value = notes.map { $0 == "-" ? .null : .string($0) }
            case .remindAt: value = try remindAt.map { $0 == "-" ? .null : .string(try instant($0)) }
            case .deadline: value = try date.map { .string(try parseDay($0).description) }
            case .isCompleted: value = completed.map { .bool($0) }
            case .isImportant: value = important.map { .bool($0) }
            case .isLife: value = life.map { .bool($0) }
            case .difficulty: value = difficulty.map { .int($0) }
            case .estimatedTime: value = minutes.map { .int($0) }
            case .tagId:
                if let tag, tag != "-" {
                    guard let serverID = try store.tag(try resolveTag(store, tag))?.serverID else {
                        throw ValidationError("tag \(tag) is not on the server yet: sync first")
                    }
                    value = .int(serverID)
                } else {
                    value = tag.map { _ in .null }
                }
            }
            if let value { fields[field.key] = value }
        }
        return fields
    }
}

/// An instant as the server keeps it (UTC milliseconds), or a usage error naming the form.
func instant(_ text: String) throws -> String {
    guard let instant = Timestamp(rfc3339Input: text) else {
        throw ValidationError("not an RFC 3339 date-time with Z or an offset in 2000-2999: \(text)")
    }
    return instant.rfc3339
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete a todo.")
    @OptionGroup var options: StoreOptions
    @Argument var ref: Int64

    func run() throws {
        let store = try options.openStore()
        try store.deleteTodo(ref)
        options.output.finish(human: "Deleted \(ref).", json: .object(["deleted": .int(ref), "pending": .int(try store.pendingCount())]))
    }
}

struct Stat: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "The daily statistic of a day (as last synced).")
    @OptionGroup var options: StoreOptions
    @Option var date: String?

    func run() throws {
        let day = try parseDay(date)
        guard let stat = try options.openStore().dailyStat(for: day) else {
            options.output.finish(human: "No statistic for \(day) (yet).", json: .object(["date": .string(day.description), "stat": .null]))
            return
        }
        let statJSON = (try? JSONParser.parse(Array(stat.json.utf8))) ?? .null
        options.output.finish(
            human: "\(day): \(stat.completedCount)/\(stat.todoCount) done, productivity \(stat.productivityNum), balance \(stat.balanceNum) (\(stat.balanceTitle))",
            json: .object(["date": .string(day.description), "stat": statJSON]))
    }
}
