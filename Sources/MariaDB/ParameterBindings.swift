import CMariaDB

/// The `MYSQL_BIND` array and value storage for a statement's parameters.
///
/// Allocated once per statement and reused by every execution: Connector/C reads the binds
/// during `mysql_stmt_execute`, so they and the bytes they point at live at fixed addresses.
/// Values are copied into one growable buffer (8-byte aligned slots).
final class ParameterBindings {
    let count: Int
    let binds: UnsafeMutablePointer<MYSQL_BIND>
    private let lengths: UnsafeMutablePointer<UInt>
    private var storage: UnsafeMutableRawPointer
    private var capacity: Int

    init(count: Int) {
        self.count = count
        let slots = max(count, 1)
        binds = .allocate(capacity: slots)
        binds.initialize(repeating: MYSQL_BIND(), count: slots)
        lengths = .allocate(capacity: slots)
        lengths.initialize(repeating: 0, count: slots)
        capacity = 256
        storage = .allocate(byteCount: capacity, alignment: 8)
    }

    deinit {
        binds.deinitialize(count: max(count, 1))
        binds.deallocate()
        lengths.deallocate()
        storage.deallocate()
    }

    /// Fills the binds from `values` (`values.count == count`, checked by the caller).
    func bind(_ values: [DatabaseValue]) {
        var needed = 0
        for value in values { needed += Self.slotSize(of: value) }
        if needed > capacity {
            storage.deallocate()
            capacity = max(needed, capacity * 2)
            storage = .allocate(byteCount: capacity, alignment: 8)
        }
        var offset = 0
        for index in 0..<values.count {
            let bind = binds + index
            bind.pointee = MYSQL_BIND()
            let slot = storage + offset
            switch values[index] {
            case .null:
                bind.pointee.buffer_type = MYSQL_TYPE_NULL
            case .int(let value):
                slot.storeBytes(of: value, as: Int64.self)
                bind.pointee.buffer_type = MYSQL_TYPE_LONGLONG
                bind.pointee.buffer = slot
                bind.pointee.buffer_length = 8
                offset += 8
            case .double(let value):
                slot.storeBytes(of: value, as: Double.self)
                bind.pointee.buffer_type = MYSQL_TYPE_DOUBLE
                bind.pointee.buffer = slot
                bind.pointee.buffer_length = 8
                offset += 8
            case .text(var text):
                let length = text.withUTF8 { utf8 -> Int in
                    if let base = utf8.baseAddress, utf8.count > 0 {
                        slot.copyMemory(from: base, byteCount: utf8.count)
                    }
                    return utf8.count
                }
                setBytes(bind, index: index, slot: slot, length: length, type: MYSQL_TYPE_STRING)
                offset += Self.aligned(length)
            case .blob(let bytes):
                bytes.withUnsafeBytes { raw in
                    if let base = raw.baseAddress, raw.count > 0 {
                        slot.copyMemory(from: base, byteCount: raw.count)
                    }
                }
                setBytes(bind, index: index, slot: slot, length: bytes.count, type: MYSQL_TYPE_BLOB)
                offset += Self.aligned(bytes.count)
            }
        }
    }

    private func setBytes(
        _ bind: UnsafeMutablePointer<MYSQL_BIND>, index: Int, slot: UnsafeMutableRawPointer, length: Int,
        type: enum_field_types
    ) {
        lengths[index] = UInt(length)
        bind.pointee.buffer_type = type
        bind.pointee.buffer = slot
        bind.pointee.buffer_length = UInt(length)
        bind.pointee.length = lengths + index
    }

    private static func slotSize(of value: DatabaseValue) -> Int {
        switch value {
        case .null: return 0
        case .int, .double: return 8
        case .text(let text): return aligned(text.utf8.count)
        case .blob(let bytes): return aligned(bytes.count)
        }
    }

    private static func aligned(_ size: Int) -> Int { (size + 7) & ~7 }
}
