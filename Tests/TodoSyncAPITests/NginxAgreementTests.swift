import Foundation
import Logging
import MariaDB
@testable import TodoSyncAPI
import TodoSyncCore
import TodoSyncStore
import XCTest

/// The repository's files that restate facts the responder owns (nginx's templates, openapi.yaml,
/// docs/API.md), read from the checkout these tests were built from.
private enum Repository {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    static func text(_ path: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
    }

    static func nginxTemplates() throws -> [(name: String, text: String)] {
        let directory = root.appendingPathComponent("nginx")
        return try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".template") }.sorted()
            .map { ($0, try text("nginx/\($0)")) }
    }

    static func matches(_ pattern: String, in text: String, options: NSRegularExpression.Options = []) -> [[String?]] {
        let regex = try! NSRegularExpression(pattern: pattern, options: options)
        let whole = text as NSString
        return regex.matches(in: text, range: NSRange(location: 0, length: whole.length)).map { match in
            (0..<match.numberOfRanges).map { index in
                let range = match.range(at: index)
                return range.location == NSNotFound ? nil : whole.substring(with: range)
            }
        }
    }
}

/// nginx answers some errors itself (no route, 405, 413, limits, no responder) with bodies written
/// literally in its templates. Where the responder has a message for the same status and code,
/// nginx must say the same thing: a client must not see two wordings of one error depending on
/// which of the two answered.
final class NginxErrorBodyTests: XCTestCase {
    /// The responder's fixed error bodies: `"status code"` → its messages (`not_found` has two:
    /// no route, no record). Codes whose message is written where it is thrown (`bad_request`,
    /// `rate_limited`) have no fixed message and are not compared.
    private static func responderTable() -> [String: Set<String>] {
        let domain: [DomainError] = [
            .unauthenticated, .badCredentials, .wrongPassword(field: "password"), .notFound,
            .versionMismatch(current: [], version: 1), .validation([]), .emailTaken, .cursorExpired,
            .cursorFromAnotherHistory, .unavailable, .outcomeUnknown,
        ]
        let errors = [APIError.noRoute, .methodNotAllowed(allowed: []), .payloadTooLarge, .bodyNotAllowed,
                      .rangeNotSatisfiable(size: 0), .unsupportedMediaType,
                      .internalError] + domain.map(APIError.init)
        var table: [String: Set<String>] = [:]
        for error in errors { table["\(error.status) \(error.code)", default: []].insert(error.message) }
        return table
    }

    /// Every error body in nginx's templates: `return NNN '{...}'` and the `map $status` lines
    /// (`NNN '{...}'`, `default` being the 500).
    private static func nginxBodies() throws -> [(template: String, status: String, code: String, message: String)] {
        var bodies: [(String, String, String, String)] = []
        for (name, text) in try Repository.nginxTemplates() {
            let pattern = #"(?:return\s+(\d{3})|^\s*(\d{3}|default))\s+'(\{"error":[^']*\})'"#
            for match in Repository.matches(pattern, in: text, options: [.anchorsMatchLines]) {
                let status = match[1] ?? (match[2] == "default" ? "500" : match[2]!)
                let json = try JSONSerialization.jsonObject(with: Data(match[3]!.utf8)) as? [String: Any]
                let error = try XCTUnwrap(json?["error"] as? [String: String], "\(name): \(match[0]!)")
                bodies.append((name, status, try XCTUnwrap(error["code"]), try XCTUnwrap(error["message"])))
            }
        }
        return bodies
    }

    func testNginxSaysWhatTheResponderSays() throws {
        let table = Self.responderTable()
        let bodies = try Self.nginxBodies()
        // Both templates hold a full set (a stack's nginx.conf, an installed host's site).
        XCTAssertGreaterThanOrEqual(bodies.count, 30, "nginx's error bodies were not found")
        var compared = Set<String>()
        for body in bodies {
            guard let messages = table["\(body.status) \(body.code)"] else { continue }
            compared.insert(body.code)
            XCTAssertTrue(messages.contains(body.message),
                          "nginx/\(body.template): \(body.status) \(body.code) says \"\(body.message)\"; "
                              + "the responder says \(messages.sorted())")
        }
        XCTAssertEqual(compared, ["not_found", "method_not_allowed", "payload_too_large", "internal_error",
                                  "unavailable", "outcome_unknown", "range_not_satisfiable"])
    }
}

