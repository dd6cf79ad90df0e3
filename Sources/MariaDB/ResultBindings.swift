import CMariaDB

/// How a result column is bound and turned into a ``DatabaseValue``.
struct ColumnLayout: Equatable {
    enum Kind: Equatable {
        /// Any integer type (and YEAR), fetched as LONGLONG.
        case integer(unsigned: Bool)
        /// FLOAT / DOUBLE, fetched as DOUBLE.
        case real
        /// DATE / DATETIME / TIMESTAMP / TIME, fetched as MYSQL_TIME and formatted as text.
        case temporal
        /// Character data, DECIMAL, ENUM/SET, JSON: fetched as STRING.
        case text
        /// Binary character set (BINARY/VARBINARY/BLOB, BIT, GEOMETRY): fetched as BLOB.
        case blob
    }

    let kind: Kind
    let fieldType: UInt32
    let decimals: UInt32
    /// Initial size of the buffer of a text/blob column.
    let initialCapacity: Int

    /// Character set number of `binary`.
    private static let binaryCharset: UInt32 = 63
    /// Text/blob buffers start at the declared width, capped here; longer values take the
    /// `mysql_stmt_fetch_column` path.
    static let maxInitialCapacity = 1024
    /// Buffers grow after a truncation up to this size.
    static let maxAdaptiveCapacity = 64 * 1024

    init(_ field: MYSQL_FIELD) {
        fieldType = field.type.rawValue
        decimals = field.decimals
        let unsigned = field.flags & UInt32(UNSIGNED_FLAG) != 0
        switch field.type {
        case MYSQL_TYPE_TINY, MYSQL_TYPE_SHORT, MYSQL_TYPE_INT24, MYSQL_TYPE_LONG, MYSQL_TYPE_LONGLONG,
            MYSQL_TYPE_YEAR:
            kind = .integer(unsigned: unsigned)
        case MYSQL_TYPE_FLOAT, MYSQL_TYPE_DOUBLE:
            kind = .real
        case MYSQL_TYPE_DATE, MYSQL_TYPE_NEWDATE, MYSQL_TYPE_DATETIME, MYSQL_TYPE_TIMESTAMP, MYSQL_TYPE_TIME:
            kind = .temporal
        case MYSQL_TYPE_DECIMAL, MYSQL_TYPE_NEWDECIMAL, MYSQL_TYPE_NULL:
            kind = .text
        case MYSQL_TYPE_BIT, MYSQL_TYPE_GEOMETRY:
            kind = .blob
        default:
            kind = field.charsetnr == Self.binaryCharset ? .blob : .text
        }
        initialCapacity = min(max(Int(field.length), 16), Self.maxInitialCapacity)
    }

    var bufferType: enum_field_types {
        switch kind {
        case .integer: return MYSQL_TYPE_LONGLONG
        case .real: return MYSQL_TYPE_DOUBLE
        case .temporal: return enum_field_types(rawValue: fieldType)
        case .text: return MYSQL_TYPE_STRING
        case .blob: return MYSQL_TYPE_BLOB
        }
    }
}

/// The `MYSQL_BIND` array and buffers receiving a statement's result columns.
///
/// Built once per statement (rebuilt only if the result's columns change) and reused for
/// every row of every execution: no per-row allocation besides the values themselves.
/// Connector/C writes into these buffers during `mysql_stmt_fetch`, so they never move while
/// a result is being read; buffers that proved too small grow before the next execution.
final class ResultBindings {
    let count: Int
    let layouts: [ColumnLayout]
    let binds: UnsafeMutablePointer<MYSQL_BIND>
    private let lengths: UnsafeMutablePointer<UInt>
    private let nulls: UnsafeMutablePointer<my_bool>
    private let errors: UnsafeMutablePointer<my_bool>
    /// Advanced before every row handed to a `forEachRow` callback and once after the last: a
    /// ``RowCursor`` is valid only while this still equals the value it was made with.
    var rowGeneration: UInt64 = 0
    /// Size wanted for the next execution after a truncation, per column (0: no change).
    private var wantedCapacity: [Int]
    /// Scratch bind for `mysql_stmt_fetch_column`.
    private let columnBind: UnsafeMutablePointer<MYSQL_BIND>
    private let columnLength: UnsafeMutablePointer<UInt>
    private let columnNull: UnsafeMutablePointer<my_bool>
    private let columnError: UnsafeMutablePointer<my_bool>

