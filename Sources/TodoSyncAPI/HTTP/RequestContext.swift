import TodoSyncCore
import TodoSyncStore

/// What a route handler gets: the request, its path parameters, the worker's store, and the
/// authenticated user (resolved lazily, once).
public final class RequestContext {
    public let request: HTTPRequest
    public let pathParameters: [String]
    package let store: Store
    private let encoder: ResponseEncoder
    /// The user whose token ``requireUser()`` accepted (for the request log; nil before).
    public private(set) var userID: Int64?
    /// The `deviceId` of a push, named in the live-sync poke its commit sends (nil: a REST write).
    var pushingDevice: String?
    /// Set by a route that revoked tokens (password change, session revoke, account delete): after
    /// its commit the user's open live streams are closed, so a revoked token's stream ends at once
    /// (the streams of valid tokens reconnect and are authorized anew).
    var closesLiveStreams = false
    /// Set by a route that changed friends lists or requests: after its commit those users'
    /// `friends=1` streams get `{"friendId": null}` (`Application.announce`).
    var friendListChange: FriendListChange?
    /// The user whose token was checked for this request already (`authenticated(as:)`).
    private var verifiedUserID: Int64?

    init(request: HTTPRequest, pathParameters: [String], store: Store, encoder: ResponseEncoder) {
        self.request = request
        self.pathParameters = pathParameters
        self.store = store
        self.encoder = encoder
    }

    /// Whether the request's `Accept-Encoding` accepts gzip (the worker's encoder remembers the
    /// last value read).
    var acceptsGzip: Bool {
        request.header("accept-encoding").map(encoder.acceptsGzip) ?? false
    }

    /// Authentication, the step every route but register and login takes: the bearer token's
    /// user, or `unauthenticated` (401).
    package func requireUser() throws -> Int64 {
        if let verifiedUserID {
            userID = verifiedUserID
            return verifiedUserID
        }
        guard let token = bearerToken(), let userID = try store.authenticate(token: token) else {
            throw DomainError.unauthenticated
        }
        self.userID = userID
        return userID
    }

    /// Authentication left to the store's read, for the hot list reads: the bearer token, which
    /// the read checks in the same statement as it reads (`Authentication.token`), or
    /// `unauthenticated` at once when there is none. Pair with `parseBeforeAuthentication`.
    func authenticationInRead() throws -> Authentication {
        if let verifiedUserID { return .user(verifiedUserID) }
        guard let token = bearerToken() else { throw DomainError.unauthenticated }
        return .token(token)
    }

    /// Records that this request's bearer token was checked just now and belongs to `userID`
    /// (the in-flight count resolved it), so the route does not check it a second time.
    func authenticated(as userID: Int64) {
        verifiedUserID = userID
    }

    /// The list a hot read returned, as the response's `items`; its owner becomes the request's
    /// user (for the request log).
    func items(_ list: RenderedList) -> HTTPResponse {
        userID = list.userID
        if let gzipped = list.gzippedItems { return ResponseEncoder.gzipped(.json(200, gzipped)) }
        return .json(200, member: "items", list.json)
    }

    /// Parses request input on a route that checks its token late (in its store read), keeping
    /// the order clients see everywhere else: an unknown token is a 401 even when the input is
    /// also bad. Only a failed parse costs the separate token check.
    func parseBeforeAuthentication<T>(_ parse: () throws -> T) throws -> T {
        do {
            return try parse()
        } catch {
            _ = try requireUser()
            throw error
        }
    }

    /// The token from `Authorization: Bearer <token>`, if well-formed. Parsed once per request
    /// (the in-flight count and the route both ask).
    func bearerToken() -> String? {
        if let parsedBearerToken { return parsedBearerToken }
        let token = request.header("authorization").flatMap(Self.bearerToken(in:))
        parsedBearerToken = .some(token)
        return token
    }

    /// `bearerToken()`'s answer once asked: `.some(nil)` when the request has no usable token.
    private var parsedBearerToken: String??

    /// The token of an `Authorization` value: the scheme `Bearer` (any case), then the token with
    /// surrounding whitespace trimmed, non-empty and at most 256 characters. A value of printable
    /// ASCII (every real one) is read byte by byte; anything else takes the general path, which
    /// gives the same answer for ASCII.
    static func bearerToken(in header: String) -> String? {
        var header = header
        let fast: String?? = header.withUTF8 { bytes in
            guard bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else { return .none }
            let space = UInt8(ascii: " ")
            var index = 0
            while index < bytes.count, bytes[index] == space { index += 1 }
            let scheme = index
            while index < bytes.count, bytes[index] != space { index += 1 }
            guard index - scheme == 6,
                  zip("bearer".utf8, bytes[scheme..<index]).allSatisfy({ $0 == $1 | 0x20 }) else { return .some(nil) }
            var start = index, end = bytes.count
            while start < end, bytes[start] == space { start += 1 }
            while end > start, bytes[end - 1] == space { end -= 1 }
            guard start < end, end - start <= 256 else { return .some(nil) }
            return .some(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
        }
        return fast ?? generalBearerToken(in: header)
    }

    /// `bearerToken(in:)` for any value, by characters (the fast path's oracle in the tests).
    static func generalBearerToken(in header: String) -> String? {
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingWhitespace()
        guard !token.isEmpty, token.count <= 256 else { return nil }
        return token
    }

    /// The path parameter at `index` as a record id; anything but a positive integer names no
    /// record (404).
    func id(at index: Int = 0) throws -> Int64 {
        guard index < pathParameters.count, let id = Int64(pathParameters[index]), id > 0,
              pathParameters[index].allSatisfy(\.isASCII) else {
            throw DomainError.notFound
        }
        return id
    }

    /// The JSON body, after the media-type check (415) and parsing (400).
    func jsonBody() throws -> JSONValue {
        if request.bodyTooLarge { throw APIError.payloadTooLarge }
        if !request.body.isEmpty || request.header("content-type") != nil {
            guard isJSONContentType(request.header("content-type")) else { throw APIError.unsupportedMediaType }
        }
        guard !request.body.isEmpty else { throw APIError.malformedJSON("the body is empty") }
        do {
            return try JSONParser.parse(request.body)
        } catch {
            throw APIError.malformedJSON(error.reason)
        }
    }

    /// A reader over the JSON body's object.
    package func bodyReader() throws -> FieldReader {
        try FieldReader(try jsonBody())
    }

    /// The `If-Match` precondition, if any.
    var ifMatch: IfMatch? { IfMatch(header: request.header("if-match")) }

    private func isJSONContentType(_ value: String?) -> Bool {
        guard let value else { return false }
        let parts = value.split(separator: ";")
        guard let mediaType = parts.first?.trimmingWhitespace().lowercased(), mediaType == "application/json"
        else { return false }
        for parameter in parts.dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0].trimmingWhitespace().lowercased() == "charset" {
                let charset = pair[1].trimmingWhitespace().lowercased().replacingOccurrences(of: "\"", with: "")
                if charset != "utf-8" && charset != "utf8" { return false }
            }
        }
        return true
    }
}
