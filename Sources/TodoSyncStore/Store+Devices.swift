import MariaDB
import TodoSyncCore

extension Store {
    /// The number of the user's device `deviceID` (the exact text a push sends), registered on
    /// its first push. Runs inside the push's write transaction, under the user's lock.
    func deviceNumber(userID: Int64, deviceID: String, at now: Timestamp) throws -> Int64 {
        let result = try db.execute(SQL.Devices.register, [.int(userID), .text(deviceID), .timestamp(now)])
        return Int64(result.lastInsertID)
    }
}

extension SQL {
    enum Devices {
        /// Registers a device of a user, or finds it: either way LAST_INSERT_ID() is its number.
        static let register = """
            INSERT INTO sync_devices (user_id, device_key, created_at) VALUES (?, ?, ?)
                ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id)
            """
    }
}
