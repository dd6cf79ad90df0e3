/// `PATCH /account`'s body (contract, "Friends"): the nickname, or null to clear it.
public struct NicknameInput: Sendable {
    /// The most Unicode scalars a nickname keeps.
    public static let maximumLength = 40
    /// nil: the body does not name `nickname` (nothing changes).
    public let change: String??

    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> NicknameInput {
        guard reader.has("nickname") else {
            try reader.finish()
            return NicknameInput(change: nil)
        }
        if case .null = reader.value("nickname") {
            try reader.finish()
            return NicknameInput(change: .some(nil))
        }
        var nickname = reader.string("nickname", required: true, length: 0...10_000).map { $0.trimmingWhitespace() }
        if let name = nickname, let problem = problem(name) {
            reader.report("nickname", problem)
            nickname = nil
        }
        try reader.finish()
        return NicknameInput(change: .some(nickname!))
    }

    /// What is wrong with a trimmed nickname, or nil: 1–40 scalars, no control character, no
    /// format (Cf) character but the joiners U+200C and U+200D.
    static func problem(_ name: String) -> String? {
        let count = name.unicodeScalars.count
        if !(1...maximumLength).contains(count) {
            return "must be 1–\(maximumLength) characters long after trimming whitespace (got \(count))"
        }
        for scalar in name.unicodeScalars {
            let category = scalar.properties.generalCategory
            if category == .control { return "must not contain control characters" }
            if category == .format && scalar.value != 0x200C && scalar.value != 0x200D {
                return "must not contain invisible format characters other than U+200C and U+200D"
            }
        }
        return nil
    }
}

/// `POST /friends/requests`'s body: the email, normalised as at registration (trimmed, NFC) and
/// checked by the same address rules (contract: "Your own email (by the rules of Auth)").
public struct FriendRequestInput: Sendable {
    public let email: String
    /// `CredentialsInput.emailKey(email)`: how the request finds its recipient.
    public let emailKey: String

    public static func parse(_ reader: inout FieldReader) throws(DomainError) -> FriendRequestInput {
        let email = CredentialsInput.readAddress(&reader)
        try reader.finish()
        return FriendRequestInput(email: email!, emailKey: CredentialsInput.emailKey(email!))
    }
}
