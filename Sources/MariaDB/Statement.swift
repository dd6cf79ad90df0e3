import CMariaDB

/// A server-side prepared statement, owned by one ``Connection`` and cached by SQL text.
///
/// Owns its `MYSQL_STMT` (closed in `deinit`) and the bind buffers for parameters and result
/// columns, which are reused by every execution.
final class Statement {
    let sql: String
    let handle: StatementHandle
    let parameterCount: Int
    /// True when the SQL starts with SELECT, SHOW, WITH, VALUES, DESCRIBE or EXPLAIN: running it
    /// twice after a lost connection is harmless.
    let isReadOnly: Bool
    /// Tick of the last use, for least-recently-used eviction.
    var lastUsed: UInt64 = 0
    /// Rows returned by the previous execution (capacity hint for the next one).
    var lastRowCount = 0
    /// Columns returned by the previous execution (capacity hint for the next one).
    var lastColumnCount = 0

    private let parameters: ParameterBindings
    private var results: ResultBindings?

    /// Prepares `sql` on `mysql`.
    init(sql: String, connection mysql: MySQLHandle) throws(DatabaseError) {
        guard let handle = mysql_stmt_init(mysql) else {
            throw DatabaseError.lastError(of: mysql, sql: sql)
        }
        let length = UInt(sql.utf8.count)
        let status = sql.withCString { mysql_stmt_prepare(handle, $0, length) }
        if status != 0 {
            let error = DatabaseError.lastError(of: handle, sql: sql)
            mysql_stmt_close(handle)
            throw error
        }
        self.sql = sql
        self.handle = handle
        parameterCount = Int(mysql_stmt_param_count(handle))
        parameters = ParameterBindings(count: parameterCount)
        isReadOnly = Self.isReadOnly(sql)
    }

    deinit {
        // After mysql_close the handle is detached from its connection and this only frees it.
        mysql_stmt_close(handle)
    }

    /// Binds `values` and executes. The result set, if any, must then be read with one of the
    /// `readResults` methods before the connection runs anything else.
    func execute(_ values: [DatabaseValue]) throws(DatabaseError) {
        guard values.count == parameterCount else {
            throw DatabaseError.client(
                UInt32(CR_PARAMS_NOT_BOUND),
                "Statement has \(parameterCount) parameter(s) but \(values.count) value(s) were given",
                sql: sql)
        }
        if parameterCount > 0 {
            parameters.bind(values)
            if mysql_stmt_bind_param(handle, parameters.binds) != 0 {
                throw DatabaseError.lastError(of: handle, sql: sql)
            }
        }
        if mysql_stmt_execute(handle) != 0 {
            throw DatabaseError.lastError(of: handle, sql: sql)
        }
    }

    /// Affected rows and insert id of the last execution.
    var executionResult: ExecutionResult {
        ExecutionResult(affectedRows: mysql_stmt_affected_rows(handle), lastInsertID: mysql_stmt_insert_id(handle))
    }

    /// Reads everything the last execution returned: up to `rowLimit` rows of the first result
    /// set are appended to `values` (row after row), the rest and any further result sets (CALL)
    /// are read and dropped. Returns the column count of the first result set (0: no rows) and
    /// the number of rows it had.
    func readResults(into values: inout [DatabaseValue], rowLimit: Int) throws(DatabaseError) -> (
        columns: Int, rows: Int
    ) {
        try readResults(rowLimit: rowLimit) { bindings throws(DatabaseError) in
            for index in 0..<bindings.count {
                values.append(try bindings.value(at: index, statement: handle, sql: sql))
            }
        }
    }

