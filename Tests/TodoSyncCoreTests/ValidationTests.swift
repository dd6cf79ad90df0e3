import TodoSyncCore
import XCTest

final class ValidationTests: XCTestCase {
    private func reader(_ json: String) throws -> FieldReader {
        try FieldReader(try JSONParser.parse(Array(json.utf8)))
    }

    private func fields(of error: Error) -> [String] {
        (error as? DomainError)?.details.map(\.field) ?? []
    }

    func testTodoDraftDefaults() throws {
        var reader = try reader(#"{"title": "Buy milk", "deadline": "2026-11-21", "id": 99, "bogus": 1}"#)
        let draft = try TodoDraft.parse(&reader)
        XCTAssertEqual(draft, TodoDraft(title: "Buy milk", raw: "Buy milk", deadline: Day("2026-11-21")!))
    }

    func testTodoDraftReportsEveryBadField() throws {
        var reader = try reader(#"""
            {"title": "   ", "raw": 5, "isImportant": 1, "isLife": "true", "tagId": -3, "difficulty": 6,
             "estimatedTime": 1441, "deadline": "2026-02-30", "isCompleted": null, "clientId": "nope"}
            """#)
        XCTAssertThrowsError(try TodoDraft.parse(&reader)) { error in
            XCTAssertEqual((error as? DomainError)?.code, "validation_failed")
            XCTAssertEqual(Set(fields(of: error)), ["title", "raw", "isImportant", "isLife", "tagId", "difficulty",
                                                    "estimatedTime", "deadline", "isCompleted", "clientId"])
        }
    }

    func testLengthsCountCharactersNotBytes() throws {
        let emoji = String(repeating: "😀", count: 200)
        var ok = try reader(#"{"title": "\#(emoji)", "deadline": "2026-11-21"}"#)
        XCTAssertEqual(try TodoDraft.parse(&ok).title, emoji)
        var tooLong = try reader(#"{"title": "\#(emoji)x", "deadline": "2026-11-21"}"#)
        XCTAssertThrowsError(try TodoDraft.parse(&tooLong)) { XCTAssertEqual(self.fields(of: $0), ["title"]) }
    }

    func testFractionalAndStringNumbersAreRejected() throws {
        for value in ["1.5", "\"3\"", "true", "1e400"] {
            var reader = try reader(#"{"title": "t", "deadline": "2026-11-21", "difficulty": \#(value)}"#)
            XCTAssertThrowsError(try TodoDraft.parse(&reader), value) { XCTAssertEqual(self.fields(of: $0), ["difficulty"]) }
        }
    }

    func testTodoPatchDistinguishesAbsentAndNull() throws {
        var clear = try reader(#"{"tagId": null}"#)
        XCTAssertEqual(try TodoPatch.parse(&clear).tagID, .some(nil))
        var absent = try reader(#"{"title": "x"}"#)
        let patch = try TodoPatch.parse(&absent)
        XCTAssertTrue(patch.tagID == nil, "an absent tagId must leave the tag alone, not clear it")
        XCTAssertEqual(patch.title, "x")
        var nullTitle = try reader(#"{"title": null}"#)
        XCTAssertThrowsError(try TodoPatch.parse(&nullTitle)) { XCTAssertEqual(self.fields(of: $0), ["title"]) }
    }

    func testTagColorNormalisation() throws {
        XCTAssertEqual(TagColor.normalized("#ff8800"), "#FF8800")
        for bad in ["#12345", "red", "#GGGGGG", "FF8800", "#FF88001"] { XCTAssertNil(TagColor.normalized(bad), bad) }
        var reader = try reader(#"{"name": "\#(String(repeating: "n", count: 51))", "color": "red"}"#)
        XCTAssertThrowsError(try TagDraft.parse(&reader)) { XCTAssertEqual(Set(self.fields(of: $0)), ["name", "color"]) }
    }

    func testNonObjectBodyIsAValidationError() {
        XCTAssertThrowsError(try FieldReader(.array([]))) { XCTAssertEqual(($0 as? DomainError)?.code, "validation_failed") }
    }

    func testEmailRules() throws {
        XCTAssertEqual(CredentialsInput.emailKey("Straße@Example.COM"), "straße@example.com")
        XCTAssertNotEqual(CredentialsInput.emailKey("strasse@x.io"), CredentialsInput.emailKey("straße@x.io"))
        for bad in ["no-at.example.com", "a@b@c", "@b.c", "a@", "a b@c.d"] {
            var reader = try reader(#"{"email": "\#(bad)", "password": "long enough"}"#)
            XCTAssertThrowsError(try CredentialsInput.parseForRegister(&reader), bad)
        }
        let long = String(repeating: "a", count: 250) + "@b.cd"
        var tooLong = try reader(#"{"email": "\#(long)", "password": "long enough"}"#)
        XCTAssertThrowsError(try CredentialsInput.parseForRegister(&tooLong))
        var shortPassword = try reader(#"{"email": "a@b.c", "password": "1234567"}"#)
        XCTAssertThrowsError(try CredentialsInput.parseForRegister(&shortPassword)) {
            XCTAssertEqual(self.fields(of: $0), ["password"])
        }
    }

    func testDottedCapitalIIsLowercasedSimplyToI() throws {
        // U+0130's simple lowercase mapping is U+0069 (its full one, i + U+0307, is not "simple"):
        // `İx@` and `ix@` are one account (issue 34).
        XCTAssertEqual(CredentialsInput.emailKey("\u{130}x@example.com"), "ix@example.com")
        XCTAssertEqual(CredentialsInput.emailKey("\u{130}X@EXAMPLE.COM"), CredentialsInput.emailKey("ix@example.com"))
        // Decomposed (I + U+0307) is the same email after NFC.
        XCTAssertEqual(CredentialsInput.emailKey("I\u{307}x@example.com"), "ix@example.com")
        // Every key is lowercased scalar for scalar: no scalar becomes two.
        for value in UInt32(0)...0x10FFFF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let lower = scalar.properties.lowercaseMapping.unicodeScalars
            if lower.count > 1 {
                XCTAssertNotNil(CredentialsInput.simpleLowercaseWhereFullDiffers[value],
                                "U+\(String(value, radix: 16)) has a full lowercase mapping of \(lower.count) scalars")
            }
        }
    }

    func testEmailsAreNFCAndAtSignsAreCountedInScalars() throws {
        // "é" decomposed (e + U+0301) and precomposed are one email, stored precomposed.
        XCTAssertEqual(CredentialsInput.emailKey("Jos\u{65}\u{301}@x.io"), "jos\u{e9}@x.io")
        var decomposed = try reader(#"{"email": "jos\#u{65}\#u{301}@x.io", "password": "long enough"}"#)
        XCTAssertEqual(try CredentialsInput.parseForRegister(&decomposed).email, "jos\u{e9}@x.io")
        var login = try reader(#"{"email": "JOS\#u{45}\#u{301}@x.io", "password": "x"}"#)
        XCTAssertEqual(try CredentialsInput.parseForLogin(&login).email, "JOS\u{c9}@x.io")
        // A combining mark after an @ makes one grapheme cluster, but it is still a second @.
        var hidden = try reader(#"{"email": "a@\#u{301}b@c.io", "password": "long enough"}"#)
        XCTAssertThrowsError(try CredentialsInput.parseForRegister(&hidden)) {
            XCTAssertEqual(self.fields(of: $0), ["email"])
        }
    }

    func testSurroundingWhitespaceIsRemovedBeforeAnythingElse() throws {
        for spelling in ["victim@example.com   ", "  victim@example.com", "\\tVictim@Example.com\\n", "victim@example.com\\u00a0"] {
            var login = try reader(#"{"email": "\#(spelling)", "password": "x"}"#)
            let email = try CredentialsInput.parseForLogin(&login).email
            XCTAssertEqual(CredentialsInput.emailKey(email), "victim@example.com", spelling)
            var register = try reader(#"{"email": "\#(spelling)", "password": "long enough"}"#)
            XCTAssertEqual(CredentialsInput.emailKey(try CredentialsInput.parseForRegister(&register).email),
                           "victim@example.com", spelling)
        }
    }

    func testInvisibleCharactersInEmailsAre422() throws {
        // zero-width space, zero-width joiner, soft hyphen, right-to-left override, BOM
        for invisible in ["\\u200b", "\\u200d", "\\u00ad", "\\u202e", "\\ufeff"] {
            var register = try reader(#"{"email": "vic\#(invisible)tim@example.com", "password": "long enough"}"#)
            XCTAssertThrowsError(try CredentialsInput.parseForRegister(&register), invisible) {
                XCTAssertEqual(self.fields(of: $0), ["email"])
            }
            var login = try reader(#"{"email": "vic\#(invisible)tim@example.com", "password": "x"}"#)
            XCTAssertThrowsError(try CredentialsInput.parseForLogin(&login), invisible) {
                XCTAssertEqual(self.fields(of: $0), ["email"])
            }
        }
    }

    func testIfMatchForms() {
        XCTAssertTrue(IfMatch(header: "\"7\"")!.matches(7))
        XCTAssertTrue(IfMatch(header: "7")!.matches(7))
        XCTAssertTrue(IfMatch(header: "W/\"7\"")!.matches(7))
        XCTAssertTrue(IfMatch(header: "\"3\", \"7\"")!.matches(7))
        XCTAssertTrue(IfMatch(header: "*")!.matches(123))
        XCTAssertFalse(IfMatch(header: "\"8\"")!.matches(7))
        XCTAssertFalse(IfMatch(header: "garbage")!.matches(7))
        XCTAssertNil(IfMatch(header: nil))
    }

    func testClientIDs() {
        XCTAssertTrue(ClientID.isValid("6F9619FF-8B86-D011-B42D-00C04FC964FF"))
        XCTAssertFalse(ClientID.isValid("6F9619FF8B86D011B42D00C04FC964FF"))
        XCTAssertFalse(ClientID.isValid("6F9619FF-8B86-D011-B42D-00C04FC964FZ"))
        XCTAssertEqual(ClientID.key("6F9619FF-8B86-D011-B42D-00C04FC964FF"), "6f9619ff-8b86-d011-b42d-00c04fc964ff")
    }
}
