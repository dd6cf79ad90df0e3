import CSystemSQLite

/// A failure reported by SQLite.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }
}

/// The few calls of the system SQLite the server needs to write a snapshot file
/// (docs/SNAPSHOT.md): open, run statements, insert rows through one prepared statement, close.
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

    func lastError(_ rc: Int32) -> SQLiteError {
        SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// The library's version, e.g. "3.40.1".
    public static var libraryVersion: String { String(cString: sqlite3_libversion()) }
}

/// A prepared statement that returns no rows, run once per set of bound text parameters.
public final class SQLiteStatement {
    private let statement: OpaquePointer
    private let database: SQLiteDatabase

    init(_ statement: OpaquePointer, database: SQLiteDatabase) {
        self.statement = statement
        self.database = database
    }

    deinit { sqlite3_finalize(statement) }

    private static let empty: StaticString = ""

    /// Binds `values` (UTF-8 text, copied by SQLite; nil: NULL) to parameters 1… and runs the statement.
    public func run(text values: [UnsafeRawBufferPointer?]) throws {
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            if let value {
                // SQLITE_TRANSIENT: SQLite copies the bytes before this returns.
                let bytes = value.baseAddress ?? UnsafeRawPointer(Self.empty.utf8Start)
                rc = sqlite3_bind_text(statement, index, bytes.assumingMemoryBound(to: CChar.self),
                                       Int32(value.count), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
            } else {
                rc = sqlite3_bind_null(statement, index)
            }
            guard rc == SQLITE_OK else { throw database.lastError(rc) }
        }
        let rc = sqlite3_step(statement)
        guard rc == SQLITE_DONE else { throw database.lastError(rc) }
    }
}
