import FolioCore

/// One download worker's connection: a `CurlEasy` reused for every file, so the connection stays alive.
///
/// A download GETs into the partial file; a resumed one (or a retry after a dropped connection) asks for the
/// rest with `Range` and `If-Range` (the ETag, else the listed time), so a file that changed meanwhile comes
/// back whole (200) and is refused as `.changed` rather than spliced. The response must match the listing
/// (ETag, size, Last-Modified) and the bytes received must add up to the listed size, or nothing is accepted.
final class HTTPConnection: SourceConnection {
    private let client: HTTPClient
    private let easy: CurlEasy

    init(client: HTTPClient) throws {
        self.client = client
        easy = try CurlEasy()
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        let url = client.urls.url(for: entry.path, folder: false)
        var skip: Int64 = 0  // bytes of a whole (200) response that the sink already holds
        let response = try client.send(with: easy, cancelled: { sink.isCancelled }, makeRequest: {
            var request = CurlEasy.Request(method: "GET", url: url, bodyLimit: 64 << 10)
            let start = sink.offset
            if start > 0 {
                // Everything is already here: a HEAD still checks that it is the listed version.
                if start >= entry.size { request.method = "HEAD" } else { request.headers.append("Range: bytes=\(start)-") }
                if let etag = entry.validator, !etag.hasPrefix("W/") {
                    request.headers.append("If-Range: \(etag)")
                } else if entry.mtime.isKnown {
                    request.headers.append("If-Range: \(HTTPDate.format(entry.mtime.seconds))")
                }
            }
            return request
        }, decide: { status, headers in
            let start = sink.offset
            switch status {
            case 200:
                try Self.checkSameVersion(entry, headers, url: url)
                if let length = headers["content-length"].flatMap({ Int64($0) }), length != entry.size {
                    throw Self.changed(entry, url: url, "its size is \(length) bytes, not the \(entry.size) listed")
                }
                // A server that ignores Range sends the whole file again: drop what the partial file has.
                skip = start
                return true
            case 206:
                try Self.checkSameVersion(entry, headers, url: url)
                guard let range = headers["content-range"], let (first, total) = Self.parseContentRange(range), first == start else {
                    throw SourceError(.protocolViolation, "GET \(url) answered a range that was not asked for (Content-Range: \(headers["content-range"] ?? "none"))", path: entry.path)
                }
                if let total, total != entry.size {
                    throw Self.changed(entry, url: url, "its size is \(total) bytes, not the \(entry.size) listed")
                }
                skip = 0
                return true
            default:
                return false
            }
        }, onBody: { bytes in
            var bytes = bytes
            if skip > 0 {
                let dropped = Int(min(skip, Int64(bytes.count)))
                skip -= Int64(dropped)
                bytes = UnsafeRawBufferPointer(rebasing: bytes[dropped...])
                if bytes.isEmpty { return }
            }
            guard sink.offset + Int64(bytes.count) <= entry.size else {
                throw Self.changed(entry, url: url, "it sent more than the \(entry.size) bytes listed")
            }
            try sink.write(bytes)
        })
        guard response.status == 200 || response.status == 206 else {
            if response.status == 416 {
                throw Self.changed(entry, url: url, "it no longer has the \(sink.offset) bytes already fetched")
            }
            if response.status == 404 || response.status == 410 {
                throw SourceError(.notFound, "\(url) disappeared from the server (HTTP \(response.status)) since it was listed", path: entry.path, underlying: "HTTP \(response.status)", isRetryable: true)
            }
            throw client.error(status: response.status, url: url, path: entry.path)
        }
        guard sink.offset == entry.size else {
            // curl reports a body shorter than its Content-Length itself (and the client retries); this is a
            // server that closed a chunked or length-less body early.
            throw SourceError(.unreachable, "\(url) ended after \(sink.offset) of \(entry.size) bytes; the partial file is kept and resumed next run", path: entry.path, underlying: "short body")
        }
    }

    func close() {}

    /// Refuses a response for another version of the file than the one listed.
    private static func checkSameVersion(_ entry: Entry, _ headers: HTTPHeaders, url: String) throws {
        if let listed = entry.validator, let now = headers["etag"], now != listed {
            throw changed(entry, url: url, "its ETag is \(now), not \(listed)")
        }
        if entry.mtime.isKnown, let modified = headers["last-modified"].flatMap(HTTPDate.parse), modified != entry.mtime.seconds {
            throw changed(entry, url: url, "its Last-Modified is \(HTTPDate.format(modified)), not \(HTTPDate.format(entry.mtime.seconds))")
        }
    }

    private static func changed(_ entry: Entry, url: String, _ why: String) -> SourceError {
        SourceError(.changed, "\(url) changed since it was listed (\(why)); it will be fetched next run", path: entry.path)
    }

    /// `bytes first-last/total` (total may be `*`).
    static func parseContentRange(_ value: String) -> (Int64, Int64?)? {
        let parts = value.split(whereSeparator: { $0 == " " || $0 == "-" || $0 == "/" })
        guard parts.count == 4, parts[0].lowercased() == "bytes", let first = Int64(parts[1]), Int64(parts[2]) != nil else { return nil }
        return (first, parts[3] == "*" ? nil : Int64(parts[3]))
    }
}
