/// `POST /account/password`'s body: the current password (only checked, so any string; a wrong
/// one is a 401) and the new one (8–128 characters, else 422 before anything is checked).
public struct PasswordChangeInput: Sendable {
    public let currentPassword: String
    public let newPassword: String

    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> PasswordChangeInput {
        let current = reader.string("currentPassword", required: true, length: CredentialsInput.checkedPasswordLength)
        let new = reader.string("newPassword", required: true, length: CredentialsInput.newPasswordLength)
        try reader.finish()
        return PasswordChangeInput(currentPassword: current!, newPassword: new!)
    }
}

/// `POST /account/delete`'s body: the account's password, asked again.
public struct AccountDeleteInput: Sendable {
    public let password: String

    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> AccountDeleteInput {
        let password = reader.string("password", required: true, length: CredentialsInput.checkedPasswordLength)
        try reader.finish()
        return AccountDeleteInput(password: password!)
    }
}

/// A session's public id (`auth_tokens.public_id`): 32 lower-case hex digits. Anything else
/// names no session (404) and is not looked up.
public enum SessionID {
    public static func isValid(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }
}
