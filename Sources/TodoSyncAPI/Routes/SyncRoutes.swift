import TodoSyncCore
import TodoSyncSnapshot
import TodoSyncStore

extension Application {
    func registerSyncRoutes() {
        router.add("GET", "/api/v1/sync/pull") { context in
            let userID = try context.requireUser()
            let query = context.request.query
            var limit = 500
            if let text = query["limit"] {
                guard let value = Int(text), (1...1000).contains(value) else {
                    throw APIError.badRequest("`limit` must be an integer from 1 to 1000.")
                }
                limit = value
            }
            var cursor: SyncCursor?
            if let text = query["cursor"], !text.isEmpty {
                guard let decoded = SyncCursor(encoded: text, userID: userID) else {
                    throw APIError.badRequest("`cursor` is not a cursor this server issued to you.")
                }
                cursor = decoded
            }
            let window = try Self.syncWindow(query)
            if let cursor, cursor.window != window {
                let problem = cursor.window == nil ? "is a whole pull's cursor: pull a window without a cursor first"
                    : window == nil ? "belongs to a window (from/to): give the same window, or pull without a cursor"
                    : "belongs to another window: give its window, or pull the new window without a cursor"
                throw APIError(status: 400, code: "bad_request", message: "`cursor` \(problem).",
                               details: [FieldProblem(field: "cursor", problem: problem)])
            }
            var deviceID: String?
            if let text = query["deviceId"] {
                // The same rule as push's `deviceId` (Unicode scalars).
                let length = PushRequest.deviceIDLength
                guard length.contains(text.unicodeScalars.count) else {
                    throw APIError.badRequest("`deviceId` must be \(length.lowerBound)–\(length.upperBound) characters long.")
                }
                deviceID = text
            }
            let schemaVersion = try context.syncSchemaVersion(.query(query["schemaVersion"]))
            let page = try context.store.pull(userID: userID, cursor: cursor, window: window, limit: limit,
                                              deviceID: deviceID, schemaVersion: schemaVersion)
            return .json(200, page.jsonBody)
        }
        router.add("POST", "/api/v1/sync/push") { context in
            let userID = try context.requireUser()
            var reader = try context.bodyReader()
            let schemaVersion = try context.syncSchemaVersion(.body(reader.value("schemaVersion")))
            var request = try PushRequest.parse(&reader)
            request.schemaVersion = schemaVersion
            context.pushingDevice = request.deviceID
            // Every result is stored under its opId, so the same push again answers the same bytes.
            var response = HTTPResponse.json(200, member: "results", try context.store.push(userID: userID, request))
            response.isRebuiltByRepeat = true
            return response
        }
        // Snapshot (contract, "Sync: snapshot"; the file: docs/SNAPSHOT.md): the responder
        // authorizes, finds or builds the user's file in the cache (and its gzip companion when
        // gzip is accepted), answers 304 itself, and hands every other answer to nginx's internal
        // /__snapshot/ location, which sends the file from disk (Content-Length, Range → 206) with
        // the ETag, Repr-Digest and Content-Encoding passed here.
        let testHooks = options.testHooks
        router.add("GET", "/api/v1/sync/snapshot") { context in
            let userID = try context.requireUser()
            let schemaVersion = try context.syncSchemaVersion(.query(context.request.query["schemaVersion"]))
            let window = try Self.syncWindow(context.request.query)
            let pause = try testHooks?.snapshotPause(context.request)
            let entry = try context.store.snapshot(userID: userID, schemaVersion: schemaVersion, window: window,
                                                   afterRead: pause)
            // gzip when the request accepts it (q-values: `gzip;q=0` refuses): the file's companion,
            // with its own ETag and Repr-Digest (of the encoded bytes); ranges are of those bytes.
            // `Vary: Accept-Encoding` on both variants, 304 included. `If-None-Match` is compared
            // with the tag of the variant this request gets: the other variant's tag is a 200.
            let gzip = context.acceptsGzip
            let vary = HTTPHeader("Vary", "Accept-Encoding")
            let etag = gzip ? entry.gzipETag : entry.etag
            if let condition = context.request.header("if-none-match"), Self.matches(condition, etag) {
                return HTTPResponse(status: 304, headers: [HTTPHeader("ETag", etag), vary])
            }
            let companion = gzip ? try context.store.snapshotGzip(entry) : nil
            let path = companion?.relativePath ?? entry.relativePath
            let sent = companion?.etag ?? entry.etag
            // A range nginx would refuse (one that starts past the end, or one it cannot parse) is
            // answered here, as the contract's JSON error: nginx's own 416 is an HTML page that
            // would keep the headers given for the file (Content-Encoding: gzip among them).
            if let range = context.request.header("range"),
               context.request.header("if-range").map({ $0.trimmingWhitespace() == sent }) ?? true,
               let size = context.store.snapshotFileSize(path), !Self.nginxServes(range: range, size: size) {
                throw APIError.rangeNotSatisfiable(size: size, headers: [HTTPHeader("ETag", sent), vary])
            }
            var headers = [
                HTTPHeader("X-Accel-Redirect", "\(Self.snapshotLocation)\(path)"),
                HTTPHeader("X-Snapshot-ETag", sent),
                HTTPHeader("X-Snapshot-Repr-Digest", companion?.reprDigest ?? entry.reprDigest),
            ]
            if companion != nil { headers.append(HTTPHeader("X-Snapshot-Content-Encoding", "gzip")) }
            return HTTPResponse(status: 200, headers: headers)
        }
        // Live sync (contract, "Sync: live (pokes)"): the responder authenticates the stream
        // (401, 426 before any stream starts) and hands it to nginx's internal nchan subscriber
        // location for this user's channel; nginx holds it (no worker waits), counts the
        // account's open streams (429) and pings it. See LivePublisher for the pokes.
        router.add("GET", "/api/v1/sync/live", limit: .openStreams) { context in
            let userID = try context.requireUser()
            _ = try context.syncSchemaVersion(.query(context.request.query["schemaVersion"]))
            // `friends=1` adds the user's friends channel (`event: friend`, docs/FRIENDS.md).
            let withFriends: Bool
            switch context.request.query["friends"] {
            case nil, "0": withFriends = false
            case "1": withFriends = true
            default: throw APIError.badRequest("`friends` must be 1 or 0.")
            }
            // nchan serves an event stream only to a request that asks for one; anything else got
            // its bare 403 with no body. A contract error instead, before the handover.
            guard context.request.header("accept")?.lowercased().contains("text/event-stream") == true else {
                throw APIError.badRequest("This route serves Server-Sent Events only: send `Accept: text/event-stream`.")
            }
            // A Last-Event-ID nchan cannot parse got its bare text/plain 400: the contract's JSON
            // 400 here instead, before the handover.
            if let id = context.request.header("last-event-id"), !Self.isLiveEventID(id, channels: withFriends ? 2 : 1) {
                throw APIError.badRequest("Last-Event-ID is not the id of an event of this stream.")
            }
            // HEAD: the stream's headers, answered here. Handed to nchan, a HEAD was never
            // answered (the client waited and nginx logged status 000).
            if context.request.method == "HEAD" {
                return HTTPResponse(status: 200, headers: [HTTPHeader("Content-Type", "text/event-stream; charset=utf-8")])
            }
            return HTTPResponse(status: 200, headers: [
                HTTPHeader("X-Accel-Redirect", "\(withFriends ? LivePublisher.subscribeWithFriendsPathPrefix : LivePublisher.subscribePathPrefix)\(userID)"),
            ])
        }
    }
}

