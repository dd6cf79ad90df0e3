import MariaDB
import TodoSyncCore

/// Column values written from a `RowCursor` straight into JSON bytes (the pieces of
/// `DailyStatRowJSON`, and the splice of stored JSON).
enum RowJSON {
    // Each helper writes `null` for NULL; the schema makes the non-nullable columns NOT NULL.
    // Three column shapes (integer, bytes, date-time), each with the writer of its JSON form.

    /// An integer column, written by `write` (a JSON number by default).
    static func appendInteger(
        _ row: RowCursor, _ column: Int, to bytes: inout [UInt8],
        as write: (Int64, inout [UInt8]) -> Void = JSONWriter.appendDecimal
    ) throws(DatabaseError) {
        guard let value = try row.int64(column) else { return JSONWriter.appendLiteral("null", to: &bytes) }
        write(value, &bytes)
    }

    static func appendBool(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        try appendInteger(row, column, to: &bytes) { value, bytes in
            JSONWriter.appendLiteral(value != 0 ? "true" : "false", to: &bytes)
        }
    }

    /// A number stored as hundredths (`productivityNum`, `center`).
    static func appendHundredths(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        try appendInteger(row, column, to: &bytes, as: JSONWriter.appendHundredths)
    }

    /// A text or binary column, its bytes written by `write`.
    private static func appendBytes(
        _ row: RowCursor, _ column: Int, to bytes: inout [UInt8], as write: (UnsafeRawBufferPointer, inout [UInt8]) -> Void
    ) throws(DatabaseError) {
        let written = try row.withBytes(column) { value in write(value, &bytes) }
        if !written { JSONWriter.appendLiteral("null", to: &bytes) }
    }

    /// A text column as a JSON string. Its bytes are copied as they are: the session is utf8mb4
    /// in strict mode, so text columns only ever hold valid UTF-8 (use it for text columns only).
    static func appendText(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        try appendBytes(row, column, to: &bytes) { utf8, bytes in JSONWriter.appendQuoted(utf8: utf8, to: &bytes) }
    }

    /// A column that holds JSON already (stored canonical), spliced as it is.
    static func appendStoredJSON(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        try appendBytes(row, column, to: &bytes) { json, bytes in bytes.append(contentsOf: json) }
    }

    /// A DATE column as `"YYYY-MM-DD"`.
    static func appendDay(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        guard let date = row.dateTime(column) else { return JSONWriter.appendLiteral("null", to: &bytes) }
        JSONWriter.appendQuotedDay(year: date.year, month: date.month, day: date.day, to: &bytes)
    }

    /// A DATETIME(3) column as RFC 3339 with milliseconds, UTC.
    static func appendTimestamp(_ row: RowCursor, _ column: Int, to bytes: inout [UInt8]) throws(DatabaseError) {
        guard let time = row.dateTime(column) else { return JSONWriter.appendLiteral("null", to: &bytes) }
        JSONWriter.appendQuotedTimestamp(
            year: time.year, month: time.month, day: time.day, hour: time.hour, minute: time.minute,
            second: time.second, millisecond: time.microsecond / 1000, to: &bytes)
    }

