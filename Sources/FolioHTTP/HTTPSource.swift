import FolioCore
import Foundation
import Synchronization

/// A web server as a source: WebDAV (PROPFIND) or plain folder index pages (nginx/Apache autoindex), over
/// libcurl.
///
/// `webdav = "auto"` (the default) lets the first snapshot's first PROPFIND decide: WebDAV when the server
/// answers it as WebDAV does, folder index pages when it does not know the method; a plain server is taken as
/// plain for a week after (`HTTPListingMemo`). Entries carry the server's ETag as their validator when it gives one (WebDAV `getetag`, or the
/// HEAD that index pages need anyway), so an edit that keeps size and time is still seen. Downloads resume with
/// `Range` + `If-Range` and refuse a file whose ETag, size or time changed since the listing.
///
/// At most `connections` requests (default `max(transfers, 16)`) are in flight to the host at once: the listing
/// has that many workers over a far link (4, or `transfers` if more, over a near one), each download worker
/// keeps its connection alive, and a batch of small files takes the
/// free slots for parallel GETs; 429/503 `Retry-After` and `X-RateLimit-*` pause every worker; `requests-per-second` spaces requests.
///
/// Symbolic links are the server's business (it serves what they point to), so `ListingOptions.symlinks` does
/// not apply; index pages carry no ETag for files listed from nginx's JSON format (see `IndexLister`).
public struct HTTPSource: Source {
    /// Requests in flight to one server unless `connections` says otherwise: enough for small files to cost a
    /// sixteenth of a round trip each, and as many as download managers open at most (aria2's ceiling), which
    /// servers and their per-client limits expect.
    static let defaultConnections = 16

    /// The source's URL as written (it carries no credentials).
    public let displayName: String
    private let client: HTTPClient
    private let webdav: Bool?
    private let detected = DetectedMode()
    private let insecureTLS: Bool
    /// Warnings for the secret files other users can read, said every run (fixed with one chmod), as an SFTP key's.
    private let exposedSecrets: [String]

    /// Loads and initialises libcurl now rather than at the first request (blocking: call it off the cooperative
    /// pool). A failure is kept and thrown by the first request.
    public static func loadLibrary() {
        _ = try? CurlEasy.initialize()
    }

    /// Builds the source without touching the network; reads the secret and CA files named in `settings`.
    ///
    /// - Parameters:
    ///   - location: an `.http` location.
    ///   - timeout: seconds to connect, and seconds without a byte before a transfer counts as stalled.
    ///   - transfers: the number of download workers (each opens one connection).
    public init(location: SourceLocation, settings: SourceSettings, timeout: Int, transfers: Int) throws {
        guard case .http(let secure, let host, let port, let path, let url) = location.kind else {
            throw SourceError(.protocolViolation, "\(location) is not an http:// or https:// URL")
        }
        displayName = url
        if let problem = settings.httpCredentialsProblem() {
            throw SourceError(.authentication, "source \(url): \(problem.message)")
        }
        let credentials: CurlSettings.Credentials
        if let tokenFile = settings.tokenFile {
            credentials = .bearer(try SecretFile.read(tokenFile, what: "token-file"))
        } else if let user = settings.username, let passwordFile = settings.passwordFile {
            credentials = .password(user: user, password: try SecretFile.read(passwordFile, what: "password-file"), scheme: .unknown)
        } else {
            credentials = .none
        }
        var certificates: [UInt8]?
        if let caFile = settings.caFile {
            guard let data = FileManager.default.contents(atPath: caFile), !data.isEmpty else {
                throw SourceError(.localIO, "cannot read ca-file \(caFile) for \(url); check that it exists and holds PEM certificates")
            }
            // Why here: libcurl says only "error importing CA certificate blob", which the line then took for the
            // server's certificate being untrusted, and advised the ca-file already given.
            guard data.range(of: Data("-----BEGIN CERTIFICATE-----".utf8)) != nil else {
                throw SourceError(.localIO, "ca-file \(caFile) holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA's certificate in PEM form (openssl x509 -inform der -in ca.der -out ca.pem converts a DER one)")
            }
            certificates = Array(data)
        }
        insecureTLS = settings.insecureTLS
        exposedSecrets = [("password-file", settings.passwordFile), ("token-file", settings.tokenFile)].compactMap { setting, path in
            path.flatMap { SecretFile.exposure(of: $0, setting: setting) }
        }
        webdav = settings.webdav
        let timeout = max(1, timeout)
        let curlSettings = CurlSettings(connectTimeout: timeout, stallTimeout: timeout, extraCertificates: certificates,
                                        insecureTLS: settings.insecureTLS, credentials: credentials)
        client = HTTPClient(urls: SourceURL(secure: secure, host: host, port: port, path: path), settings: curlSettings,
                            gate: HostGate(limit: settings.connections ?? max(transfers, Self.defaultConnections),
                                           requestsPerSecond: settings.requestsPerSecond))
    }

