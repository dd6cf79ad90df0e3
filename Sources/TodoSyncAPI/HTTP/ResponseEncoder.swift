import Deflate

/// Compresses JSON responses for clients that accept gzip (URLSession always does), in the
/// responder rather than in nginx: igzip at level 1 (`GzipCompressor`) costs about 165 µs of
/// CPU for a 164 KB pull page where nginx's zlib at level 1 costs about 790 µs (22.3 % of the
/// size against 21.6 %). nginx passes a response that already has a
/// `Content-Encoding` through untouched, and still compresses anything this leaves alone.
/// One encoder per worker thread.
public final class ResponseEncoder {
    /// Bodies shorter than this are sent as they are (gzip's header and trailer would eat the
    /// gain); nginx's `gzip_min_length` is the same.
    public static let minimumLength = GzipMember.worthwhileLength

    private let compressor = GzipCompressor()
    /// The last `Accept-Encoding` value read and its answer: a client sends the same value on
    /// every request, and reading it costs ~10k instructions (character-level splits and trims).
    private var lastAcceptEncoding: (value: String, acceptsGzip: Bool)?

    public init() {}

    /// `response`, gzip-compressed when `acceptEncoding` (the request's `Accept-Encoding`)
    /// accepts gzip and the response is JSON of at least `minimumLength` bytes. Responses with
    /// an `ETag` (single records, small) keep their identity encoding, so the tag names the bytes.
    /// A streamed body (its length unknown, and long by nature) is compressed as it is produced
    /// (`GzipStream`, zlib level 1; igzip is called once per whole body).
    public func encode(_ response: HTTPResponse, acceptEncoding: String?) -> HTTPResponse {
        guard response.stream != nil || response.body.count >= Self.minimumLength,
              response.headers.contains(where: { $0.name == "Content-Type" && $0.value.hasPrefix("application/json") }),
              !response.headers.contains(where: { $0.name == "ETag" || $0.name == "Content-Encoding" })
        else { return response }
        guard let acceptEncoding, acceptsGzip(acceptEncoding) else { return response }
        var encoded = response
        if let stream = response.stream {
            encoded.stream = Self.gzipped(stream)
        } else {
            encoded.body = compressor.gzip(response.body)
        }
        return Self.gzipped(encoded)
    }

    /// `response`, whose body (or stream) is already gzip, labelled so: `encode` then leaves it
    /// alone. nginx's `gzip_vary` adds `Vary` to the identity responses; it leaves encoded ones
    /// alone, so both say it.
    public static func gzipped(_ response: HTTPResponse) -> HTTPResponse {
        var labelled = response
        labelled.headers += [HTTPHeader("Content-Encoding", "gzip"), HTTPHeader("Vary", "Accept-Encoding")]
        return labelled
    }

    /// `stream` with its body gzip-compressed on the way to the writer.
    static func gzipped(_ stream: ResponseStream) -> ResponseStream {
        ResponseStream { write in
            let gzip = GzipStream(level: 1)
            let outcome = try stream.produce { bytes in gzip.compress(bytes, emit: write) }
            guard case .complete = outcome else { return outcome }
            return gzip.finish(emit: write) ? .complete : .cutOff
        }
    }

    /// `acceptsGzip(_:)`, remembered for the last value.
    func acceptsGzip(_ header: String) -> Bool {
        if let last = lastAcceptEncoding, last.value == header { return last.acceptsGzip }
        let answer = Self.acceptsGzip(header)
        lastAcceptEncoding = (header, answer)
        return answer
    }

    /// Whether an `Accept-Encoding` value (RFC 9110 §12.5.3) accepts gzip: `gzip`, `x-gzip` or
    /// `*` with a quality above zero, and gzip not refused by name.
    static func acceptsGzip(_ header: String) -> Bool {
        var byName: Double?
        var wildcard: Double?
        for item in header.split(separator: ",") {
            let parts = item.split(separator: ";")
            guard let first = parts.first else { continue }
            let coding = first.trimmingWhitespace().lowercased()
            var quality = 1.0
            for parameter in parts.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0].trimmingWhitespace().lowercased() == "q" {
                    quality = Double(pair[1].trimmingWhitespace()) ?? 0
                }
            }
            switch coding {
            case "gzip", "x-gzip": byName = max(byName ?? 0, quality)
            case "*": wildcard = quality
            default: break
            }
        }
        return (byName ?? wildcard ?? 0) > 0
    }
}
