import FolioCore

/// One download worker's connection: a `CurlEasy` reused for every file, so the connection stays alive (one the
/// listing left open, when there is one: `IdleHandles`).
///
/// A download GETs into the partial file; a resumed one (or a retry after a dropped connection) asks for the
/// rest with `Range` and `If-Range` (the ETag, else the listed time), so a file that changed meanwhile comes
/// back whole (200) and is refused as `.changed` rather than spliced. The response must match the listing
/// (ETag, size, Last-Modified) and the bytes received must add up to the listed size, or nothing is accepted.
///
/// A batch of small files goes out as parallel GETs on extra connections (`download(batch:)`): HTTP/1.1 has
/// no usable pipelining, so parallel requests are the only way not to pay one round trip per file per worker.
final class HTTPConnection: SourceConnection {
    private let client: HTTPClient
    /// The handle for files fetched one at a time, taken at the first: a worker that fetches only batches never
    /// holds one. A batch takes the listing's handles too, though a handle added to a multi handle (`CurlMulti`)
    /// loses the connection it kept (libcurl closes it): each connection the batch opens then replaces an idle
    /// one, so the server never sees more connections at once than the listing's and the downloads' own.
    private var single: CurlEasy?
    /// The batch's transfers and their live connections, kept from one batch to the next.
    private var multi: CurlMulti?
    private var batchHandles: [CurlEasy] = []

    init(client: HTTPClient) throws {
        self.client = client
        // What taking a handle would throw (libcurl not loaded), said here, where the worker gives up on it.
        try CurlEasy.initialize()
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        let url = client.urls.url(for: entry.path, folder: false)
        var skip: Int64 = 0  // bytes of a whole (200) response that the sink already holds
        var answered: ContinuousClock.Instant?  // when the body began: the transfer, not a wait the server asked for
        let easy = try singleHandle()
        let response = try client.send(with: easy, cancelled: { sink.isCancelled }, makeRequest: {
            // Fewer, larger writes for a big file.
            var request = CurlEasy.Request(method: "GET", url: url, bodyLimit: 64 << 10, receiveBuffer: 256 << 10)
            let start = sink.offset
            if start > 0 {
                // Everything is already here: a HEAD still checks that it is the listed version.
                if start >= entry.size { request.method = "HEAD" } else { request.headers.append("Range: bytes=\(start)-") }
                // A tag the server still marks weak does not match here (If-Range compares strongly): the whole
                // file comes back as a 200, whose bytes already held are skipped.
                if let etag = entry.validator {
                    request.headers.append("If-Range: \(etag)")
                } else if entry.mtime.isKnown {
                    request.headers.append("If-Range: \(HTTPDate.format(entry.mtime.seconds))")
                }
            }
            return request
        }, decide: { status, headers in
            let start = sink.offset
            if status == 200 || status == 206 { answered = ContinuousClock.now }
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
                throw SourceError(.notFound, "\(url) disappeared from the server (HTTP \(response.status)) since it was listed", path: entry.path, underlying: "HTTP \(response.status)")
            }
            throw client.error(status: response.status, url: url, path: entry.path)
        }
        guard sink.offset == entry.size else {
            // curl reports a body shorter than its Content-Length itself (and the client retries); this is a
            // server that closed a chunked or length-less body early.
            throw SourceError(.unreachable, "\(url) ended after \(sink.offset) of \(entry.size) bytes; the partial file is kept and resumed next run", path: entry.path, underlying: "short body")
        }
        // Guarantee 2, as the local and SFTP sources keep it with a stat after the copy: the headers above were sent
        // before the body, so a file rewritten in place while it streamed (nginx reads it as it sends) came with
        // the old version's tags and installed old and new bytes mixed, exit 0. A HEAD after the body asks again.
        // Why only after a second or more: the chance of an edit grows with the transfer's length, and a HEAD is a
        // round trip, which a file fetched in milliseconds would pay many times over.
        if let answered, ContinuousClock.now - answered >= Self.recheckAfter {
            try recheck(entry, url: url, cancelled: { sink.isCancelled })
        }
    }

    private func singleHandle() throws -> CurlEasy {
        if let single { return single }
        let handle = try client.idleHandles.take() ?? CurlEasy()
        single = handle
        return handle
    }

    /// How long a download takes before its version is asked again at its end (see `download`).
    static let recheckAfter = Duration.seconds(1)

    /// Asks the server, with a HEAD, whether `entry` is still the version listed; throws `.changed` if not.
    private func recheck(_ entry: Entry, url: String, cancelled: @escaping () -> Bool) throws {
        let head = try client.send(with: try singleHandle(), cancelled: cancelled, makeRequest: { CurlEasy.Request(method: "HEAD", url: url) })
        if head.status == 404 || head.status == 410 {
            throw SourceError(.changed, "\(url) disappeared from the server while it was being copied; it will be fetched next run if it comes back", path: entry.path)
        }
        // Any other answer (a server that refuses HEAD, 405 or 501) cannot tell, and the GET's own check stands.
        guard head.status == 200 else { return }
        let length = head.headers["content-length"].flatMap { Int64($0) }
        if Self.versionDifference(entry, head.headers) != nil || length.map({ $0 != entry.size }) == true {
            throw SourceError(.changed, "\(url) changed on the server while it was being copied; it will be fetched next run", path: entry.path)
        }
    }

