/// A Swift value that can be bound as a statement parameter.
///
/// Lets callers write `try db.query(sql, [userID, name, nil as String?])`.
public protocol DatabaseValueConvertible {
    /// The value to bind.
    var databaseValue: DatabaseValue { get }
}

extension DatabaseValue: DatabaseValueConvertible {
    /// The value itself.
    public var databaseValue: DatabaseValue { self }
}

extension Int: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension Int64: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(self) }
}

extension Int32: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension Int16: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension Int8: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension UInt64: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``; values above `Int64.max` are sent as decimal text, which the
    /// server converts losslessly for a BIGINT UNSIGNED column.
    public var databaseValue: DatabaseValue {
        if let value = Int64(exactly: self) { return .int(value) }
        return .text(String(self))
    }
}

extension UInt32: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension UInt16: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension UInt8: DatabaseValueConvertible {
    /// ``DatabaseValue/int(_:)``.
    public var databaseValue: DatabaseValue { .int(Int64(self)) }
}

extension Bool: DatabaseValueConvertible {
    /// `.int(1)` for true, `.int(0)` for false.
    public var databaseValue: DatabaseValue { .int(self ? 1 : 0) }
}

extension Double: DatabaseValueConvertible {
    /// ``DatabaseValue/double(_:)``.
    public var databaseValue: DatabaseValue { .double(self) }
}

extension Float: DatabaseValueConvertible {
    /// ``DatabaseValue/double(_:)``.
    public var databaseValue: DatabaseValue { .double(Double(self)) }
}

extension String: DatabaseValueConvertible {
    /// ``DatabaseValue/text(_:)``.
    public var databaseValue: DatabaseValue { .text(self) }
}

extension Substring: DatabaseValueConvertible {
    /// ``DatabaseValue/text(_:)``.
    public var databaseValue: DatabaseValue { .text(String(self)) }
}

extension Array: DatabaseValueConvertible where Element == UInt8 {
    /// ``DatabaseValue/blob(_:)``.
    public var databaseValue: DatabaseValue { .blob(self) }
}

extension Optional: DatabaseValueConvertible where Wrapped: DatabaseValueConvertible {
    /// The wrapped value, or ``DatabaseValue/null`` for nil.
    public var databaseValue: DatabaseValue {
        switch self {
        case .none: return .null
        case .some(let value): return value.databaseValue
        }
    }
}

extension Array where Element == (any DatabaseValueConvertible)? {
    /// The parameters as database values (nil becomes NULL).
    var databaseValues: [DatabaseValue] {
        map { $0?.databaseValue ?? .null }
    }
}