    init(fields: UnsafePointer<MYSQL_FIELD>, count: Int) {
        self.count = count
        layouts = (0..<count).map { ColumnLayout(fields[$0]) }
        binds = .allocate(capacity: count)
        binds.initialize(repeating: MYSQL_BIND(), count: count)
        lengths = .allocate(capacity: count)
        lengths.initialize(repeating: 0, count: count)
        nulls = .allocate(capacity: count)
        nulls.initialize(repeating: 0, count: count)
        errors = .allocate(capacity: count)
        errors.initialize(repeating: 0, count: count)
        wantedCapacity = Array(repeating: 0, count: count)
        columnBind = .allocate(capacity: 1)
        columnBind.initialize(to: MYSQL_BIND())
        columnLength = .allocate(capacity: 1)
        columnLength.initialize(to: 0)
        columnNull = .allocate(capacity: 1)
        columnNull.initialize(to: 0)
        columnError = .allocate(capacity: 1)
        columnError.initialize(to: 0)
        for index in 0..<count {
            let layout = layouts[index]
            let size: Int
            switch layout.kind {
            case .integer, .real: size = 8
            case .temporal: size = MemoryLayout<MYSQL_TIME>.size
            case .text, .blob: size = layout.initialCapacity
            }
            let bind = binds + index
            bind.pointee.buffer_type = layout.bufferType
            bind.pointee.buffer = .allocate(byteCount: size, alignment: 8)
            bind.pointee.buffer_length = UInt(size)
            bind.pointee.length = lengths + index
            bind.pointee.is_null = nulls + index
            bind.pointee.error = errors + index
            if case .integer(let unsigned) = layout.kind { bind.pointee.is_unsigned = unsigned ? 1 : 0 }
        }
    }

    deinit {
        for index in 0..<count { binds[index].buffer.deallocate() }
        binds.deinitialize(count: count)
        binds.deallocate()
        lengths.deallocate()
        nulls.deallocate()
        errors.deallocate()
        columnBind.deinitialize(count: 1)
        columnBind.deallocate()
        columnLength.deallocate()
        columnNull.deallocate()
        columnError.deallocate()
    }

    /// True when `fields` would be bound exactly like these bindings.
    func matches(fields: UnsafePointer<MYSQL_FIELD>, count: Int) -> Bool {
        guard count == self.count else { return false }
        for index in 0..<count {
            let field = fields[index]
            let layout = layouts[index]
            if field.type.rawValue != layout.fieldType || field.decimals != layout.decimals { return false }
            if ColumnLayout(field).kind != layout.kind { return false }
        }
        return true
    }

    /// Enlarges buffers that truncated values during the previous execution. Only call
    /// between executions (never while a result is being fetched).
    func growBuffers() {
        for index in 0..<count where wantedCapacity[index] > 0 {
            let bind = binds + index
            let size = min(wantedCapacity[index], ColumnLayout.maxAdaptiveCapacity)
            wantedCapacity[index] = 0
            guard size > Int(bind.pointee.buffer_length) else { continue }
            bind.pointee.buffer.deallocate()
            bind.pointee.buffer = .allocate(byteCount: size, alignment: 8)
            bind.pointee.buffer_length = UInt(size)
        }
    }