    /// `"version":…,"createdAt":…,"updatedAt":…,"deletedAt":…}`: the fields every synced record
    /// ends with (as `JSONWriter.syncFields` writes them), then the record's closing brace.
    static func appendSyncFieldsAndClose(
        _ row: RowCursor, version: Int, createdAt: Int, updatedAt: Int, deletedAt: Int, to bytes: inout [UInt8]
    ) throws(DatabaseError) {
        JSONWriter.appendLiteral(#""version":"#, to: &bytes)
        try appendInteger(row, version, to: &bytes)
        JSONWriter.appendLiteral(#","createdAt":"#, to: &bytes)
        try appendTimestamp(row, createdAt, to: &bytes)
        JSONWriter.appendLiteral(#","updatedAt":"#, to: &bytes)
        try appendTimestamp(row, updatedAt, to: &bytes)
        JSONWriter.appendLiteral(#","deletedAt":"#, to: &bytes)
        try appendTimestamp(row, deletedAt, to: &bytes)
        JSONWriter.appendLiteral("}", to: &bytes)
    }

    /// Runs `append` as the next value of `writer`, surfacing its error after the fact (`splice`
    /// takes a non-throwing closure).
    static func write(
        to writer: inout JSONWriter, _ append: (inout [UInt8]) throws(DatabaseError) -> Void
    ) throws(DatabaseError) {
        var failure: DatabaseError?
        writer.splice { bytes in
            do throws(DatabaseError) {
                try append(&bytes)
            } catch {
                failure = error  // the whole response fails; its partial bytes are never sent
            }
        }
        if let failure { throw failure }
    }
}

/// Rows of `SQL.DailyStats.columns` written straight into the contract's DailyStat object, byte
/// for byte what `DailyStat(row:)` then `DailyStat.write(to:)` produce (`RowJSONTests`).
enum DailyStatRowJSON {
    /// Column positions in `SQL.DailyStats.columns`.
    private typealias Column = DailyStatColumn

    /// Writes the row as the next value of `writer`.
    static func write(_ row: RowCursor, to writer: inout JSONWriter) throws(DatabaseError) {
        try RowJSON.write(to: &writer) { bytes throws(DatabaseError) in try appendRecord(row, to: &bytes) }
    }

    /// Appends the contract's DailyStat object.
    static func appendRecord(_ row: RowCursor, to bytes: inout [UInt8]) throws(DatabaseError) {
        JSONWriter.appendLiteral(#"{"id":"#, to: &bytes)
        try RowJSON.appendInteger(row, Column.id.index, to: &bytes)
        JSONWriter.appendLiteral(#","date":"#, to: &bytes)
        try RowJSON.appendDay(row, Column.day.index, to: &bytes)
        JSONWriter.appendLiteral(#","todoCount":"#, to: &bytes)
        try RowJSON.appendInteger(row, Column.todoCount.index, to: &bytes)
        JSONWriter.appendLiteral(#","completedCount":"#, to: &bytes)
        try RowJSON.appendInteger(row, Column.completedCount.index, to: &bytes)
        JSONWriter.appendLiteral(#","productivityNum":"#, to: &bytes)
        try RowJSON.appendHundredths(row, Column.productivityHundredths.index, to: &bytes)
        JSONWriter.appendLiteral(#","balance":{"num":"#, to: &bytes)
        let balance = try row.int64(Column.balanceNum.index)
        if let balance { JSONWriter.appendDecimal(balance, to: &bytes) } else { JSONWriter.appendLiteral("null", to: &bytes) }
        let text = DailyStatContent.balanceText(num: Int(balance ?? 50))
        JSONWriter.appendLiteral(#","title":"#, to: &bytes)
        JSONWriter.appendQuoted(text.title, to: &bytes)
        JSONWriter.appendLiteral(#","message":"#, to: &bytes)
        JSONWriter.appendQuoted(text.message, to: &bytes)
        JSONWriter.appendLiteral(#"},"tagStats":"#, to: &bytes)
        try RowJSON.appendStoredJSON(row, Column.tagStats.index, to: &bytes)
        JSONWriter.appendLiteral(#","center":{"x":"#, to: &bytes)
        try RowJSON.appendHundredths(row, Column.centerXHundredths.index, to: &bytes)
        JSONWriter.appendLiteral(#","y":"#, to: &bytes)
        try RowJSON.appendHundredths(row, Column.centerYHundredths.index, to: &bytes)
        JSONWriter.appendLiteral("},", to: &bytes)
        try RowJSON.appendSyncFieldsAndClose(
            row, version: Column.version.index, createdAt: Column.createdAt.index, updatedAt: Column.updatedAt.index,
            deletedAt: Column.deletedAt.index, to: &bytes)
    }
}