    /// Fetches a batch's files with as many GETs in flight as the host's cap lets this worker take without
    /// waiting, up to its share of the cap (`batch.workers` workers share it; all of it for a lone one), each
    /// file into its own partial file. Why a share: each worker's handles keep their connections from one batch
    /// to the next, so without it four workers opened 26 connections to a host capped at 16 requests.
    /// Over HTTP/2 the share is of connections, each carrying `HostGate.streamsPerConnection` GETs at once: at
    /// 20 ms of latency, 1,000 small files took 2.9 s with one GET a connection.
    ///
    /// Marks complete only a whole `200` that matches the listing (ETag, size, Last-Modified). Anything else —
    /// a redirect, a 429, an error page, a dropped connection, a changed file — is left for the engine to fetch
    /// alone with `download(_:into:from:)`, which follows redirects, honours `Retry-After`, retries and reports
    /// the file's own error. A 429 or 503 pauses the host as it asks and stops the batch starting more requests.
    func download(batch: DownloadBatch) throws {
        let multi = try self.multi ?? CurlMulti()
        self.multi = multi
        var inFlight: [ObjectIdentifier: (handle: CurlEasy, index: Int)] = [:]
        var next = 0
        var starting = true
        let connections = max(1, client.gate.limit / batch.workers)
        let multiplexing = client.gate.isMultiplexing
        let share = multiplexing ? connections * HostGate.streamsPerConnection : connections
        // Why cap the connections and let requests wait for one: else libcurl opens a connection for every request
        // started before the first one's TLS has said whether it multiplexes.
        if multiplexing { try multi.limitConnections(perHost: connections) }
        // Why every exit leaves the gate: each request in flight holds one of the host's slots.
        defer {
            multi.abandonAll()
            for (handle, _) in inFlight.values {
                client.gate.leave()
                batchHandles.append(handle)
            }
        }
        while true {
            while starting, next < batch.entries.count, inFlight.count < share {
                // The first request waits its turn like any other; extra ones go only while slots are free.
                let admitted = inFlight.isEmpty ? client.gate.enter(cancelled: { batch.isCancelled }) : client.gate.tryEnter()
                guard admitted else {
                    if inFlight.isEmpty { starting = false }  // cancelled
                    break
                }
                let handle = try batchHandles.popLast() ?? client.idleHandles.take() ?? CurlEasy()
                do {
                    try start(batch, index: next, on: handle, in: multi, waitsToMultiplex: multiplexing)
                } catch {
                    client.gate.leave()
                    batchHandles.append(handle)
                    throw error
                }
                inFlight[ObjectIdentifier(handle)] = (handle, next)
                next += 1
            }
            if inFlight.isEmpty { return }
            for (handle, result) in try multi.step() {
                guard let index = inFlight.removeValue(forKey: ObjectIdentifier(handle))?.index else { continue }
                client.gate.leave()
                batchHandles.append(handle)
                guard case .success(let response) = result else {
                    if batch.isCancelled { starting = false }
                    continue
                }
                let url = client.urls.url(for: batch.entries[index].path, folder: false)
                client.noteRateLimit(response.headers, url: url)
                if response.status == 429 || response.status == 503 {
                    client.pauseAfterRefusal(response, url: url)
                    starting = false
                }
                guard response.status == 200 else { continue }
                let sink = try batch.sink(for: index)  // an empty file never opened it
                if sink.offset == batch.entries[index].size { batch.markComplete(index) }
            }
        }
    }

    private func start(_ batch: DownloadBatch, index: Int, on handle: CurlEasy, in multi: CurlMulti, waitsToMultiplex: Bool) throws {
        let entry = batch.entries[index]
        let url = client.urls.url(for: entry.path, folder: false)
        var request = CurlEasy.Request(method: "GET", url: url)
        request.waitsToMultiplex = waitsToMultiplex
        try multi.add(handle, request, settings: client.settings,
                      cancelled: { batch.isCancelled },
                      decide: { status, headers in
                          guard status == 200 else { return false }
                          try Self.checkSameVersion(entry, headers, url: url)
                          if let length = headers["content-length"].flatMap({ Int64($0) }), length != entry.size {
                              throw Self.changed(entry, url: url, "its size is \(length) bytes, not the \(entry.size) listed")
                          }
                          return true
                      },
                      onBody: { bytes in
                          let sink = try batch.sink(for: index)
                          guard sink.offset + Int64(bytes.count) <= entry.size else {
                              throw Self.changed(entry, url: url, "it sent more than the \(entry.size) bytes listed")
                          }
                          try sink.write(bytes)
                      })
    }

    func close() {}

    /// Refuses a response for another version of the file than the one listed.
    private static func checkSameVersion(_ entry: Entry, _ headers: HTTPHeaders, url: String) throws {
        if let why = versionDifference(entry, headers) { throw changed(entry, url: url, why) }
    }

    /// How `headers` (a GET's or a HEAD's) name another version than the one listed, or nil when they do not.
    private static func versionDifference(_ entry: Entry, _ headers: HTTPHeaders) -> String? {
        if let listed = entry.validator, let now = EntityTag.normalized(headers["etag"]), now != listed {
            return "its ETag is \(now), not \(listed)"
        }
        // Compared as `FileTime` keeps it: a time past 2262 is kept as the latest it holds, as the listing's was.
        if entry.mtime.isKnown, let modified = headers["last-modified"].flatMap(HTTPDate.parse), FileTime(seconds: modified).seconds != entry.mtime.seconds {
            return "its Last-Modified is \(HTTPDate.format(modified)), not \(HTTPDate.format(entry.mtime.seconds))"
        }
        return nil
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