extension Application {
    /// nginx's internal location of the snapshot cache directory (nginx/live-locations.conf.template).
    static let snapshotLocation = "/__snapshot/"

    /// Whether nginx serves the file for this `Range` (206, or 200 when it ignores the header)
    /// rather than answering 416 itself. nginx (1.22, `max_ranges 1`) ignores a header that is not
    /// `bytes=` or that lists several ranges, and refuses with 416 every other one it cannot parse
    /// (`bytes=abc`, `bytes=5-3`, `bytes=-`, a number past 2^63) or that starts past the end (and
    /// the empty suffix `bytes=-0`). What it refuses is answered by the responder instead.
    static func nginxServes(range: String, size: Int64) -> Bool {
        let value = range.trimmingWhitespace()
        guard value.lowercased().hasPrefix("bytes=") else { return true }
        let set = value.dropFirst(6)
        // Several ranges: nginx sends the whole file (max_ranges 1) when each parses and one fits.
        let specs = set.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingWhitespace() }
        let satisfiable = specs.map { Self.satisfiable($0, size: size) }
        return !satisfiable.contains(nil) && satisfiable.contains(true)
    }

    /// One `first-[last]` or `-suffix` spec: nil when nginx cannot parse it, else whether a byte
    /// of `size` satisfies it.
    private static func satisfiable(_ spec: String, size: Int64) -> Bool? {
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        let first = parts[0].trimmingWhitespace(), last = parts[1].trimmingWhitespace()
        func number(_ text: String) -> Int64? {
            guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            return Int64(text)
        }
        if first.isEmpty {
            guard let suffix = number(last) else { return nil }
            return suffix > 0 && size > 0
        }
        guard let start = number(first) else { return nil }
        if last.isEmpty { return start < size }
        guard let end = number(last), end >= start else { return nil }
        return start < size
    }

    /// Whether `id` has the form of the SSE ids nchan writes: `<time>:<tag>` on a stream of one
    /// channel, the tag possibly bracketed (`1796655753:0`, `1796655753:[0]`); on a `friends=1`
    /// stream (two channels multiplexed, docs/FRIENDS.md) one tag per channel, comma-separated,
    /// the one of the event bracketed and a channel without a message yet `-`
    /// (`1796664990:[0],-`). nchan answers other forms it cannot parse with a text/plain 400.
    /// `channels`: the stream's, 1 or 2 (`friends=1`); an id of another stream's form is refused.
    static func isLiveEventID(_ id: String, channels: Int = 1) -> Bool {
        let parts = id.trimmingWhitespace().split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...12).contains(parts[0].count), parts[0].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return false }
        let tags = parts[1].split(separator: ",", omittingEmptySubsequences: false)
        guard tags.count == channels else { return false }
        return tags.allSatisfy { part in
            var tag = Substring(part)
            if tag.hasPrefix("[") && tag.hasSuffix("]") && tag.count >= 2 { tag = tag.dropFirst().dropLast() }
            if tags.count > 1 && tag == "-" { return true }
            if tag.hasPrefix("-") { tag = tag.dropFirst() }
            return (1...5).contains(tag.count) && tag.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 }
        }
    }

    /// The window a pull or snapshot asks for (`from`, `to`; API.md "Windows (partial sync)"):
    /// nil when neither is given. A value that is not a date from 2000-01-01 to 2999-12-31 (an
    /// empty one included), or `from` after `to`, is 400 with a detail on the parameter.
    static func syncWindow(_ query: [String: String]) throws -> SyncWindow? {
        func day(_ name: String) throws -> Day? {
            guard let text = query[name] else { return nil }
            guard let day = Day(text) else {
                let problem = "must be a date YYYY-MM-DD from 2000-01-01 to 2999-12-31"
                throw APIError(status: 400, code: "bad_request", message: "`\(name)` \(problem).",
                               details: [FieldProblem(field: name, problem: problem)])
            }
            return day
        }
        let from = try day("from"), to = try day("to")
        guard from != nil || to != nil else { return nil }
        guard let window = SyncWindow(from: from, to: to) else {
            let problem = "must not be after `to`"
            throw APIError(status: 400, code: "bad_request", message: "`from` \(problem).",
                           details: [FieldProblem(field: "from", problem: problem)])
        }
        return window
    }

    /// `If-None-Match` (RFC 9110 13.1.2, weak comparison): `*` or a list that holds `etag`.
    static func matches(_ condition: String, _ etag: String) -> Bool {
        condition.split(separator: ",").contains { candidate in
            var tag = String(candidate).trimmingWhitespace()
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == "*" || tag == etag
        }
    }
}