    /// Whole-second times (HTTP dates), no checksums, resumable with `Range`, small files in parallel batches, and
    /// a listing that uses the last run's hints.
    public var features: SourceFeatures {
        SourceFeatures(mtimePrecision: .second, checksums: false, resumable: true, batchDownloads: true, parallelBatches: true, listsAhead: true)
    }

    /// Lists the tree over WebDAV or from index pages, as `webdav` says or detection finds, and leaves what it
    /// learned about the server in the snapshot's memo. With `insecure-tls`, notes a warning every run.
    public func snapshot(options: ListingOptions) async throws -> Snapshot {
        let last = HTTPListingMemo(options.hints.memo)
        // The listing's parallelism (4, or `transfers` if more) to start, and as many workers as the host takes
        // requests once the link shows far (see `ListingWalk.Workers`), or from the start when it was far last time.
        let most = max(options.parallelism, client.gate.limit)
        let workers = ListingWalk.Workers(most: most, near: last.far ? most : options.parallelism,
                                          roundTrip: { [client] in client.roundTrips.fastest })
        let today = ListingHints.today()
        let found = detected.value.withLock { $0 }
        var listing: ListingResult
        switch webdav ?? found {
        case true?:
            listing = try await listWebDAV(options, workers: workers, last: last, today: today, probing: false)
        case false? where webdav == false:
            listing = ListingResult(builder: try await listIndexPages(options, workers: workers))
        case false?, nil:
            listing = try await detectAndList(options, workers: workers, last: last, today: today, foundPlain: found == false)
        }
        for warning in exposedSecrets { listing.builder.note(ListingIssue(path: displayName, kind: .warning(warning))) }
        if insecureTLS {
            listing.builder.note(ListingIssue(path: displayName, kind: .warning(
                "insecure-tls = true: the server's certificate is not checked, so anyone on the network path can pose as it; use ca-file instead")))
        }
        var snapshot = listing.builder.finish()
        // Why every run: an edit that keeps a file's size is then never seen, and the mirror stays stale with exit 0
        // (lighttpd without `mimetype.assign` sends neither header).
        let unversioned = snapshot.entries.lazy.filter { $0.kind == .file && !$0.mtime.isKnown && $0.validator == nil }.count
        if unversioned > 0 {
            snapshot.warn("the server gives no time (Last-Modified) and no ETag for \(unversioned == 1 ? "1 file" : "\(unversioned) files"), so Folio sees only a change of size there; have the server send them (lighttpd: mimetype.assign, as Debian's configuration does)", about: displayName)
        }
        listing.memo.far = TargetConfig.isFar(roundTrip: client.roundTrips.fastest)
        snapshot.memo = listing.memo.text
        return snapshot
    }

    /// A listing and what it learned for the next one (`far` is filled in at the end).
    private struct ListingResult {
        var builder: SnapshotBuilder
        var memo = HTTPListingMemo()
    }

