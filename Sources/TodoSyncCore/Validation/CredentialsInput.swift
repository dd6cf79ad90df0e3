/// The body of register and login.
public struct CredentialsInput: Sendable {
    public let email: String
    public let password: String

    /// The length of a new password, in characters (Unicode scalars): register, password change.
    public static let newPasswordLength = 8...128
    /// What a password that is only checked may be (login, re-authentication): any string up to
    /// this, a wrong one being a 401 rather than a 422.
    public static let checkedPasswordLength = 0...1000

    /// The case-insensitive comparison key of an email: NFC, then simple per-character
    /// lowercasing, no collation folding (`ß` stays `ß`, it is not `ss`), then NFC again.
    public static func emailKey(_ email: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in nfc(email).unicodeScalars { scalars.append(simpleLowercase(scalar)) }
        return nfc(String(scalars))
    }

    /// Unicode's simple lowercase mapping of one scalar (UnicodeData.txt, field 13): always one
    /// scalar. The standard library gives the full mapping (SpecialCasing.txt applied), which is
    /// the simple one except where SpecialCasing lists a multi-scalar result; for lowercasing,
    /// unconditionally, that is U+0130 alone (`İ` → `i` + U+0307 in full, `i` in simple). Keeping
    /// `İ` unchanged there made `İx@` and `ix@` two accounts (issue 34).
    public static func simpleLowercase(_ scalar: Unicode.Scalar) -> Unicode.Scalar {
        let lower = scalar.properties.lowercaseMapping.unicodeScalars
        if lower.count == 1 { return lower.first! }
        return simpleLowercaseWhereFullDiffers[scalar.value] ?? scalar
    }

    /// The simple lowercase of the scalars whose full lowercase mapping is several scalars
    /// (SpecialCasing.txt's unconditional lowercase entries of more than one code point).
    public static let simpleLowercaseWhereFullDiffers: [UInt32: Unicode.Scalar] = [0x130: "i"]

    /// Unicode Normalization Form C (the contract normalises emails to NFC before comparing and
    /// storing them). The standard library's own NFC, which `String` comparison uses and
    /// swift-foundation builds on: Core stays free of Foundation.
    public static func nfc(_ text: String) -> String {
        String(decoding: text._nfcCodeUnits, as: UTF8.self)
    }

    /// The email as every later step sees it: surrounding whitespace removed first (contract,
    /// Auth), then NFC. Register and login both start here, so every spelling that names one
    /// account reaches one `emailKey`, and with it one failed-login counter.
    public static func normalizedEmail(_ raw: String) -> String {
        nfc(raw.trimmingWhitespace())
    }

    /// Whether `email` holds an invisible format character (Unicode general category Cf: zero-width
    /// space and joiner, soft hyphen, bidirectional overrides, …), which the contract refuses (422).
    static func hasInvisibleCharacter(_ email: String) -> Bool {
        email.unicodeScalars.contains { $0.properties.generalCategory == .format }
    }

    static let invisibleCharacterProblem = "must not contain invisible characters (zero-width, soft hyphen, bidi controls)"

    /// The address rules, on the NFC form: exactly one `@` counted in Unicode scalars (a
    /// combining mark after `@` does not hide it) with something on both sides, no whitespace or
    /// control characters. Problems are reported against `email`.
    static func checkAddress(_ email: String, _ reader: inout FieldReader) {
        let scalars = email.unicodeScalars
        let ats = scalars.lazy.filter { $0 == "@" }.count
        if ats != 1 || scalars.first == "@" || scalars.last == "@" {
            reader.report("email", "must contain exactly one @ with text on both sides")
        } else if scalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            reader.report("email", "must not contain whitespace or control characters")
        } else if hasInvisibleCharacter(email) {
            reader.report("email", invisibleCharacterProblem)
        }
    }

    /// The `email` member as register takes it: normalised (`normalizedEmail`), 3–254 characters
    /// of the NFC form (what is stored: a decomposed input may be longer than what it normalises
    /// to), and the address rules (`checkAddress`). Nil, with the problem reported, otherwise.
    /// A friend request's email follows the same rules (`FriendRequestInput`).
    static func readAddress(_ reader: inout FieldReader) -> String? {
        guard let address = reader.string("email", required: true, length: 0...1000).map(normalizedEmail) else { return nil }
        let count = address.unicodeScalars.count
        guard (3...254).contains(count) else {
            reader.report("email", "must be 3–254 characters long (got \(count))")
            return nil
        }
        checkAddress(address, &reader)
        return address
    }

    /// Validates register's body: the email in NFC with exactly one `@` (in Unicode scalars) and
    /// at most 254 characters (something on both sides of the `@`), password of 8–128 characters.
    /// The email is stored as normalised.
    public static func parseForRegister(_ reader: inout FieldReader) throws(DomainError) -> CredentialsInput {
        let email = readAddress(&reader)
        let password = reader.string("password", required: true, length: newPasswordLength)
        try reader.finish()
        return CredentialsInput(email: email!, password: password!)
    }

    /// Reads login's body: any strings; a wrong shape or an invisible character in the email is a
    /// 422, a wrong value a plain 401 later. The email is normalised as at registration.
    public static func parseForLogin(_ reader: inout FieldReader) throws(DomainError) -> CredentialsInput {
        let email = reader.string("email", required: true, length: 0...1000).map(normalizedEmail)
        if let email, hasInvisibleCharacter(email) { reader.report("email", invisibleCharacterProblem) }
        let password = reader.string("password", required: true, length: checkedPasswordLength)
        try reader.finish()
        return CredentialsInput(email: email!, password: password!)
    }

    public init(email: String, password: String) {
        self.email = email
        self.password = password
    }
}
