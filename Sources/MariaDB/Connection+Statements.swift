extension Connection {
    /// Runs a statement that returns no rows (INSERT, UPDATE, DELETE, DDL) as a cached
    /// prepared statement. Rows it returns anyway are read and dropped.
    ///
    /// Outside a transaction it is retried on a new connection only when the server cannot
    /// have applied it (see ``Connection``).
    /// - Parameters:
    ///   - sql: SQL with `?` placeholders; never splice values into it.
    ///   - parameters: one value per placeholder.
    @discardableResult
    public func execute(_ sql: String, _ parameters: [DatabaseValue] = []) throws -> ExecutionResult {
        try withStatement(sql, isQuery: false) { statement throws(DatabaseError) in
            try statement.execute(parameters)
            var ignored: [DatabaseValue] = []
            _ = try statement.readResults(into: &ignored, rowLimit: 0)
            return statement.executionResult
        }
    }

    /// Runs a statement and returns all its rows. A SELECT (or SHOW, WITH, …) outside a
    /// transaction is retried once on a new connection if the connection was lost.
    /// - Parameters:
    ///   - sql: SQL with `?` placeholders; never splice values into it.
    ///   - parameters: one value per placeholder.
    public func query(_ sql: String, _ parameters: [DatabaseValue] = []) throws -> [Row] {
        try withStatement(sql, isQuery: true) { statement throws(DatabaseError) in
            try statement.execute(parameters)
            var values: [DatabaseValue] = []
            values.reserveCapacity(statement.lastRowCount * statement.lastColumnCount)
            let (columns, rows) = try statement.readResults(into: &values, rowLimit: .max)
            statement.lastRowCount = min(rows, 4096)
            statement.lastColumnCount = columns
            return Self.rows(from: values, columns: columns, rows: rows)
        }
    }

    /// Runs a statement and returns its first row, or nil when it returns none (any further
    /// rows are read and dropped: add `LIMIT 1` when more could match).
    public func queryOne(_ sql: String, _ parameters: [DatabaseValue] = []) throws -> Row? {
        try withStatement(sql, isQuery: true) { statement throws(DatabaseError) in
            try statement.execute(parameters)
            var values: [DatabaseValue] = []
            let (columns, rows) = try statement.readResults(into: &values, rowLimit: 1)
            guard rows > 0, columns > 0 else { return nil }
            return Row(storage: values[0..<columns])
        }
    }

    /// Runs a statement and calls `body` with each row while it sits in the bind buffers, without
    /// building ``Row``s: for hot read paths that write rows straight into a response. Returns the
    /// number of rows. If `body` throws, the remaining rows are read and dropped and the error is
    /// rethrown. `body` must not run statements on this connection.
    ///
    /// Retried on a new connection like ``query(_:_:)`` when the connection is lost, but once rows
    /// have reached `body` only if `restart` is given: it is called first and must undo what
    /// `body` did with them (the rows then arrive again from the first).
    @discardableResult
    public func forEachRow(
        _ sql: String, _ parameters: [DatabaseValue] = [], restart: (() -> Void)? = nil,
        _ body: (RowCursor) throws(DatabaseError) -> Void
    ) throws -> Int {
        var delivered = false
        return try withStatement(sql, isQuery: true, mayRepeat: { !delivered || restart != nil }) {
            statement throws(DatabaseError) in
            if delivered {
                restart?()
                delivered = false
            }
            try statement.execute(parameters)
            isStreamingRows = true
            defer { isStreamingRows = false }
            let (_, rows) = try statement.readResults(rowLimit: .max) { bindings throws(DatabaseError) in
                delivered = true
                try body(RowCursor(bindings: bindings, statement: statement.handle, sql: statement.sql))
            }
            return rows
        }
    }

    /// `execute(_:_:)` with Swift values: `[userID, name, nil as String?]`.
    @discardableResult
    @_disfavoredOverload
    public func execute(_ sql: String, _ parameters: [(any DatabaseValueConvertible)?]) throws -> ExecutionResult {
        try execute(sql, parameters.databaseValues)
    }

    /// `query(_:_:)` with Swift values: `[userID, name, nil as String?]`.
    @_disfavoredOverload
    public func query(_ sql: String, _ parameters: [(any DatabaseValueConvertible)?]) throws -> [Row] {
        try query(sql, parameters.databaseValues)
    }

    /// `queryOne(_:_:)` with Swift values: `[userID, name, nil as String?]`.
    @_disfavoredOverload
    public func queryOne(_ sql: String, _ parameters: [(any DatabaseValueConvertible)?]) throws -> Row? {
        try queryOne(sql, parameters.databaseValues)
    }

    /// Splits the values of a result (row after row) into rows sharing one buffer.
    private static func rows(from values: [DatabaseValue], columns: Int, rows count: Int) -> [Row] {
        guard columns > 0, count > 0 else { return [] }
        var rows: [Row] = []
        rows.reserveCapacity(count)
        var start = 0
        for _ in 0..<count {
            rows.append(Row(storage: values[start..<(start + columns)]))
            start += columns
        }
        return rows
    }
}