/// Where a sync request names its schema version: a GET's query, or a push body's member.
enum RequestedSchemaVersion {
    case query(String?)
    case body(JSONValue?)
}

extension RequestContext {
    /// The schema version a sync request (pull, push; snapshot and live call this too) is served
    /// at (API.md "Schema versions"): absent (or a `null` body member) is 1; a value that is not an
    /// integer is 400 in a query, 422 in a body; any integer below the configured minimum is 426
    /// `upgrade_required`, before anything is read or applied; above the current version, the
    /// current one.
    func syncSchemaVersion(_ requested: RequestedSchemaVersion) throws -> Int {
        let version: Int
        switch requested {
        case .query(nil), .body(nil), .body(.null?):
            version = SchemaVersion.first
        case .query(let text?):
            guard let integer = SchemaVersion.integer(text) else {
                throw APIError.badRequest("`schemaVersion` must be an integer.")
            }
            version = integer
        case .body(let value?):
            guard case .number(let number) = value, let integer = SchemaVersion.integer(number.literal) else {
                throw DomainError.validation(field: "schemaVersion", "must be an integer")
            }
            version = integer
        }
        guard let served = SchemaVersion.served(version, minimum: store.minimumSchemaVersion) else {
            throw APIError.upgradeRequired(minimum: store.minimumSchemaVersion, current: SchemaVersion.current)
        }
        return served
    }
}