    /// Reads everything the last execution returned, calling `onRow` for each of the first
    /// `rowLimit` rows of the first result set while that row sits in the bind buffers; the rest
    /// and any further result sets are read and dropped. If `onRow` throws, the remaining rows are
    /// still read (the connection stays usable) and the error is rethrown. Returns the column
    /// count of the first result set (0: no rows) and the number of rows it had.
    func readResults(rowLimit: Int, onRow: (ResultBindings) throws(DatabaseError) -> Void) throws(DatabaseError)
        -> (columns: Int, rows: Int)
    {
        var first: (columns: Int, rows: Int)? = nil
        while true {
            let fieldCount = Int(mysql_stmt_field_count(handle))
            if fieldCount > 0 {
                let bindings = try bindResult()
                let limit = first == nil ? rowLimit : 0
                let rows = try fetchRows(bindings, rowLimit: limit, onRow: onRow)
                if first == nil { first = (fieldCount, rows) }
            }
            if mysql_stmt_more_results(handle) == 0 { break }
            let status = mysql_stmt_next_result(handle)
            if status > 0 { throw DatabaseError.lastError(of: handle, sql: sql) }
            if status < 0 { break }
        }
        return first ?? (0, 0)
    }

    /// Binds result buffers matching the current result set's columns.
    private func bindResult() throws(DatabaseError) -> ResultBindings {
        guard let metadata = mysql_stmt_result_metadata(handle) else {
            throw DatabaseError.lastError(of: handle, sql: sql)
        }
        defer { mysql_free_result(metadata) }
        let count = Int(mysql_num_fields(metadata))
        guard let fields = mysql_fetch_fields(metadata) else {
            throw DatabaseError.client(UInt32(CR_NO_STMT_METADATA), "Result has no column metadata", sql: sql)
        }
        let bindings: ResultBindings
        if let existing = results, existing.matches(fields: fields, count: count) {
            existing.growBuffers()
            bindings = existing
        } else {
            bindings = ResultBindings(fields: fields, count: count)
            results = bindings
        }
        if mysql_stmt_bind_result(handle, bindings.binds) != 0 {
            throw DatabaseError.lastError(of: handle, sql: sql)
        }
        return bindings
    }

    private func fetchRows(
        _ bindings: ResultBindings, rowLimit: Int, onRow: (ResultBindings) throws(DatabaseError) -> Void
    ) throws(DatabaseError) -> Int {
        var rows = 0
        var rowFailure: DatabaseError?
        while true {
            let status = mysql_stmt_fetch(handle)
            if status == MYSQL_NO_DATA { break }
            if status != 0 && status != MYSQL_DATA_TRUNCATED {
                let error = DatabaseError.lastError(of: handle, sql: sql)
                // A session killed (or a socket broken) while rows stream in surfaces here as a bare
                // "unknown error": the protocol state is lost, so report it as the lost connection
                // it is, and the connection is rebuilt (and a read retried where allowed).
                if error.code == UInt32(CR_UNKNOWN_ERROR) {
                    throw DatabaseError.client(
                        UInt32(CR_SERVER_LOST), "Lost connection while reading a result (\(error.message))", sql: sql)
                }
                throw error
            }
            if rows < rowLimit && rowFailure == nil {
                bindings.rowGeneration &+= 1
                do throws(DatabaseError) {
                    try onRow(bindings)
                } catch {
                    // Keep reading so that the connection stays in sync, then report.
                    rowFailure = error
                }
            }
            rows += 1
        }
        bindings.rowGeneration &+= 1  // cursors on the last row are dead from here
        if let rowFailure { throw rowFailure }
        return rows
    }

    /// Leading keyword check behind ``isReadOnly``.
    static func isReadOnly(_ sql: String) -> Bool {
        var keyword: [UInt8] = []
        for byte in sql.utf8 {
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "("):
                if keyword.isEmpty { continue }
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                keyword.append(byte - 32)
                if keyword.count <= 8 { continue }
            case UInt8(ascii: "A")...UInt8(ascii: "Z"):
                keyword.append(byte)
                if keyword.count <= 8 { continue }
            default:
                break
            }
            break
        }
        switch String(decoding: keyword, as: UTF8.self) {
        case "SELECT", "SHOW", "WITH", "VALUES", "DESC", "DESCRIBE", "EXPLAIN": return true
        default: return false
        }
    }
}
