/// The body of register and login.
public struct CredentialsInput: Sendable {
    public let email: String
    public let password: String

    /// The case-insensitive comparison key of an email: simple per-character lowercasing,
    /// no collation folding (`ß` stays `ß`, it is not `ss`).
    public static func emailKey(_ email: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in email.unicodeScalars {
            let lower = scalar.properties.lowercaseMapping.unicodeScalars
            // Keep one-to-one mappings only: multi-scalar full mappings (e.g. İ → i̇) are not "simple".
            if lower.count == 1 { scalars.append(lower.first!) } else { scalars.append(scalar) }
        }
        return String(scalars)
    }

    /// Validates register's body: email with exactly one `@` and at most 254 characters
    /// (something on both sides of the `@`), password of 8–128 characters.
    public static func parseForRegister(_ reader: inout FieldReader) throws(APIError) -> CredentialsInput {
        let email = reader.string("email", required: true, length: 3...254)
        if let email {
            let parts = email.split(separator: "@", omittingEmptySubsequences: false)
            if parts.count != 2 || parts[0].isEmpty || parts[1].isEmpty {
                reader.report("email", "must contain exactly one @ with text on both sides")
            } else if email.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 }) {
                reader.report("email", "must not contain whitespace or control characters")
            }
        }
        let password = reader.string("password", required: true, length: 8...128)
        try reader.finish()
        return CredentialsInput(email: email!, password: password!)
    }

    /// Reads login's body: any strings; a wrong shape is a 422, a wrong value a plain 401 later.
    public static func parseForLogin(_ reader: inout FieldReader) throws(APIError) -> CredentialsInput {
        let email = reader.string("email", required: true, length: 0...1000)
        let password = reader.string("password", required: true, length: 0...1000)
        try reader.finish()
        return CredentialsInput(email: email!, password: password!)
    }

    public init(email: String, password: String) {
        self.email = email
        self.password = password
    }
}