    /// `webdav = "auto"`, unless this process has already found WebDAV. A server found plain, by this process
    /// (`foundPlain`: the daemon) or within the week by the memo, has its index pages read at once, a round trip sooner;
    /// should that fail at the root (the server now speaks WebDAV and lists no index pages, say), it is probed
    /// like an unknown one. Two cases wait for the next probe (a week at most, or the daemon's restart): a
    /// server that now speaks WebDAV but still serves index pages is listed from them (correct, but nginx's JSON
    /// pages carry no ETag), and a root page that fails with 5xx fails the run.
    private func detectAndList(_ options: ListingOptions, workers: ListingWalk.Workers, last: HTTPListingMemo, today: Int,
                               foundPlain: Bool) async throws -> ListingResult {
        if foundPlain || last.isPlain(today: today) {
            do {
                var listing = ListingResult(builder: try await listIndexPages(options, workers: workers))
                // The day the server was first found plain is kept, so that it is probed again a week after.
                listing.memo.plainOn = last.plainOn ?? today
                detected.value.withLock { $0 = false }
                return listing
            } catch let error as SourceError where !error.failsRun && error.code != .serverError {
                // Probed below. Why not after any error: a server that is down, refuses the credentials, was
                // cancelled or answers the root with 5xx would fail the probe the same way, after a second round.
            }
        }
        // Why no OPTIONS first: the listing's own first PROPFIND tells a WebDAV server (207, or 403 to
        // `Depth: infinity` then 207) from a plain one (404, 405 or 501 to a method it does not know, a page), a
        // round trip sooner.
        do {
            let listing = try await listWebDAV(options, workers: workers, last: last, today: today, probing: true)
            detected.value.withLock { $0 = true }
            return listing
        } catch is WebDAVLister.NotWebDAV {
            var listing = ListingResult(builder: try await listIndexPages(options, workers: workers))
            // Why only once the pages listed: a root that neither PROPFIND nor GET finds (404) says nothing of the
            // server's kind, and a WebDAV server taken for plain would be asked for index pages first from then on.
            detected.value.withLock { $0 = false }
            listing.memo.plainOn = today
            return listing
        }
    }

    private func listWebDAV(_ options: ListingOptions, workers: ListingWalk.Workers, last: HTTPListingMemo, today: Int,
                            probing: Bool) async throws -> ListingResult {
        let refusalKnown = last.refusesInfinity(today: today)
        let found = try await WebDAVLister(client: client, exclude: options.exclude, probing: probing, infinityRefused: refusalKnown,
                                           known: options.hints.folders).snapshot(workers: workers)
        var listing = ListingResult(builder: found.builder)
        // A refusal taken as known keeps its day, so that the server is asked again a week after it last refused.
        if found.infinityRefused { listing.memo.infinityRefusedOn = refusalKnown ? last.infinityRefusedOn : today }
        return listing
    }

    private func listIndexPages(_ options: ListingOptions, workers: ListingWalk.Workers) async throws -> SnapshotBuilder {
        try await IndexLister(client: client, exclude: options.exclude, known: options.hints.folders).snapshot(workers: workers)
    }

    /// Pauses the server asks for (`HostGate.pause`) are said there.
    public func sendNotices(to handler: @escaping @Sendable (String) -> Void) {
        client.gate.announcePauses(to: handler)
    }

    /// The quickest request so far (see `HTTPClient.roundTrips`).
    public var roundTrip: Duration? { client.roundTrips.fastest }

    /// Closes the connections the listing left for downloads that did not take them, off the cooperative pool.
    public func finishRun() async {
        await Blocking.run { [client] in client.idleHandles.closeAll() }
    }

    /// Opens one download worker's connection (a curl handle kept alive for its files), the listing's when one
    /// is left.
    public func makeConnection() throws -> any SourceConnection {
        try HTTPConnection(client: client)
    }
}

/// What auto-detection found, shared by copies of one `HTTPSource`.
private final class DetectedMode: Sendable {
    /// Why a Mutex: concurrent snapshots of one source may detect at once; either answer is the same.
    let value = Mutex<Bool?>(nil)
}
