import CSystemSQLite

/// A failure reported by SQLite.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }
}

/// The few calls of the system SQLite the server needs to write a snapshot file
/// (docs/SNAPSHOT.md): open, run statements, insert rows through prepared statements, close.
/// One connection, used by one thread.
public final class SQLiteDatabase {
    private var handle: OpaquePointer?

    /// Opens (creating) the database file at `path`.
    public init(path: String) throws {
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let rc = sqlite3_open_v2(path, &handle, flags, nil)
        guard rc == SQLITE_OK else {
            let error = SQLiteError(code: rc, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "open failed")
            sqlite3_close_v2(handle)
            handle = nil
            throw error
        }
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let rc = sqlite3_exec(handle, sql, nil, nil, &message)
        guard rc == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "error"
            sqlite3_free(message)
            throw SQLiteError(code: rc, message: text)
        }
    }

    /// A prepared statement of this database.
    public func prepare(_ sql: String) throws -> SQLiteStatement {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw lastError(rc) }
        return SQLiteStatement(statement, database: self)
    }

    /// The first column of the first row of a query (nil when it returns no row or NULL).
    public func queryInt64(_ sql: String) throws -> Int64? {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v2(handle, sql, -1, &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw lastError(rc) }
        defer { sqlite3_finalize(statement) }
        switch sqlite3_step(statement) {
        case SQLITE_ROW: return sqlite3_column_type(statement, 0) == SQLITE_NULL ? nil : sqlite3_column_int64(statement, 0)
        case SQLITE_DONE: return nil
        case let step: throw lastError(step)
        }
    }

    func lastError(_ rc: Int32) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// The library's version, e.g. "3.40.1".
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}

/// A prepared statement that returns no rows, run once per set of bound parameters.
public final class SQLiteStatement {
    private let statement: OpaquePointer
    private let database: SQLiteDatabase

    init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit { sqlite3_finalize(statement) }

    private static let empty: StaticString = ""
    /// SQLite copies the bytes before the bind returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    /// Binds an integer to parameter `index` (1-based).
    public func bind(_ index: Int32, int64 value: Int64) throws {
        try check(sqlite3_bind_int64(statement, index, value))
    }

    /// Binds a floating-point number to parameter `index`.
    public func bind(_ index: Int32, double value: Double) throws {
        try check(sqlite3_bind_double(statement, index, value))
    }

    /// Binds NULL to parameter `index`.
    public func bindNull(_ index: Int32) throws {
        try check(sqlite3_bind_null(statement, index))
    }

    /// Binds UTF-8 text to parameter `index`. With `copying: false` SQLite keeps only the pointer
    /// (`SQLITE_STATIC`): the bytes must stay where they are until ``step()`` has returned.
    public func bind(_ index: Int32, text value: UnsafeRawBufferPointer, copying: Bool) throws {
        let bytes = (value.baseAddress ?? UnsafeRawPointer(Self.empty.utf8Start)).assumingMemoryBound(to: CChar.self)
        try check(sqlite3_bind_text(statement, index, bytes, Int32(value.count), copying ? Self.transient : nil))
    }

    /// Runs the statement with the parameters bound so far (it must return no rows), then resets
    /// it for the next run; the bindings stay until bound again. A text bound with `copying:
    /// false` stays bound as a pointer after this returns: rebind every such parameter before the
    /// next run, as the snapshot's row writer does for every column of every row.
    public func step() throws {
        let rc = sqlite3_step(statement)
        sqlite3_reset(statement)
        guard rc == SQLITE_DONE else { throw database.lastError(rc) }
    }

    private func check(_ rc: Int32) throws {
        guard rc == SQLITE_OK else { throw database.lastError(rc) }
    }

    /// Binds `values` (UTF-8 text, copied by SQLite; nil: NULL) to parameters 1… and runs the statement.
    public func run(text values: [UnsafeRawBufferPointer?]) throws {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            if let value { try bind(index, text: value, copying: true) } else { try bindNull(index) }
        }
        try step()
    }
}
