/// A synced field of a record (`TodoField`, `TagField`): the one list of what a client and the
/// server exchange, carrying for each field what every layer needs — its JSON key, the schema
/// version that introduced it, its value's kind and limits, and its column on the server.
///
/// Other representations derive from it (the pull projection and push filter by `since`, the JSON
/// writers and readers by the cases, the server's content columns and their bindings, the snapshot
/// tables) or are checked against it: `SyncedFieldsTests` (client record, local schema, page
/// decoder, public client types, terminal client options) and `ColumnsTests` (the migrated
/// tables) name the representation and the field that is missing. docs/ARCHITECTURE.md, "A synced
/// field", lists the places a new field goes.
public protocol SyncedField: RawRepresentable<String>, CaseIterable, Hashable, Sendable where AllCases == [Self] {
    /// The schema version that introduced the field (API.md "Schema versions").
    var since: Int { get }
    /// What kind of value the field holds.
    var kind: FieldKind { get }
    /// Whether `null` is a value of the field.
    var isNullable: Bool { get }
    /// For text: its length in Unicode scalars (API.md's limits); nil for other kinds, and for
    /// text of a fixed format (a color).
    var length: ClosedRange<Int>? { get }
    /// For text: whether an all-whitespace value is refused.
    var refusesBlank: Bool { get }
    /// For integers: the values allowed.
    var range: ClosedRange<Int64>? { get }
    /// The server's column (MariaDB, in the record's table).
    var column: String { get }
    /// The column's declared type, as the migrations (`Sql/`) declare it.
    var columnType: String { get }
}

extension SyncedField {
    /// The field's member name in the contract's JSON.
    public var key: String { rawValue }

    /// The fields a record of schema version `version` has.
    public static func fields(atSchema version: Int) -> [Self] { allCases.filter { $0.since <= version } }
}

/// The kind of a synced field's value, which fixes how each layer holds it.
public enum FieldKind: Sendable, Equatable {
    /// A JSON string.
    case text
    /// A JSON boolean.
    case bool
    /// A JSON integer.
    case integer
    /// A calendar date, `YYYY-MM-DD` in JSON.
    case day
    /// An instant: RFC 3339 in JSON (any offset), sent back in UTC as `YYYY-MM-DDTHH:MM:SS.mmmZ`
    /// (`Timestamp(rfc3339Input:)`); its UTC year within `Day`'s years. MariaDB `DATETIME(3)`.
    case instant
    /// Another record's server id, a JSON integer (a todo's tag).
    case reference

    /// The declared type of a SQLite column that holds it: the snapshot's tables (docs/SNAPSHOT.md)
    /// and the client's local store.
    public var sqliteType: String {
        switch self {
        case .text, .day, .instant: "TEXT"
        case .bool, .integer, .reference: "INTEGER"
        }
    }
}