    /// The value of column `index` of the row just fetched.
    func value(at index: Int, statement: StatementHandle, sql: String) throws(DatabaseError) -> DatabaseValue {
        if nulls[index] != 0 { return .null }
        let bind = binds + index
        let buffer: UnsafeMutableRawPointer = bind.pointee.buffer
        let layout = layouts[index]
        switch layout.kind {
        case .integer(let unsigned):
            let raw = buffer.load(as: Int64.self)
            if unsigned && raw < 0 { return .text(String(UInt64(bitPattern: raw))) }
            return .int(raw)
        case .real:
            return .double(buffer.load(as: Double.self))
        case .temporal:
            let time = buffer.load(as: MYSQL_TIME.self)
            return .text(
                TemporalFormat.string(
                    time, fieldType: enum_field_types(rawValue: layout.fieldType), decimals: layout.decimals))
        case .text:
            let length = Int(lengths[index])
            if length <= Int(bind.pointee.buffer_length) {
                return .text(String(decoding: UnsafeRawBufferPointer(start: buffer, count: length), as: UTF8.self))
            }
            wantedCapacity[index] = max(wantedCapacity[index], length)
            var failure: DatabaseError?
            let text = String(unsafeUninitializedCapacity: length) { target in
                do throws(DatabaseError) {
                    try fetchColumn(index, into: UnsafeMutableRawPointer(target.baseAddress!), length: length,
                        statement: statement, sql: sql)
                    return length
                } catch {
                    failure = error
                    return 0
                }
            }
            if let failure { throw failure }
            return .text(text)
        case .blob:
            let length = Int(lengths[index])
            if length <= Int(bind.pointee.buffer_length) {
                return .blob(Array(UnsafeRawBufferPointer(start: buffer, count: length)))
            }
            wantedCapacity[index] = max(wantedCapacity[index], length)
            var failure: DatabaseError?
            let bytes = [UInt8](unsafeUninitializedCapacity: length) { target, initialized in
                do throws(DatabaseError) {
                    try fetchColumn(index, into: UnsafeMutableRawPointer(target.baseAddress!), length: length,
                        statement: statement, sql: sql)
                    initialized = length
                } catch {
                    failure = error
                    initialized = 0
                }
            }
            if let failure { throw failure }
            return .blob(bytes)
        }
    }

    /// True when column `index` of the row just fetched is NULL.
    func isNull(_ index: Int) -> Bool { nulls[index] != 0 }

    /// Column `index` of an integer column, read in place; nil when NULL, when the column is not
    /// an integer column, or when an unsigned value does not fit in Int64.
    func integer(at index: Int) -> Int64? {
        guard nulls[index] == 0, case .integer(let unsigned) = layouts[index].kind else { return nil }
        let raw = binds[index].buffer.load(as: Int64.self)
        return unsigned && raw < 0 ? nil : raw
    }

    /// Column `index` of a temporal column, read in place; nil when NULL or not temporal.
    func temporal(at index: Int) -> MYSQL_TIME? {
        guard nulls[index] == 0, layouts[index].kind == .temporal else { return nil }
        return binds[index].buffer.load(as: MYSQL_TIME.self)
    }

    /// Calls `body` with the bytes of text/blob column `index` where they lie (a value longer than
    /// its buffer is fetched whole into a temporary buffer first) and returns true; false, without
    /// calling it, when NULL or when the column is not text or blob.
    func withBytes(
        at index: Int, statement: StatementHandle, sql: String, _ body: (UnsafeRawBufferPointer) -> Void
    ) throws(DatabaseError) -> Bool {
        guard nulls[index] == 0 else { return false }
        switch layouts[index].kind {
        case .text, .blob: break
        default: return false
        }
        let bind = binds + index
        let length = Int(lengths[index])
        if length <= Int(bind.pointee.buffer_length) {
            body(UnsafeRawBufferPointer(start: bind.pointee.buffer, count: length))
            return true
        }
        wantedCapacity[index] = max(wantedCapacity[index], length)
        let whole = UnsafeMutableRawBufferPointer.allocate(byteCount: length, alignment: 1)
        defer { whole.deallocate() }
        try fetchColumn(index, into: whole.baseAddress!, length: length, statement: statement, sql: sql)
        body(UnsafeRawBufferPointer(whole))
        return true
    }

    /// Fetches the whole of a truncated column into `target` (`length` bytes).
    private func fetchColumn(
        _ index: Int, into target: UnsafeMutableRawPointer, length: Int, statement: StatementHandle, sql: String
    ) throws(DatabaseError) {
        columnBind.pointee = MYSQL_BIND()
        columnBind.pointee.buffer_type = binds[index].buffer_type
        columnBind.pointee.buffer = target
        columnBind.pointee.buffer_length = UInt(length)
        columnBind.pointee.length = columnLength
        columnBind.pointee.is_null = columnNull
        columnBind.pointee.error = columnError
        if mysql_stmt_fetch_column(statement, columnBind, UInt32(index), 0) != 0 {
            throw DatabaseError.lastError(of: statement, sql: sql)
        }
        guard Int(columnLength.pointee) == length, columnError.pointee == 0 else {
            throw DatabaseError.client(
                UInt32(CR_UNKNOWN_ERROR), "Column \(index) changed length while being fetched", sql: sql)
        }
    }
}
