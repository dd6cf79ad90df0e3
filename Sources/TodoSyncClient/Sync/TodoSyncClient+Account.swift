import Foundation
import TodoSyncCore
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One valid login of the account (API.md "Account"): a device, an app or a script.
public struct AccountSession: Sendable, Equatable {
    /// The session's public id (not the token): what `revokeSession(id:)` takes.
    public var id: String
    /// RFC 3339 UTC timestamps, as the server sent them; `lastUsedAt` may be a minute stale.
    public var createdAt: String
    public var lastUsedAt: String
    /// Whether this is the session of this store's token.
    public var current: Bool

    public init(id: String, createdAt: String, lastUsedAt: String, current: Bool) {
        self.id = id
        self.createdAt = createdAt
        self.lastUsedAt = lastUsedAt
        self.current = current
    }
}

/// What a signed-in user controls of the account (API.md "Account"). Every call needs the
/// store's token. A wrong password is `SyncError.wrongPassword` (the device stays signed in); a
/// refused token is `SyncError.unauthorized` and signs the store out, as a sync does.
extension TodoSyncClient {
    /// Changes the account's password. The server signs out every other session of the account
    /// (their next sync says "signed out: log in again"); this store stays signed in.
    ///
    /// Throws `SyncError.wrongPassword(field: "currentPassword")` for a wrong `current` (it counts
    /// as a failed login of the account), `.server(422, "validation_failed", …)` for a `new`
    /// outside 8–128 characters. Not resent after a lost answer (a repeat would meet the new
    /// password): the call then fails offline and the password may or may not have changed.
    public func changePassword(current: String, new: String) async throws {
        let body = Self.jsonObject(["currentPassword": current, "newPassword": new])
        let response = try await authorized("POST", "/api/v1/account/password", body: body, deadline: accountDeadline(), resend: false)
        guard response.status == 204 else { throw Self.failure(response) }
    }

    /// The account's sessions, newest first; `current` marks this store's.
    public func sessions() async throws -> [AccountSession] {
        let response = try await authorized("GET", "/api/v1/account/sessions", deadline: accountDeadline())
        guard response.status == 200 else { throw Self.failure(response) }
        guard let items = try response.json()["items"]?.arrayValue else {
            throw SyncError.protocolError("sessions answer without items")
        }
        return try items.map { item in
            guard let session = item.objectValue, let id = session["id"]?.stringValue,
                  let createdAt = session["createdAt"]?.stringValue, let lastUsedAt = session["lastUsedAt"]?.stringValue,
                  let current = session["current"]?.boolValue else {
                throw SyncError.protocolError("a session without id, createdAt, lastUsedAt and current")
            }
            return AccountSession(id: id, createdAt: createdAt, lastUsedAt: lastUsedAt, current: current)
        }
    }

    /// Ends one session of the account at once (a lost phone). An id that names no session of
    /// this account is `.server(404, "not_found", …)`. Revoking this store's own session is a
    /// logout: its next call says "signed out: log in again".
    public func revokeSession(id: String) async throws {
        // Ids are hex; anything else is escaped so that it stays one path segment (and names none).
        let segment = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? id
        let response = try await authorized("DELETE", "/api/v1/account/sessions/" + segment, deadline: accountDeadline())
        guard response.status == 204 else { throw Self.failure(response) }
    }

    /// Writes a copy of every live record of the account (the server's export document:
    /// `{"user", "tags", "todos", "dailyStats"}`) to `file`, and returns its size in bytes.
    ///
    /// The body goes to disk as it arrives (never whole in memory) into a temporary file next to
    /// `file` (readable by its owner only), which is flushed and then renamed over `file`: `file`
    /// is either the complete export or untouched (an earlier copy stays). `SyncTimeouts.request`
    /// bounds each wait for a byte, not the whole transfer.
    @discardableResult
    public func exportAccount(to file: URL) async throws -> Int64 {
        let temporary = file.deletingLastPathComponent()
            .appendingPathComponent(".\(file.lastPathComponent).\(UUID().uuidString.prefix(8)).part")
        let descriptor = open(temporary.path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        close(descriptor)
        defer { unlink(temporary.path) }  // after the rename there is nothing left to remove
        let response = try await authorized("GET", "/api/v1/account/export", deadline: accountDeadline(), into: temporary)
        guard response.status == 200 else { throw Self.failure(response) }
        let size = try FileManager.default.attributesOfItem(atPath: temporary.path)[.size] as? Int64 ?? 0
        guard rename(temporary.path, file.path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return size
    }

    /// Deletes the account on the server, then this device's copy of it: after the server's
    /// 204 (and never before) the store is closed and its file, `-wal`, `-shm` and sync lock are
    /// removed, queued changes included. The `LocalStore` (and every client and `SyncEngine` on
    /// it: stop them first) cannot be used afterwards.
    ///
    /// A wrong password (`SyncError.wrongPassword(field: "password")`, counted as a failed login
    /// of the account), a refused token, a network failure or any other error leaves every file
    /// as it was. Not resent after a lost answer: the call fails offline, and the next try
    /// answers `unauthorized` if the first one deleted the account. Throws
    /// `SyncError.alreadyRunning` while another process syncs the store.
    public func deleteAccount(password: String) async throws {
        let lock = try SyncFileLock(storePath: store.path)
        defer { lock.release() }
        let body = Self.jsonObject(["password": password])
        let response = try await authorized("POST", "/api/v1/account/delete", body: body, deadline: accountDeadline(), resend: false)
        guard response.status == 204 else { throw Self.failure(response) }
        try store.closeAndRemoveFiles()
    }

    /// The bound of one account call, retries included (`SyncTimeouts.sync`).
    private func accountDeadline() -> SyncDeadline {
        SyncDeadline(clock: api.clock, seconds: api.timeouts.sync)
    }
}
