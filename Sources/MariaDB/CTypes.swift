import CMariaDB

/// Connector/C's connection handle (`MYSQL *`), owned by ``Connection``.
typealias MySQLHandle = UnsafeMutablePointer<MYSQL>

/// Connector/C's prepared statement handle (`MYSQL_STMT *`), owned by ``Statement``.
typealias StatementHandle = UnsafeMutablePointer<MYSQL_STMT>

extension DatabaseError {
    /// The last error of a connection handle.
    static func lastError(of mysql: MySQLHandle, sql: String?, isConnectFailure: Bool = false) -> DatabaseError {
        make(
            code: mysql_errno(mysql), sqlState: mysql_sqlstate(mysql), message: mysql_error(mysql),
            sql: sql, isConnectFailure: isConnectFailure)
    }

    /// The last error of a statement handle.
    static func lastError(of statement: StatementHandle, sql: String) -> DatabaseError {
        make(
            code: mysql_stmt_errno(statement), sqlState: mysql_stmt_sqlstate(statement),
            message: mysql_stmt_error(statement), sql: sql, isConnectFailure: false)
    }

    /// An error detected on the client side, outside Connector/C.
    static func client(_ code: UInt32, _ message: String, sql: String?) -> DatabaseError {
        DatabaseError(code: code, sqlState: "HY000", message: message, sql: sql, isConnectFailure: false)
    }

    private static func make(
        code: UInt32, sqlState: UnsafePointer<CChar>?, message: UnsafePointer<CChar>?, sql: String?,
        isConnectFailure: Bool
    ) -> DatabaseError {
        let state = sqlState.map { String(cString: $0) } ?? ""
        let text = message.map { String(cString: $0) } ?? ""
        return DatabaseError(
            code: code == 0 ? UInt32(CR_UNKNOWN_ERROR) : code,
            sqlState: state.isEmpty ? "HY000" : state,
            message: text.isEmpty ? "Unknown error" : text,
            sql: sql, isConnectFailure: isConnectFailure)
    }
}
