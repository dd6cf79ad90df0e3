#if canImport(Glibc)
import Glibc
#endif
import SystemSQLite
import TodoSyncCore

/// Writes records into one table of a snapshot file (docs/SNAPSHOT.md): each record's JSON, as the
/// change feed holds it rendered, is taken apart where it lies (`JSONMemberFilter.forEachMember`)
/// and every member bound to its column with the page's type mapping: integers and booleans
/// INTEGER, decimals REAL, strings their unescaped text, objects and arrays their JSON text,
/// `null` and absent members NULL. The same values SQLite's `json_extract` gives (held to it by
/// `SnapshotFileTests`), without SQLite parsing the record once per column: that was most of a
/// build's CPU.
///
/// Also notes whether the rows came in increasing `id` order: then the table's B-tree was only
/// ever appended to, and is as compact as `VACUUM` would write it.
final class SnapshotTableWriter {
    let table: SnapshotTable
    private let statement: SQLiteStatement
    /// The column names' UTF-8 bytes, `table.columns` order.
    private let keys: [[UInt8]]
    private let idColumn: Int
    private var lastID = Int64.min
    /// Rows written so far.
    private(set) var rows = 0
    /// False once a row's `id` was not above every earlier one.
    private(set) var inIDOrder = true

    init(_ table: SnapshotTable, in file: SQLiteDatabase) throws {
        precondition(table.columns.count <= 64, "a snapshot table has at most 64 columns (the bound-column mask)")
        self.table = table
        statement = try file.prepare(table.insertSQL)
        keys = table.columns.map { Array($0.name.utf8) }
        idColumn = table.columns.firstIndex { $0.name == "id" }!
    }

    /// Inserts one record (a compact JSON object; its bytes need only last until this returns).
    func insert(_ record: UnsafeRawBufferPointer) throws {
        var bound: UInt64 = 0
        var next = 0
        try JSONMemberFilter.forEachMember(of: record) { key, value in
            guard let column = column(named: key, expected: next) else { return }  // e.g. deletedAt
            next = column + 1
            try bind(value, to: column)
            bound |= 1 << UInt64(column)
        }
        for column in keys.indices where bound & (1 << UInt64(column)) == 0 {
            try statement.bindNull(Int32(column + 1))
        }
        if table.keepsJSON { try statement.bind(Int32(keys.count + 1), text: record, copying: false) }
        try statement.step()
        rows += 1
    }

    /// The column named `key`: members come in column order, so `expected` is nearly always it.
    private func column(named key: UnsafeRawBufferPointer, expected: Int) -> Int? {
        if expected < keys.count, Self.equal(keys[expected], key) { return expected }
        return keys.firstIndex { Self.equal($0, key) }
    }

    private static func equal(_ name: [UInt8], _ key: UnsafeRawBufferPointer) -> Bool {
        name.count == key.count && name.withUnsafeBytes { memcmp($0.baseAddress!, key.baseAddress!, key.count) == 0 }
    }

    /// Binds one member's JSON value (its bytes stay in place until the row's `step`).
    private func bind(_ value: UnsafeRawBufferPointer, to column: Int) throws {
        let index = Int32(column + 1)
        switch value.first {
        case UInt8(ascii: "\""):
            let text = UnsafeRawBufferPointer(rebasing: value[1..<(value.count - 1)])
            if let start = text.baseAddress, memchr(start, Int32(UInt8(ascii: "\\")), text.count) != nil {
                // Escaped (quotes, backslashes, control characters: rare): the strict parser decodes it.
                guard case .string(let decoded) = try JSONParser.parse(Array(value)) else { throw MalformedRecord(table: table.name) }
                var decodedText = decoded
                try decodedText.withUTF8 { try statement.bind(index, text: UnsafeRawBufferPointer($0), copying: true) }
            } else {
                try statement.bind(index, text: text, copying: false)
            }
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            try statement.bind(index, text: value, copying: false)
        case UInt8(ascii: "t"):
            try statement.bind(index, int64: 1)
        case UInt8(ascii: "f"):
            try statement.bind(index, int64: 0)
        case UInt8(ascii: "n"), nil:
            try statement.bindNull(index)
        default:
            if let integer = Self.integer(value) {
                try statement.bind(index, int64: integer)
            } else {
                try statement.bind(index, double: try double(value))
            }
            if column == idColumn { noteID(Self.integer(value)) }
            return
        }
        if column == idColumn { noteID(nil) }
    }

    private func noteID(_ id: Int64?) {
        if let id, id > lastID {
            lastID = id
        } else {
            inIDOrder = false
        }
    }

    /// A JSON integer that fits 64 bits; nil for a decimal, an exponent or an overflow (a REAL then,
    /// as `json_extract` gives).
    private static func integer(_ value: UnsafeRawBufferPointer) -> Int64? {
        var index = 0
        let negative = value[0] == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < value.count else { return nil }
        var magnitude: UInt64 = 0
        while index < value.count {
            let digit = value[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit))
            guard !overflow1, !overflow2 else { return nil }
            magnitude = sum
            index += 1
        }
        if negative { return magnitude <= UInt64(Int64.max) + 1 ? Int64(truncatingIfNeeded: 0 &- magnitude) : nil }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    private func double(_ value: UnsafeRawBufferPointer) throws -> Double {
        guard let number = Double(String(decoding: value, as: UTF8.self)) else { throw MalformedRecord(table: table.name) }
        return number
    }

    /// A feed record that is not the compact JSON the writers render (a server fault: 500).
    struct MalformedRecord: Error, CustomStringConvertible {
        let table: String
        var description: String { "a malformed record for the snapshot table \(table)" }
    }
}