/// The route table lives in the Router's registrations (Sources/TodoSyncAPI/Routes). nginx's method
/// map (the `Allow` of the 405s nginx answers itself), openapi.yaml's paths and docs/API.md's route
/// table restate it; these tests fail when one of them lists a route or method the Router does not,
/// or misses one it does.
final class RouteTableTests: XCTestCase {
    static func productionRouter() -> Router { router() }

    /// The production router (no test hooks), over a store that never connects.
    private static func router() -> Router {
        let connection = Connection(configuration: ConnectionConfiguration(
            unixSocket: "/nonexistent/todosync-test.sock", user: "nobody", password: "", database: "none",
            connectTimeoutSeconds: 1))
        return Application(store: Store(connection: connection), logger: Logger(label: "test")).router
    }

    private static func routes() -> [(method: String, pattern: String)] {
        router().table.map { ($0.method, $0.pattern) }
    }

    /// The routes counted as open streams (`AccountLimit.openStreams`) are the ones nginx's live-sync
    /// snippet gives a location of their own (outside `location /api/`'s per-account limit_conn).
    func testStreamRoutesHaveNginxsStreamLocation() throws {
        let streams = Set(Self.router().table.filter { if case .openStreams = $0.limit { true } else { false } }
            .map(\.pattern))
        let locations = Set(Repository.matches(#"^location = (/\S+) \{"#,
                                                in: try Repository.text("nginx/live-locations.conf.template"),
                                                options: [.anchorsMatchLines]).map { $0[1]! })
        XCTAssertFalse(streams.isEmpty)
        XCTAssertEqual(streams, locations, "open-stream routes vs nginx/live-locations.conf.template's locations")
    }

    /// The routes that take an account back (`AccountLimit.takesTheAccountBack`: logout, session
    /// revoke, account delete) reach the responders in both server templates through a location
    /// without the per-token `limit_conn` (issue 34): `/api/v1/auth/` for logout, the regex
    /// location after `/api/` for the others.
    func testRoutesThatTakeTheAccountBackHaveNoPerTokenLimitInNginx() throws {
        let routes = Self.router().table.filter { if case .takesTheAccountBack = $0.limit { true } else { false } }
            .map(\.pattern)
        XCTAssertEqual(Set(routes), ["/api/v1/auth/logout", "/api/v1/account/sessions/:id", "/api/v1/account/delete"])
        for name in ["nginx/todosync.conf.template", "nginx/todosync-site.conf.template"] {
            let text = try Repository.text(name)
            let blocks = Repository.matches(#"location ~ (\^/api/v1/account/\S+) \{([^}]*)\}"#, in: text)
            XCTAssertEqual(blocks.count, 1, "\(name): one regex location for the account routes")
            guard let block = blocks.first else { continue }
            let regex = try NSRegularExpression(pattern: block[1]!)
            for pattern in routes where pattern.hasPrefix("/api/v1/account/") {
                let path = pattern.replacingOccurrences(of: ":id", with: "0f1e2d3c4b5a69788796a5b4c3d2e1f0")
                XCTAssertNotNil(regex.firstMatch(in: path, range: NSRange(location: 0, length: (path as NSString).length)),
                                "\(name): \(path)")
            }
            for other in ["/api/v1/account/sessions", "/api/v1/account/export", "/api/v1/account/password", "/api/v1/todos"] {
                XCTAssertNil(regex.firstMatch(in: other, range: NSRange(location: 0, length: (other as NSString).length)),
                             "\(name): \(other) keeps the per-token limit")
            }
            XCTAssertFalse(block[2]!.contains("todosync_account"), "\(name): no per-token limit_conn")
            XCTAssertTrue(block[2]!.contains("client_max_body_size 1m;"), name)
            XCTAssertTrue(block[2]!.contains("limit_conn todosync_addr"), name)
        }
    }

    private static func routeSet() -> Set<String> {
        Set(routes().map { route in
            let path = route.pattern.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }.joined(separator: "/")
            return "\(route.method) \(path)"
        })
    }

