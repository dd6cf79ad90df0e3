import MariaDB
import TodoSyncCore

/// The todos one push reads and writes (issue 25): read up front in a few multi-row lookups,
/// changed in memory operation by operation, and written together by `flush()` in a few
/// multi-row statements — instead of a lookup, a write and a savepoint per operation.
///
/// The push holds the user's row lock from its first statement to its commit (`Store.write`),
/// and every writer of a user's todos takes it first, so what was read stays true until the
/// flush. An operation changes what is staged only after its last check (its tag, its
/// version), so an operation rejected midway leaves nothing staged to undo. A todo this push
/// creates has a placeholder id (negative) until the flush inserts it; a result naming it is
/// rendered by `finished(_:schema:)` once the id is known.
///
/// A todo's JSON at the current schema version is rendered once per state (id and version: every
/// change takes a new version): a result's record, the feed row and the list row of the same
/// state share the bytes (`rendered(_:schema:)`, `body(of:)`).
final class StagedTodos {
    private let transaction: WriteTransaction
    private var db: Connection { transaction.db }
    /// The todos known, by id (placeholders included), as the push has left them so far.
    private var byID: [Int64: Todo] = [:]
    /// Ids the user has no todo of.
    private var absentIDs: Set<Int64> = []
    /// Known ids by client key; and the client keys the user has no todo of.
    private var idByClientKey: [String: Int64] = [:]
    private var absentClientKeys: Set<String> = []
    /// The todos to write, in order of first change.
    private var changed: [Int64] = []
    private var isChanged: Set<Int64> = []
    private var lastPlaceholder: Int64 = 0
    /// Every state of a todo this push created, by version (a result names its record's state
    /// by the version), and the id each placeholder got when flushed.
    private var createdStates: [Int64: Todo] = [:]
    private var insertedIDs: [Int64: Int64] = [:]
    /// The JSON of todos' states at the current schema version, by (real) id: the latest state
    /// rendered of each, with its version.
    private var bodies: [Int64: (version: Int64, json: [UInt8])] = [:]

    /// Whether a flush has forgotten what was read (`prefetch` again before the next todo operation).
    private(set) var hasForgotten = false

    init(transaction: WriteTransaction) {
        self.transaction = transaction
    }

    /// Reads the user's todos of these ids and client keys, 64 per statement.
    func prefetch(ids: [Int64], clientKeys: [String]) throws {
        hasForgotten = false
        let ids = Array(Set(ids.filter { $0 > 0 }).subtracting(byID.keys).subtracting(absentIDs))
        let keys = Array(Set(clientKeys).subtracting(idByClientKey.keys).subtracting(absentClientKeys))
        try lookUp(SQL.Push.todosByIDs, ids.map(DatabaseValue.int))
        try lookUp(SQL.Push.todosByClientKeys, keys.map(DatabaseValue.text))
        absentIDs.formUnion(ids.filter { byID[$0] == nil })
        absentClientKeys.formUnion(keys.filter { idByClientKey[$0] == nil })
    }

    private func lookUp(_ statement: InListStatement, _ values: [DatabaseValue]) throws {
        for list in statement.lists(values) {
            for row in try db.query(statement.sql, [.int(transaction.userID)] + list) { learn(Todo(row: row)) }
        }
    }

    private func learn(_ todo: Todo) {
        byID[todo.id] = todo
        if let clientID = todo.clientID { idByClientKey[ClientID.key(clientID)] = todo.id }
    }

    /// The user's todo of this id (live or a tombstone), nil when there is none.
    func todo(id: Int64) throws -> Todo? {
        guard id > 0 else { return nil }  // placeholders are never a client's to name
        if byID[id] == nil && !absentIDs.contains(id) { try prefetch(ids: [id], clientKeys: []) }
        return byID[id]
    }

    /// The user's todo of this clientId (live or a tombstone), nil when there is none.
    func todo(clientID: String) throws -> Todo? {
        let key = ClientID.key(clientID)
        if idByClientKey[key] == nil && !absentClientKeys.contains(key) { try prefetch(ids: [], clientKeys: [key]) }
        return idByClientKey[key].flatMap { byID[$0] }
    }

    /// Stages a new todo (from `Store.newTodo`): it gets a placeholder id until the flush.
    func create(_ new: Todo) -> Todo {
        var todo = new
        lastPlaceholder -= 1
        todo.id = lastPlaceholder
        if let clientID = todo.clientID { absentClientKeys.remove(ClientID.key(clientID)) }
        write(todo, over: nil)
        return todo
    }

