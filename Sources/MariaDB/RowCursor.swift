import CMariaDB

/// The row just fetched by ``Connection/forEachRow(_:_:_:)``, read in place from the statement's
/// bind buffers: nothing is allocated for a column unless a caller asks for a `String` or
/// ``DatabaseValue``. For hot read paths that turn rows straight into response bytes.
///
/// Valid only inside the callback that received it (the next fetch overwrites the buffers);
/// copy out whatever must outlive it. Using it afterwards, or with a column index out of range,
/// traps. The callback must not run statements on the same connection (that traps too).
public struct RowCursor {
    let bindings: ResultBindings
    let statement: StatementHandle
    let sql: String
    /// `bindings.rowGeneration` when this cursor was handed out.
    let generation: UInt64

    init(bindings: ResultBindings, statement: StatementHandle, sql: String) {
        self.bindings = bindings
        self.statement = statement
        self.sql = sql
        generation = bindings.rowGeneration
    }

    /// Traps unless the cursor is still on its row and `i` is a column.
    private func check(_ i: Int) {
        precondition(bindings.rowGeneration == generation, "RowCursor used outside its forEachRow callback")
        precondition(i >= 0 && i < bindings.count, "column index out of range")
    }

    /// Number of columns.
    public var count: Int { bindings.count }

    /// True when column `i` is NULL.
    public func isNull(_ i: Int) -> Bool {
        check(i)
        return bindings.isNull(i)
    }

    /// Column `i` as a 64-bit integer; nil when NULL or not an integer (the same conversions as
    /// ``Row/int64(_:)``; integer columns are read without any conversion).
    public func int64(_ i: Int) throws(DatabaseError) -> Int64? {
        check(i)
        if let value = bindings.integer(at: i) { return value }
        if isNull(i) { return nil }
        return Row([try value(i)]).int64(0)
    }

    /// Column `i` as a boolean (nonzero integer is true); nil when NULL or not an integer.
    public func bool(_ i: Int) throws(DatabaseError) -> Bool? {
        try int64(i).map { $0 != 0 }
    }

    /// Calls `body` with the UTF-8 bytes of text column `i` (or the bytes of a binary column)
    /// where they lie, and returns true; returns false without calling it when the value is NULL.
    /// Other column kinds are passed in their text form. (Not generic: called across modules on
    /// hot paths, where an unspecialised generic would cost a metadata lookup per call.)
    public func withBytes(_ i: Int, _ body: (UnsafeRawBufferPointer) -> Void) throws(DatabaseError) -> Bool {
        check(i)
        if try bindings.withBytes(at: i, statement: statement, sql: sql, body) { return true }
        if isNull(i) { return false }
        guard var text = Row([try value(i)]).string(0) else { return false }
        text.withUTF8 { body(UnsafeRawBufferPointer($0)) }
        return true
    }

    /// Column `i` of a DATE, DATETIME or TIMESTAMP column as its parts; nil when NULL or not a
    /// temporal column.
    public func dateTime(_ i: Int) -> DateTimeParts? {
        check(i)
        return bindings.temporal(at: i).map(DateTimeParts.init)
    }

    /// Column `i` as a ``DatabaseValue`` (allocates for text and blobs, like ``Connection/query(_:_:)``).
    public func value(_ i: Int) throws(DatabaseError) -> DatabaseValue {
        check(i)
        return try bindings.value(at: i, statement: statement, sql: sql)
    }
}

/// The fields of a DATE, DATETIME or TIMESTAMP value as the server sent them (no time zone
/// applied; a DATE has a zero time).
public struct DateTimeParts: Sendable, Equatable {
    public var year: Int
    public var month: Int
    public var day: Int
    public var hour: Int
    public var minute: Int
    public var second: Int
    public var microsecond: Int

    public init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0, microsecond: Int = 0) {
        self.year = year
        self.month = month
        self.day = day
        self.hour = hour
        self.minute = minute
        self.second = second
        self.microsecond = microsecond
    }

    init(_ time: MYSQL_TIME) {
        self.init(
            year: Int(time.year), month: Int(time.month), day: Int(time.day), hour: Int(time.hour),
            minute: Int(time.minute), second: Int(time.second), microsecond: Int(time.second_part))
    }
}