    private static func assertSame(_ documented: Set<String>, in place: String, file: StaticString = #filePath,
                                   line: UInt = #line) {
        let routes = routeSet()
        XCTAssertEqual(routes.subtracting(documented).sorted(), [], "routed, missing from \(place)", file: file, line: line)
        XCTAssertEqual(documented.subtracting(routes).sorted(), [], "in \(place), not routed", file: file, line: line)
    }

    func testOpenAPIPathsAreTheRoutes() throws {
        var documented = Set<String>()
        var path: String?
        for line in try Repository.text("openapi.yaml").split(separator: "\n", omittingEmptySubsequences: false) {
            if let match = Repository.matches(#"^  (/\S*):\s*$"#, in: String(line)).first {
                path = match[1]
            } else if let match = Repository.matches(#"^    (get|put|post|patch|delete):\s*$"#, in: String(line)).first,
                      let path {
                documented.insert("\(match[1]!.uppercased()) \(path)")
            } else if !line.hasPrefix(" "), !line.isEmpty {
                path = nil
            }
        }
        Self.assertSame(documented, in: "openapi.yaml's paths")
    }

    func testAPIDocsRouteTableIsTheRoutes() throws {
        var documented = Set<String>()
        for line in try Repository.text("docs/API.md").split(separator: "\n") where line.hasPrefix("| `") {
            let cell = String(line.split(separator: "|")[0])
            guard let path = Repository.matches(#"(/[^\s`?]+)"#, in: cell).first?[1] else { continue }
            for method in Repository.matches(#"\b(GET|PUT|POST|PATCH|DELETE)\b"#, in: cell) {
                documented.insert("\(method[1]!) \(path)")
            }
        }
        Self.assertSame(documented, in: "docs/API.md's route table")
    }

    /// For each route's path, nginx's `$todosync_route_methods` (first matching regex, as nginx's
    /// map picks) gives the responder's own `Allow`; and every entry of the map matches a route.
    func testNginxMethodMapIsTheRoutes() throws {
        let text = try Repository.text("nginx/todosync.conf.template")
        let block = try XCTUnwrap(Repository.matches(#"map \$request_uri \$todosync_route_methods \{([^}]*)\}"#,
                                                     in: text).first?[1], "the method map is gone")
        let entries = Repository.matches(#""~([^"]+)"\s+"([^"]+)";"#, in: block)
            .map { (regex: try! NSRegularExpression(pattern: $0[1]!), methods: $0[2]!) }
        XCTAssertFalse(entries.isEmpty)
        let router = Self.router()
        var used = Set<Int>()
        for pattern in Set(Self.routes().map(\.pattern)) {
            let path = pattern.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0.hasPrefix(":") ? "sample-\($0.dropFirst())" : String($0) }.joined(separator: "/")
            guard case .methodNotAllowed(let allowed) = router.match(method: "TRACE", path: path) else {
                XCTFail("\(path) should have routes")
                continue
            }
            let range = NSRange(location: 0, length: (path as NSString).length)
            guard let index = entries.firstIndex(where: { $0.regex.firstMatch(in: path, range: range) != nil }) else {
                XCTFail("nginx's method map has no entry for \(pattern)")
                continue
            }
            used.insert(index)
            XCTAssertEqual(entries[index].methods, allowed.joined(separator: ", "), "nginx's Allow for \(pattern)")
        }
        for (index, entry) in entries.enumerated() where !used.contains(index) {
            XCTFail("nginx's method map entry \(entry.regex.pattern) matches no route")
        }
    }
}

/// nginx refuses a body over `Router.noBodyLimit` on the routes that take none before reading it
/// (nginx/body-limits-http.conf.template); the Router knows which routes those are. The map's
/// classification and its length threshold must be the Router's.
final class NginxBodyLimitTests: XCTestCase {
    private static func maps() throws -> (takesNoBody: [(key: String, value: String)], refused: [(key: String, value: String)]) {
        let text = try Repository.text("nginx/body-limits-http.conf.template")
        func entries(_ variable: String) throws -> [(key: String, value: String)] {
            // The block ends at the `}` that starts a line (the regexes hold braces of their own).
            let block = try XCTUnwrap(Repository.matches(#"map "[^"]*" \$"# + variable + #" \{(.*?)\n\}"#, in: text,
                                                         options: [.dotMatchesLineSeparators])
                .first?[1], "map \(variable) is gone")
            return Repository.matches(#"^\s*("[^"]*"|\S+)\s+(\S+);"#, in: block, options: [.anchorsMatchLines])
                .map { (key: $0[1]!.trimmingCharacters(in: CharacterSet(charactersIn: "\"")), value: $0[2]!) }
        }
        return (try entries("todosync_takes_no_body"), try entries("todosync_body_refused"))
    }

    /// nginx's map as nginx evaluates it: exact keys first, then regexes in order, then default.
    private static func evaluate(_ entries: [(key: String, value: String)], _ input: String) -> String {
        if let exact = entries.first(where: { !$0.key.hasPrefix("~") && $0.key != "default" && $0.key == input }) {
            return exact.value
        }
        for entry in entries where entry.key.hasPrefix("~") {
            let regex = try! NSRegularExpression(pattern: String(entry.key.dropFirst()))
            if regex.firstMatch(in: input, range: NSRange(location: 0, length: (input as NSString).length)) != nil {
                return entry.value
            }
        }
        return entries.first(where: { $0.key == "default" })?.value ?? ""
    }

    func testNginxKnowsWhichRoutesTakeNoBody() throws {
        let map = try Self.maps().takesNoBody
        for route in RouteTableTests.productionRouter().table {
            let path = route.pattern.split(separator: "/", omittingEmptySubsequences: false)
                .map { $0.hasPrefix(":") ? "7" : String($0) }.joined(separator: "/")
            let methods = route.method == "GET" ? ["GET", "HEAD"] : [route.method]
            for method in methods {
                XCTAssertEqual(Self.evaluate(map, "\(method) \(path)"), route.takesBody ? "0" : "1",
                               "\(method) \(route.pattern): nginx's map vs the Router's takesBody")
            }
        }
    }

    func testNginxRefusesFromTheRouterLimit() throws {
        let map = try Self.maps().refused
        let limit = Router.noBodyLimit
        for length in [0, 1, limit - 1, limit] {
            XCTAssertEqual(Self.evaluate(map, "1:\(length):"), "0", "a body of \(length) bytes is allowed")
        }
        for length in [limit + 1, limit + 2, limit + 9, limit + 10, limit + 76, limit + 99, 2 * limit, 9_999, 10_000,
                       209_715_200, Int(Int32.max)] {
            XCTAssertEqual(Self.evaluate(map, "1:\(length):"), "1", "a body of \(length) bytes is refused")
            XCTAssertEqual(Self.evaluate(map, "0:\(length):"), "0", "a route that takes a body: \(length) is nginx's 1m limit's")
        }
        XCTAssertEqual(Self.evaluate(map, "1::chunked"), "1", "a body of undeclared length")
        XCTAssertEqual(Self.evaluate(map, "1::"), "0", "no body")
        // Every length from 0 to 3 x the limit, against the Router's own rule.
        for length in 0...(3 * limit) {
            XCTAssertEqual(Self.evaluate(map, "1:\(length):") == "1", length > limit, "\(length)")
        }
    }
}

/// nginx compresses what the responder leaves alone from the same length on: a body the
/// responder sends as it is for being short must not be compressed by nginx instead.
final class NginxGzipTests: XCTestCase {
    func testNginxCompressesFromTheResponderLength() throws {
        var seen = 0
        for template in try Repository.nginxTemplates() {
            for match in Repository.matches(#"gzip_min_length\s+(\d+);"#, in: template.text) {
                XCTAssertEqual(Int(match[1]!), ResponseEncoder.minimumLength, template.name)
                seen += 1
            }
        }
        XCTAssertGreaterThan(seen, 0, "no template sets gzip_min_length")
    }
}
