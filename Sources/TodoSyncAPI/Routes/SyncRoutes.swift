import TodoSyncCore
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
            let page = try context.store.pull(userID: userID, cursor: cursor, limit: limit, deviceID: deviceID,
                                              schemaVersion: schemaVersion)
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
        let testHooks = options.enableTestHooks
        router.add("GET", "/api/v1/sync/snapshot") { context in
            let userID = try context.requireUser()
            let schemaVersion = try context.syncSchemaVersion(.query(context.request.query["schemaVersion"]))
            var hold = 0
            if testHooks, let text = context.request.query["__test_hold_ms"] {
                guard let value = Int(text), (0...120_000).contains(value) else {
                    throw APIError.badRequest("`__test_hold_ms` must be 0 to 120000.")
                }
                hold = value
            }
            let entry: SnapshotCache.Entry
            do {
                entry = try context.store.snapshot(userID: userID, schemaVersion: schemaVersion, holdMilliseconds: hold)
            } catch let error as SnapshotError {
                guard let refusal = APIError(snapshot: error) else { throw error }
                throw refusal
            }
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
            // A range outside the bytes is answered here (416): nginx's own 416 is an HTML page
            // that would keep the headers given for the file (Content-Encoding: gzip among them).
            if let range = context.request.header("range"),
               context.request.header("if-range").map({ $0.trimmingWhitespace() == sent }) ?? true,
               let size = context.store.snapshotFileSize(path), Self.rangeStartsPastTheEnd(range, size: size) {
                return HTTPResponse(status: 416, headers: [
                    HTTPHeader("Content-Range", "bytes */\(size)"), HTTPHeader("ETag", sent), vary,
                ])
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
            // nchan serves an event stream only to a request that asks for one; anything else got
            // its bare 403 with no body. A contract error instead, before the handover.
            guard context.request.header("accept")?.lowercased().contains("text/event-stream") == true else {
                throw APIError.badRequest("This route serves Server-Sent Events only: send `Accept: text/event-stream`.")
            }
            return HTTPResponse(status: 200, headers: [
                HTTPHeader("X-Accel-Redirect", "\(LivePublisher.subscribePathPrefix)\(userID)"),
            ])
        }
    }
}

extension Application {
    /// nginx's internal location of the snapshot cache directory (nginx/live-locations.conf.template).
    static let snapshotLocation = "/__snapshot/"

    /// Whether `Range` is one byte range that no byte of `size` satisfies: `bytes=<first>-[<last>]`
    /// with `first` past the end, or the empty suffix `bytes=-0` (RFC 9110 14.1.2); what nginx
    /// answers 416 (it ignores malformed or multiple ranges, max_ranges 1, and sends the whole body).
    static func rangeStartsPastTheEnd(_ range: String, size: Int64) -> Bool {
        let value = range.trimmingWhitespace()
        guard value.lowercased().hasPrefix("bytes="), !value.contains(",") else { return false }
        let spec = value.dropFirst(6).split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
            .map { $0.trimmingWhitespace() }
        guard spec.count == 2 else { return false }
        if spec[0].isEmpty { return !spec[1].isEmpty && spec[1].allSatisfy { $0 == "0" } }
        guard let first = Int64(spec[0]), spec[1].isEmpty || Int64(spec[1]).map({ $0 >= first }) == true else { return false }
        return first >= size
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

extension APIError {
    /// A snapshot that cannot be served now: 503 with `Retry-After` (nil: a server fault, 500).
    init?(snapshot error: SnapshotError) {
        switch error {
        case .tooSlow(let seconds):
            self.init(status: 503, code: "unavailable",
                      message: "This account's snapshot cannot be built within the request budget; sync by paged pull.",
                      headers: [HTTPHeader("Retry-After", "\(max(seconds, 1))")])
        case .busy:
            self.init(status: 503, code: "unavailable", message: "The snapshot is still being built; retry shortly.",
                      headers: [HTTPHeader("Retry-After", "1")])
        case .cache:
            return nil
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