    /// Stages a todo's new state over `current` (nil: it is new), and notes it for the daily stats.
    func write(_ todo: Todo, over current: Todo?) {
        byID[todo.id] = todo
        if isChanged.insert(todo.id).inserted { changed.append(todo.id) }
        if let clientID = todo.clientID { idByClientKey[ClientID.key(clientID)] = todo.id }
        if todo.id < 0 { createdStates[todo.version] = todo }
        transaction.todoWritten(from: current, to: todo)
    }

    /// Writes every staged change — creates in multi-row INSERTs that answer their ids, changes
    /// of existing todos in multi-row upserts by id — and hands the written todos to the feed
    /// and todo list; then forgets what it read, so that what others write next in this
    /// transaction (a tag's delete un-tags todos) is read afresh.
    func flush() throws {
        let (userID, now, device) = (transaction.userID, transaction.now, DatabaseValue.optionalInt(transaction.device))
        let todos = changed.map { byID[$0]! }
        let created = todos.filter { $0.id < 0 }
        for chunk in SQL.Push.insertTodos.chunks(created.count) {
            var values: [DatabaseValue] = []
            for todo in created[chunk.rows] {
                values += [.int(userID), .optionalText(todo.clientID), .optionalText(todo.clientID.map(ClientID.key))]
                    + TodoColumn.contentValues(of: todo)
                    + [.int(todo.version), .timestamp(now), .timestamp(now), deletedAt(todo), device]
            }
            let ids = try db.query(chunk.sql, values).map { $0.int64(OnlyColumn.value)! }  // `RETURNING id`
            guard ids.count == chunk.rows.count else {
                throw DatabaseError(code: 0, message: "INSERT … RETURNING answered \(ids.count) ids for \(chunk.rows.count) rows",
                                    sql: chunk.sql)
            }
            for (todo, id) in zip(created[chunk.rows], ids) { insertedIDs[todo.id] = id }
        }
        let updated = todos.filter { $0.id > 0 }
        for chunk in SQL.Push.updateTodos.chunks(updated.count) {
            var values: [DatabaseValue] = []
            for todo in updated[chunk.rows] {
                values += [.int(todo.id), .int(userID)] + TodoColumn.contentValues(of: todo)
                    + [.int(todo.version), .text(Timestamp.databaseText(fromRFC3339: todo.createdAt)), .timestamp(now),
                       deletedAt(todo), device]
            }
            try db.execute(chunk.sql, values)
        }
        for var todo in todos {
            let isNew = todo.id < 0
            if isNew { todo.id = insertedIDs[todo.id]! }
            transaction.changed(todo, rendered: todo.deletedAt == nil ? body(of: todo) : nil, isNew: isNew)
        }
        byID = [:]
        absentIDs = []
        idByClientKey = [:]
        absentClientKeys = []
        changed = []
        isChanged = []
        hasForgotten = true
    }

    /// A staged todo is deleted by this push if at all (a delete sets `deletedAt` to now).
    private func deletedAt(_ todo: Todo) -> DatabaseValue {
        todo.deletedAt == nil ? .null : .timestamp(transaction.now)
    }

    /// Notes the record of a todo operation's result (rendered at schema version `schema`), so
    /// that the feed row of the same state reuses it.
    func rendered(_ result: PushResult, schema: Int) {
        guard schema == SchemaVersion.current, let id = result.id, id > 0, let version = result.version,
              let record = result.record else { return }
        bodies[id] = (version, record)
    }

    /// The todo's JSON at the current schema version (`Todo.write(to:)`), rendered once per state.
    private func body(of todo: Todo) -> [UInt8] {
        if let known = bodies[todo.id], known.version == todo.version { return known.json }
        var writer = JSONWriter(reservingCapacity: 400)
        todo.write(to: &writer)
        bodies[todo.id] = (todo.version, writer.bytes)
        return writer.bytes
    }

    /// `result` of a todo this push created (its placeholder id, no record yet: `PushResult.result`)
    /// with the id the flush gave it and its record, rendered once; other results as they are.
    func finished(_ result: PushResult, schema: Int) -> PushResult {
        guard let placeholder = result.id, placeholder < 0, let version = result.version,
              var todo = createdStates[version], let id = insertedIDs[placeholder] else { return result }
        todo.id = id
        var finished = result
        finished.id = id
        if schema == SchemaVersion.current {
            finished.record = body(of: todo)
        } else {
            var writer = JSONWriter(reservingCapacity: 400)
            todo.write(to: &writer, schemaVersion: schema)
            finished.record = writer.bytes
        }
        return finished
    }
}
