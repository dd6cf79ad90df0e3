import MariaDB
import TodoSyncCore

/// Rows of `SQL.Todos.columns` written straight from the bind buffers into response JSON, with no
/// `Todo`, `String` or `DatabaseValue` in between: the hot path of `GET /todos` and of pull pages,
/// where turning each column into a Swift value and then into JSON cost about as much again as
/// the JSON itself. The output is byte for byte what `Todo.write(to:)` and the pull's tombstone
/// writer produce for `Todo(row:)` of the same row (`TodoRowJSONTests` holds them to it).
enum TodoRowJSON {
    /// Column positions in `SQL.Todos.columns`.
    private enum Column {
        static let id = 0, clientID = 1, title = 2, raw = 3, isImportant = 4, isLife = 5, tagID = 6
        static let difficulty = 7, estimatedTime = 8, deadline = 9, isCompleted = 10, version = 11
        static let createdAt = 12, updatedAt = 13, deletedAt = 14
    }

    /// True when the row is a tombstone.
    static func isDeleted(_ row: RowCursor) -> Bool { !row.isNull(Column.deletedAt) }

    /// The row's tag id, if any.
    static func tagID(_ row: RowCursor) throws(DatabaseError) -> Int64? { try row.int64(Column.tagID) }

    /// Writes the row as the next value of `writer`: the contract's Todo object, or with
    /// `asTombstone` the tombstone object.
    static func write(_ row: RowCursor, asTombstone: Bool = false, to writer: inout JSONWriter) throws(DatabaseError) {
        var failure: DatabaseError?
        writer.splice { bytes in
            do throws(DatabaseError) {
                if asTombstone { try appendTombstone(row, to: &bytes) } else { try appendRecord(row, to: &bytes) }
            } catch {
                failure = error  // the whole response fails; its partial bytes are never sent
            }
        }
        if let failure { throw failure }
    }

    /// Appends the contract's Todo object.
    static func appendRecord(_ row: RowCursor, to bytes: inout [UInt8]) throws(DatabaseError) {
        JSONWriter.appendLiteral(#"{"id":"#, to: &bytes)
        try appendInteger(row, Column.id, to: &bytes)
        JSONWriter.appendLiteral(#","clientId":"#, to: &bytes)
        try appendText(row, Column.clientID, to: &bytes)
        JSONWriter.appendLiteral(#","title":"#, to: &bytes)
        try appendText(row, Column.title, to: &bytes)
        JSONWriter.appendLiteral(#","raw":"#, to: &bytes)
        try appendText(row, Column.raw, to: &bytes)
        JSONWriter.appendLiteral(#","isImportant":"#, to: &bytes)
        try appendBool(row, Column.isImportant, to: &bytes)
        JSONWriter.appendLiteral(#","isLife":"#, to: &bytes)
        try appendBool(row, Column.isLife, to: &bytes)
        JSONWriter.appendLiteral(#","tagId":"#, to: &bytes)
        try appendInteger(row, Column.tagID, to: &bytes)
        JSONWriter.appendLiteral(#","difficulty":"#, to: &bytes)
        try appendInteger(row, Column.difficulty, to: &bytes)
        JSONWriter.appendLiteral(#","estimatedTime":"#, to: &bytes)
        try appendInteger(row, Column.estimatedTime, to: &bytes)
        JSONWriter.appendLiteral(#","deadline":"#, to: &bytes)
        try appendDay(row, Column.deadline, to: &bytes)
        JSONWriter.appendLiteral(#","isCompleted":"#, to: &bytes)
        try appendBool(row, Column.isCompleted, to: &bytes)
        JSONWriter.appendLiteral(#","version":"#, to: &bytes)
        try appendInteger(row, Column.version, to: &bytes)
        JSONWriter.appendLiteral(#","createdAt":"#, to: &bytes)
        try appendTimestamp(row, Column.createdAt, to: &bytes)
        JSONWriter.appendLiteral(#","updatedAt":"#, to: &bytes)
        try appendTimestamp(row, Column.updatedAt, to: &bytes)
        JSONWriter.appendLiteral(#","deletedAt":"#, to: &bytes)
        try appendTimestamp(row, Column.deletedAt, to: &bytes)
        JSONWriter.appendLiteral("}", to: &bytes)
    }

    /// Appends the contract's tombstone object: `{"id","clientId","version","deletedAt"}`.
    static func appendTombstone(_ row: RowCursor, to bytes: inout [UInt8]) throws(DatabaseError) {
        JSONWriter.appendLiteral(#"{"id":"#, to: &bytes)
        try appendInteger(row, Column.id, to: &bytes)
        JSONWriter.appendLiteral(#","clientId":"#, to: &bytes)
        try appendText(row, Column.clientID, to: &bytes)
        JSONWriter.appendLiteral(#","version":"#, to: &bytes)
        try appendInteger(row, Column.version, to: &bytes)
        JSONWriter.appendLiteral(#","deletedAt":"#, to: &bytes)
        try appendTimestamp(row, Column.deletedAt, to: &bytes)
        JSONWriter.appendLiteral("}", to: &bytes)
    }

    // Each helper writes `null` for NULL; the schema makes the non-nullable columns NOT NULL.

    private static func appendInteger(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        if let value = try row.int64(column) {
            JSONWriter.appendDecimal(value, to: &bytes)
        } else {
            JSONWriter.appendLiteral("null", to: &bytes)
        }
    }

    private static func appendBool(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        if let value = try row.bool(column) {
            JSONWriter.appendLiteral(value ? "true" : "false", to: &bytes)
        } else {
            JSONWriter.appendLiteral("null", to: &bytes)
        }
    }

    private static func appendText(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        let written = try row.withBytes(column) { utf8 in JSONWriter.appendQuoted(utf8: utf8, to: &bytes) }
        if !written { JSONWriter.appendLiteral("null", to: &bytes) }
    }

    private static func appendDay(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        guard let date = row.dateTime(column) else { return JSONWriter.appendLiteral("null", to: &bytes) }
        JSONWriter.appendQuotedDay(year: date.year, month: date.month, day: date.day, to: &bytes)
    }

    private static func appendTimestamp(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        guard let time = row.dateTime(column) else { return JSONWriter.appendLiteral("null", to: &bytes) }
        JSONWriter.appendQuotedTimestamp(
            year: time.year, month: time.month, day: time.day, hour: time.hour, minute: time.minute,
            second: time.second, millisecond: time.microsecond / 1000, to: &bytes)
    }
}
