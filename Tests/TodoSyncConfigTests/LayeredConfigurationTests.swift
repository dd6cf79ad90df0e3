import TodoSyncConfig
import XCTest

final class LayeredConfigurationTests: XCTestCase {
    let settings = [
        Setting("TODOSYNC_WORKERS", default: "8", "workers"),
        Setting("TODOSYNC_DB_NAME", default: "todosync", "database"),
        Setting("TODOSYNC_DB_PASSWORD", default: "todosync", secret: true, "password"),
        Setting("TODOSYNC_LISTEN", "no default"),
    ]

    func configuration(file: String?, environment: [String: String]) throws -> LayeredConfiguration {
        var environment = environment
        if file != nil { environment["TODOSYNC_CONFIG"] = "/etc/todosync/todosync.env" }
        return try LayeredConfiguration(settings: settings, environment: environment, readFile: { _ in file })
    }

    func testEnvironmentWinsOverFileWhichWinsOverDefaults() throws {
        let config = try configuration(
            file: "TODOSYNC_WORKERS=12\nTODOSYNC_DB_NAME=fromfile\n",
            environment: ["TODOSYNC_WORKERS": "20"])
        XCTAssertEqual(config.lookup("TODOSYNC_WORKERS").value, "20")
        XCTAssertEqual(config.lookup("TODOSYNC_WORKERS").source, .environment)
        XCTAssertEqual(config.lookup("TODOSYNC_DB_NAME").value, "fromfile")
        XCTAssertEqual(config.lookup("TODOSYNC_DB_NAME").source, .file("/etc/todosync/todosync.env"))
        XCTAssertEqual(config.lookup("TODOSYNC_DB_PASSWORD").source, .defaultValue)
        XCTAssertNil(config.value("TODOSYNC_LISTEN"))
    }

    func testEmptyValueFallsThroughToTheNextLayer() throws {
        let config = try configuration(file: "TODOSYNC_WORKERS=12\n", environment: ["TODOSYNC_WORKERS": ""])
        XCTAssertEqual(config.lookup("TODOSYNC_WORKERS").value, "12")
    }

    func testNoFileWithoutTodosyncConfig() throws {
        var asked = false
        let config = try LayeredConfiguration(settings: settings, environment: [:], readFile: { _ in asked = true; return "" })
        XCTAssertFalse(asked)
        XCTAssertNil(config.filePath)
        XCTAssertEqual(config.value("TODOSYNC_WORKERS"), "8")
    }

    func testUnreadableFileIsAnError() {
        XCTAssertThrowsError(try LayeredConfiguration(
            settings: settings, environment: ["TODOSYNC_CONFIG": "/nonexistent"], readFile: { _ in nil }))
    }

    func testSecretsAreRedactedButOtherValuesShown() throws {
        let config = try configuration(
            file: "TODOSYNC_DB_PASSWORD='s3cret value'\nTODOSYNC_HTTP_PORT=9090\nTODOSYNC_ADMIN_PASSWORD=hunter2\n",
            environment: ["TODOSYNC_WORKERS": "20"])
        let text = config.render()
        XCTAssertFalse(text.contains("s3cret"), text)
        XCTAssertFalse(text.contains("hunter2"), text)
        XCTAssertTrue(text.contains("TODOSYNC_DB_PASSWORD=<redacted>"), text)
        XCTAssertTrue(text.contains("TODOSYNC_WORKERS=20"), text)
        let entries = config.entries()
        // the file's variable no setting reads is listed after the settings, marked unknown
        let unknown = try XCTUnwrap(entries.first { $0.name == "TODOSYNC_HTTP_PORT" })
        XCTAssertFalse(unknown.isKnown)
        XCTAssertEqual(unknown.shownValue, "9090")
        XCTAssertEqual(entries.first { $0.name == "TODOSYNC_ADMIN_PASSWORD" }?.shownValue, "<redacted>")
        XCTAssertEqual(entries.prefix(settings.count).map(\.name), settings.map(\.name))
    }

    func testAssignmentsLeaveSecretsOut() throws {
        let config = try configuration(file: "TODOSYNC_DB_PASSWORD=s3cret\n", environment: ["TODOSYNC_WORKERS": "20"])
        XCTAssertEqual(config.renderAssignments(), "TODOSYNC_WORKERS=20\nTODOSYNC_DB_NAME=todosync\nTODOSYNC_LISTEN=\n")
    }

    func testFileSyntax() throws {
        let values = try ConfigFile.parse("""
            # a comment

            export TODOSYNC_A=plain   # trailing comment
            TODOSYNC_B='single $quoted # not a comment'
            TODOSYNC_C="double \\"quoted\\" \\$HOME"
            TODOSYNC_D=
            """, path: "f")
        XCTAssertEqual(values["TODOSYNC_A"], "plain")
        XCTAssertEqual(values["TODOSYNC_B"], "single $quoted # not a comment")
        XCTAssertEqual(values["TODOSYNC_C"], "double \"quoted\" $HOME")
        XCTAssertEqual(values["TODOSYNC_D"], "")
    }

    func testFileErrorsNameTheLine() {
        for (text, line) in [("TODOSYNC_A=1\nnot an assignment\n", 2), ("X=$(reboot)", 1), ("A=\"unterminated", 1),
                             ("A=\"$HOME\"", 1), ("1A=x", 1), ("A=x y", 1)] {
            XCTAssertThrowsError(try ConfigFile.parse(text, path: "f"), text) { error in
                XCTAssertEqual((error as? ConfigFileError)?.line, line, text)
            }
        }
    }
}

final class SettingRuleTests: XCTestCase {
    let settings = [
        Setting("TODOSYNC_WORKERS", default: "8", rule: .integer(1...1024), "workers"),
        Setting("TODOSYNC_LOG_LEVEL", default: "info", rule: .oneOf(["debug", "info"]), "level"),
        Setting("TODOSYNC_DB_PASSWORD", secret: true, rule: .oneOf(["never-shown"]), "password"),
        Setting("TODOSYNC_LISTEN", "anything"),
    ]

    func problems(_ environment: [String: String]) throws -> [String] {
        try LayeredConfiguration(settings: settings, environment: environment).problems()
    }

    func testDefaultsAndUnsetValuesAreValid() throws {
        XCTAssertEqual(try problems([:]), [])
        XCTAssertEqual(try problems(["TODOSYNC_WORKERS": "12", "TODOSYNC_LOG_LEVEL": "debug", "TODOSYNC_LISTEN": "x"]), [])
    }

    func testEachBadValueIsNamedWithItsSource() throws {
        let found = try problems(["TODOSYNC_WORKERS": "abc", "TODOSYNC_LOG_LEVEL": "verbose"])
        XCTAssertEqual(found, [
            "TODOSYNC_WORKERS=abc (environment): must be an integer from 1 to 1024",
            "TODOSYNC_LOG_LEVEL=verbose (environment): must be one of debug, info",
        ])
        XCTAssertEqual(try problems(["TODOSYNC_WORKERS": "0"]).count, 1)
        XCTAssertEqual(try problems(["TODOSYNC_WORKERS": "1025"]).count, 1)
        XCTAssertEqual(try problems(["TODOSYNC_WORKERS": " 8"]).count, 1)
    }

    func testASecretIsNotPrintedInAProblem() throws {
        let found = try problems(["TODOSYNC_DB_PASSWORD": "hunter2hunter2"])
        XCTAssertEqual(found.count, 1)
        XCTAssertFalse(found[0].contains("hunter2"), found[0])
    }
}
