import CLibCurl
import FolioCore
import Foundation

/// One libcurl easy handle: every libcurl call in Folio goes through this file.
///
/// A handle is used by one thread at a time (libcurl's rule); the owner (a listing worker or a download
/// connection) keeps it for many requests so the TCP/TLS connection stays alive between them. Each request
/// starts from `curl_easy_reset`, which clears options but keeps live connections, so no option leaks from one
/// request into the next.
final class CurlEasy {
    /// What to send.
    struct Request {
        var method: String
        var url: String
        var headers: [String] = []
        var body: [UInt8] = []
        /// Largest body accepted into `Response.body` (listings); downloads stream through `onBody` instead.
        var bodyLimit = 0
        /// libcurl's receive buffer (its default, 16 KiB, unless a big file asks for more). Why not always
        /// large: libcurl allocates it for each transfer, and glibc maps and unmaps a 256 KiB one every time,
        /// which flushes the TLB of every core: a quarter of the kernel time of 1,000 small GETs.
        var receiveBuffer = Request.defaultReceiveBuffer
        /// Whether the request waits for a connection being set up (or busy) that may carry it as one more HTTP/2
        /// stream, rather than open one of its own (`CURLOPT_PIPEWAIT`): a batch's extra requests, once the host
        /// is known to multiplex.
        var waitsToMultiplex = false

        /// libcurl's own receive buffer size (`CURL_MAX_WRITE_SIZE`), which `curl_easy_reset` restores.
        static let defaultReceiveBuffer = 16 << 10
    }

    /// What came back. `body` holds the body when it was collected (listings, error pages: at most `bodyLimit`).
    struct Response {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        /// The scheme of a 401 challenge this transfer met (nil when it met none): unless `status` is 401 itself,
        /// curl answered it with the credentials in that scheme and got past it.
        var answeredChallenge: CurlSettings.AuthScheme?
        /// From the request going out to the answer's first line: the link's round trip plus the server's
        /// work, without name lookup, connecting or TLS (which a new connection pays first). Nil when no answer
        /// came.
        var turn: Duration?
        /// The URL this answer came from when `HTTPClient.send` followed redirects to it; nil when it did not.
        var redirectedTo: String?
        /// Whether the answer came over HTTP/2 or later, whose connections carry several requests at once.
        var multiplexed = false
    }

    /// A libcurl failure, keeping libcurl's code: `curl 28 (Timeout was reached)`.
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var text: String
        var description: String { "curl \(code) (\(text))" }

        /// Whether the transport failed in a way another attempt may cure (the server, not our request).
        var isTransient: Bool {
            !isPlainHTTPPort && [CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_CONNECT, CURLE_OPERATION_TIMEDOUT, CURLE_GOT_NOTHING,
             CURLE_SEND_ERROR, CURLE_RECV_ERROR, CURLE_PARTIAL_FILE, CURLE_HTTP2, CURLE_HTTP2_STREAM,
             CURLE_SSL_CONNECT_ERROR].map { Int32($0.rawValue) }.contains(code)
        }
        /// TLS met something that is not TLS: an https:// URL for a port that serves plain HTTP (OpenSSL's "wrong
        /// version number"). Another attempt cannot help.
        var isPlainHTTPPort: Bool {
            code == Int32(CURLE_SSL_CONNECT_ERROR.rawValue) && text.contains("wrong version number")
        }
        var isCertificateProblem: Bool {
            [CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM]
                .map { Int32($0.rawValue) }.contains(code)
        }
        /// The certificate is valid but for another name than the URL's host.
        var isNameMismatch: Bool {
            code == Int32(CURLE_PEER_FAILED_VERIFICATION.rawValue) && (text.contains("subject name") || text.contains("does not match"))
        }
        /// The connection was reset or closed before any answer (`CURLE_RECV_ERROR`, `CURLE_GOT_NOTHING`).
        var isDroppedWithoutAnswer: Bool { [CURLE_RECV_ERROR, CURLE_GOT_NOTHING].map { Int32($0.rawValue) }.contains(code) }
        /// The server ended the body before its length (it answered, so it is up).
        var isCutShort: Bool { code == Int32(CURLE_PARTIAL_FILE.rawValue) }
        var isCancellation: Bool { code == Int32(CURLE_ABORTED_BY_CALLBACK.rawValue) }
        /// Nothing (or next to nothing) came for the whole timeout, connecting or waiting for the answer.
        var isTimeout: Bool { code == Int32(CURLE_OPERATION_TIMEDOUT.rawValue) }
        /// The answer came, but its bytes slower than 1 a second for the whole timeout (`CURLOPT_LOW_SPEED_LIMIT`):
        /// the server or the link is stalling, not down.
        var isTooSlow: Bool { isTimeout && text.hasPrefix("Operation too slow") }
        /// What answered was not HTTP: a port that serves another protocol (an SSH banner, say), which libcurl reads
        /// as HTTP/0.9 and refuses.
        var isNotHTTP: Bool { code == Int32(CURLE_UNSUPPORTED_PROTOCOL.rawValue) && text.contains("HTTP/0.9") }
    }

    fileprivate let handle: UnsafeMutableRawPointer
    /// The transfer between `start` and `finish`: what libcurl's callbacks write into, and the request headers.
    private var transfer: (context: TransferContext, headers: UnsafeMutablePointer<curl_slist>?)?
    /// Where libcurl writes a failed transfer's message (`CURLOPT_ERRORBUFFER`): it must outlive the handle, so it
    /// is freed only after `curl_easy_cleanup`, in deinit.
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    init() throws {
        try Self.initialize()
        guard let handle = curl_easy_init() else {
            throw SourceError(.localIO, "cannot start libcurl (curl_easy_init failed; out of memory?)")
        }
        self.handle = handle
    }

    deinit {
        curl_easy_cleanup(handle)
        errorBuffer.deallocate()
    }

    /// Why a lazy static: libcurl must be loaded, and `curl_global_init` (not thread-safe) run exactly once, before
    /// any handle; Swift runs a static initializer once, under a lock.
    private static let globalInit: Result<Void, SourceError> = {
        if let problem = folio_curl_load() {
            return .failure(SourceError(.localIO, "cannot load libcurl, which HTTP and WebDAV need (\(String(cString: problem))); install the libcurl4 package"))
        }
        let code = curl_global_init(Int(CURL_GLOBAL_ALL))
        guard code == CURLE_OK else {
            return .failure(SourceError(.localIO, "cannot initialise libcurl", underlying: "curl \(code.rawValue) (\(String(cString: curl_easy_strerror(code))))"))
        }
        return .success(())
    }()

    /// Loads and initialises libcurl once; the run's preload calls it, and every easy and multi handle calls it
    /// first.
    static func initialize() throws(SourceError) {
        try globalInit.get()
    }

    /// Sends `request` and waits for the whole response, on the calling thread (never a cooperative one).
    ///
    /// `decide` sees the final status and headers before the first body byte and says where the body goes:
    /// `true` streams it to `onBody` (a download), `false` collects at most `request.bodyLimit` bytes into
    /// `Response.body` (a listing or an error page; beyond the limit the transfer fails with a protocol error).
    /// An error thrown by either closure aborts the transfer and is rethrown as is.
    func perform(
        _ request: Request, settings: CurlSettings, cancelled: @escaping () -> Bool = { false },
        decide: @escaping (Int, HTTPHeaders) throws -> Bool = { _, _ in false },
        onBody: @escaping (UnsafeRawBufferPointer) throws -> Void = { _ in }
    ) throws -> Response {
        try start(request, settings: settings, cancelled: cancelled, decide: decide, onBody: onBody)
        return try finish(curl_easy_perform(handle))
    }

    /// Sets the handle up for `request` (see `perform`) without running it: `perform` runs it at once, a
    /// `CurlMulti` alongside others. `finish` must follow, with the transfer's result.
    fileprivate func start(
        _ request: Request, settings: CurlSettings, cancelled: @escaping () -> Bool,
        decide: @escaping (Int, HTTPHeaders) throws -> Bool,
        onBody: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        curl_easy_reset(handle)
        let context = TransferContext(bodyLimit: request.bodyLimit, stallTimeout: settings.stallTimeout, handle: handle, cancelled: cancelled,
                                      decide: decide, onBody: onBody)
        var headerList: UnsafeMutablePointer<curl_slist>?
        for header in request.headers { headerList = curl_slist_append(headerList, header) }
        // Why `transfer` holds both: libcurl keeps the context pointer and reads the header list until the
        // transfer ends, so they must live until `finish`, which releases them.
        transfer = (context, headerList)
        do {
            try configure(request, settings: settings, headerList: headerList,
                          context: Unmanaged.passUnretained(context).toOpaque())
        } catch {
            _ = try? finish(CURLE_FAILED_INIT)
            throw error
        }
    }

    /// Whether the handle keeps a connection from its last request (`CURLINFO_ACTIVESOCKET`): false for a handle
    /// that has sent none, or whose connection libcurl closed (a failed transfer, `Connection: close`).
    var keepsConnection: Bool {
        var socket: curl_socket_t = -1
        return folio_curl_getinfo_socket(handle, CURLINFO_ACTIVESOCKET, &socket) == CURLE_OK && socket >= 0
    }

    /// The `Response.turn` of the transfer `context` belongs to: from the transfer's start to its first response
    /// line, less the connection's set-up (name lookup, TCP, TLS; zero on a kept connection), timed by this side's
    /// clock. Why not libcurl's `PRETRANSFER` to `STARTTRANSFER`: over HTTP/2, libcurl 7.88 marks both when a
    /// request's body (a PROPFIND's) is sent, so every listing timed a turn of about 0.1 ms, a server 20 ms away
    /// looked near: its small files went to four workers sharing the host's requests instead of one batch
    /// holding them all (1,000 files at 20 ms: 6.4 -> 3.4 s with this alone).
    private func turn(_ context: TransferContext) -> Duration? {
        guard let answered = context.firstLineAt else { return nil }
        var connected: curl_off_t = 0
        var secured: curl_off_t = 0
        guard folio_curl_getinfo_off_t(handle, CURLINFO_CONNECT_TIME_T, &connected) == CURLE_OK,
              folio_curl_getinfo_off_t(handle, CURLINFO_APPCONNECT_TIME_T, &secured) == CURLE_OK else { return nil }
        let turn = answered - context.startedAt - .microseconds(max(connected, secured))
        return turn > .zero ? turn : nil
    }

    /// Ends the transfer `start` set up, given libcurl's result for it, and returns its response.
    fileprivate func finish(_ code: CURLcode) throws -> Response {
        guard let (context, headerList) = transfer else { throw failure(CURLE_FAILED_INIT) }
        transfer = nil
        curl_slist_free_all(headerList)
        if let error = context.error { throw error }
        if context.stalled, code == CURLE_ABORTED_BY_CALLBACK {
            throw Failure(code: Int32(CURLE_OPERATION_TIMEDOUT.rawValue), text: "nothing received for \(context.stallTimeout) s")
        }
        guard code == CURLE_OK || (code == CURLE_WRITE_ERROR && context.cutShort) else { throw failure(code) }
        // A response without a body (HEAD, 204, an empty file) never reached the write callback.
        if !context.decided {
            context.decided = true
            _ = try context.decide(context.status, context.headers)
        }
        let answered: CurlSettings.AuthScheme? = context.saw401 ? (context.sawDigestChallenge ? .digest : .basic) : nil
        var version = 0
        let multiplexed = folio_curl_getinfo_long(handle, CURLINFO_HTTP_VERSION, &version) == CURLE_OK && version >= CURL_HTTP_VERSION_2_0
        return Response(status: context.status, headers: context.headers, body: context.collected,
                        answeredChallenge: answered, turn: turn(context), multiplexed: multiplexed)
    }

    /// Why passing the context unretained is safe: `transfer` keeps it alive from `start` to `finish`, and
    /// libcurl calls back only in between.
    private func configure(
        _ request: Request, settings: CurlSettings, headerList: UnsafeMutablePointer<curl_slist>?,
        context contextPointer: UnsafeMutableRawPointer
    ) throws {
        try set(CURLOPT_URL, request.url)
        try set(CURLOPT_NOSIGNAL, 1)  // Why: libcurl must not use SIGALRM in a multithreaded process.
        try set(CURLOPT_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_FOLLOWLOCATION, 0)  // Redirects are followed by HTTPClient, which checks the origin.
        try set(CURLOPT_TCP_KEEPALIVE, 1)
        try set(CURLOPT_CONNECTTIMEOUT, settings.connectTimeout)
        // A stall timeout, not a total one: a big file may take hours, but a server that sends less than
        // 1 byte/s for `stallTimeout` seconds is dead.
        try set(CURLOPT_LOW_SPEED_LIMIT, 1)
        try set(CURLOPT_LOW_SPEED_TIME, settings.stallTimeout)
        // Why only a larger one, and why a refusal stands: libcurl 7.88 refuses a new size (bad argument) while the
        // handle still holds the last transfer's buffer, which it may after an HTTP/2 stream; the request then
        // reads into the buffer it has. Set every time, that refusal ended a batch of small files 17 files in,
        // and its other 983 files went one at a time (1,000 files at 20 ms over HTTP/2: 6.4 s; 2.9 s with this
        // and the turn's fix, as over HTTP/1.1).
        // `curl_easy_reset` has set the default size (16 KiB) already.
        if request.receiveBuffer > Request.defaultReceiveBuffer {
            let code = folio_curl_setopt_long(handle, CURLOPT_BUFFERSIZE, request.receiveBuffer)
            guard code == CURLE_OK || code == CURLE_BAD_FUNCTION_ARGUMENT else { throw failure(code) }
        }
        if request.waitsToMultiplex { try set(CURLOPT_PIPEWAIT, 1) }
        try check(folio_curl_setopt_ptr(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errorBuffer)))
        errorBuffer[0] = 0
        if let certificates = settings.extraCertificates {
            try check(certificates.withUnsafeBytes { folio_curl_setopt_blob(handle, CURLOPT_CAINFO_BLOB, $0.baseAddress, $0.count) })
        }
        if settings.insecureTLS {
            try set(CURLOPT_SSL_VERIFYPEER, 0)
            try set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        switch settings.credentials {
        case .none:
            break
        case .password(let user, let password, let scheme):
            try set(CURLOPT_USERNAME, user)
            try set(CURLOPT_PASSWORD, password)
            let mask: UInt = switch scheme {
            case .basic: UInt(folio_curlauth_basic)
            case .digest: UInt(folio_curlauth_digest)
            case .unknown: UInt(folio_curlauth_basic) | UInt(folio_curlauth_digest)
            }
            try set(CURLOPT_HTTPAUTH, Int(bitPattern: mask))
        case .bearer(let token):
            try set(CURLOPT_XOAUTH2_BEARER, token)
            try set(CURLOPT_HTTPAUTH, Int(bitPattern: UInt(folio_curlauth_bearer)))
        }
        switch request.method {
        case "GET": break
        case "HEAD": try set(CURLOPT_NOBODY, 1)
        default: try set(CURLOPT_CUSTOMREQUEST, request.method)
        }
        if !request.body.isEmpty {
            try check(folio_curl_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)))
            try check(request.body.withUnsafeBytes {
                folio_curl_setopt_ptr(handle, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress))
            })
        }
        try check(folio_curl_setopt_slist(handle, CURLOPT_HTTPHEADER, headerList))
        try check(folio_curl_setopt_data_cb(handle, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
        try check(folio_curl_setopt_ptr(handle, CURLOPT_HEADERDATA, contextPointer))
        try check(folio_curl_setopt_data_cb(handle, CURLOPT_WRITEFUNCTION, curlWriteCallback))
        try check(folio_curl_setopt_ptr(handle, CURLOPT_WRITEDATA, contextPointer))
        try check(folio_curl_setopt_xferinfo_cb(handle, curlProgressCallback))
        try check(folio_curl_setopt_ptr(handle, CURLOPT_XFERINFODATA, contextPointer))
        try set(CURLOPT_NOPROGRESS, 0)
    }

    private func failure(_ code: CURLcode) -> Failure {
        let detail = String(cString: errorBuffer)
        let summary = String(cString: curl_easy_strerror(code))
        return Failure(code: Int32(code.rawValue), text: detail.isEmpty || detail == summary ? summary : detail)
    }

    private func check(_ code: CURLcode) throws {
        guard code == CURLE_OK else { throw failure(code) }
    }

    private func set(_ option: CURLoption, _ value: Int) throws {
        try check(folio_curl_setopt_long(handle, option, value))
    }

    private func set(_ option: CURLoption, _ value: String) throws {
        // libcurl copies string options (since 7.17), so the temporary C string may go after the call.
        try check(folio_curl_setopt_string(handle, option, value))
    }
}

/// Several `CurlEasy` transfers at once on the calling thread, through one libcurl multi handle (which keeps
/// its own cache of live connections from one call to the next). Lives in this file because every libcurl call
/// does; used by one thread at a time, like the handles it drives.
final class CurlMulti {
    /// A libcurl multi-interface failure, keeping libcurl's code.
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var description: String { "curl multi \(code) (\(String(cString: curl_multi_strerror(CURLMcode(rawValue: code)))))" }
    }

    private let handle: UnsafeMutableRawPointer
    private var running: [CurlEasy] = []

    init() throws {
        try CurlEasy.initialize()
        guard let handle = curl_multi_init() else {
            throw SourceError(.localIO, "cannot start libcurl (curl_multi_init failed; out of memory?)")
        }
        self.handle = handle
    }

    deinit {
        abandonAll()
        curl_multi_cleanup(handle)
    }

    /// Starts `request` on `easy` (see `CurlEasy.perform` for the closures); `step` reports when it ends.
    func add(
        _ easy: CurlEasy, _ request: CurlEasy.Request, settings: CurlSettings, cancelled: @escaping () -> Bool,
        decide: @escaping (Int, HTTPHeaders) throws -> Bool,
        onBody: @escaping (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        try easy.start(request, settings: settings, cancelled: cancelled, decide: decide, onBody: onBody)
        let code = curl_multi_add_handle(handle, easy.handle)
        guard code == CURLM_OK else {
            _ = try? easy.finish(CURLE_FAILED_INIT)
            throw Failure(code: Int32(code.rawValue))
        }
        running.append(easy)
    }

    /// Opens at most `count` connections to any one host; transfers beyond them wait for one, or share one
    /// as HTTP/2 streams (`CURLMOPT_MAX_HOST_CONNECTIONS`).
    func limitConnections(perHost count: Int) throws {
        try check(folio_curl_multi_setopt_long(handle, CURLMOPT_MAX_HOST_CONNECTIONS, count))
    }

    /// Moves every transfer along, waiting up to `timeout` milliseconds for the network when none has ended
    /// yet; returns the transfers that ended, each with its response or error.
    func step(timeout: Int32 = 250) throws -> [(CurlEasy, Result<CurlEasy.Response, any Error>)] {
        var active: Int32 = 0
        try check(curl_multi_perform(handle, &active))
        var ended = takeEnded()
        if ended.isEmpty, active > 0 {
            try check(curl_multi_poll(handle, nil, 0, timeout, nil))
            try check(curl_multi_perform(handle, &active))
            ended = takeEnded()
        }
        return ended
    }

    /// Stops every transfer still running, without results (their handles can be used again).
    func abandonAll() {
        for easy in running {
            curl_multi_remove_handle(handle, easy.handle)
            _ = try? easy.finish(CURLE_ABORTED_BY_CALLBACK)
        }
        running.removeAll()
    }

    private func takeEnded() -> [(CurlEasy, Result<CurlEasy.Response, any Error>)] {
        var ended: [(CurlEasy, Result<CurlEasy.Response, any Error>)] = []
        var queued: Int32 = 0
        while let message = curl_multi_info_read(handle, &queued) {
            // Why read the message first: it does not survive curl_multi_remove_handle.
            guard message.pointee.msg == CURLMSG_DONE, let easyHandle = message.pointee.easy_handle,
                  let position = running.firstIndex(where: { $0.handle == easyHandle }) else { continue }
            let code = message.pointee.data.result
            let easy = running.remove(at: position)
            curl_multi_remove_handle(handle, easyHandle)
            ended.append((easy, Result { try easy.finish(code) }))
        }
        return ended
    }

    private func check(_ code: CURLMcode) throws {
        guard code == CURLM_OK else { throw Failure(code: Int32(code.rawValue)) }
    }
}

/// The settings every request of one source shares.
struct CurlSettings: Sendable {
    enum AuthScheme: Sendable { case basic, digest, unknown }

    /// Secrets; `description` never shows them.
    enum Credentials: Sendable, CustomStringConvertible {
        case none
        case password(user: String, password: String, scheme: AuthScheme)
        case bearer(String)

        var description: String {
            switch self {
            case .none: "no credentials"
            case .password(let user, _, _): "user \(user)"
            case .bearer: "a bearer token"
            }
        }
    }

    var connectTimeout: Int
    var stallTimeout: Int
    /// PEM certificates trusted in addition to the system store (`ca-file`).
    var extraCertificates: [UInt8]?
    var insecureTLS: Bool
    var credentials: Credentials
}

/// What the C callbacks of one transfer share with `perform`.
private final class TransferContext {
    let bodyLimit: Int
    let cancelled: () -> Bool
    let decide: (Int, HTTPHeaders) throws -> Bool
    let onBody: (UnsafeRawBufferPointer) throws -> Void
    var status = 0
    var headers = HTTPHeaders()
    /// Whether a response of this transfer was a 401 (a challenge; curl answers it if it holds credentials).
    var saw401 = false
    /// Whether a challenge offered Digest (curl then prefers it).
    var sawDigestChallenge = false
    /// When the transfer was set up, and when the first line of an answer (its status line) came: `turn`.
    let startedAt = ContinuousClock.now
    var firstLineAt: ContinuousClock.Instant?
    var decided = false
    var streaming = false
    var collected: [UInt8] = []
    /// The most of an error page (a status outside 2xx) that is read: its start says what went wrong.
    static let errorPageLimit = 64 << 10
    /// Set when the write callback stopped the transfer at `errorPageLimit`: its response stands as it is.
    var cutShort = false
    var error: (any Error)?
    /// Header and body bytes received so far, and when the progress callback last saw the count move.
    var received = 0
    private var receivedAtLastLook = 0
    private var lastMove = ContinuousClock.now
    /// Seconds without a byte received after which the transfer is stalled, counted from the end of the
    /// connection's set-up (name, TCP and TLS have `CURLOPT_CONNECTTIMEOUT`).
    let stallTimeout: Int
    /// The easy handle, to ask whether the connection is set up yet.
    let handle: UnsafeMutableRawPointer
    private var connected = false
    /// Set when the progress callback stopped the transfer as stalled (see `isStalled`).
    var stalled = false

    init(bodyLimit: Int, stallTimeout: Int, handle: UnsafeMutableRawPointer, cancelled: @escaping () -> Bool,
         decide: @escaping (Int, HTTPHeaders) throws -> Bool, onBody: @escaping (UnsafeRawBufferPointer) throws -> Void) {
        self.bodyLimit = bodyLimit
        self.stallTimeout = stallTimeout
        self.handle = handle
        self.cancelled = cancelled
        self.decide = decide
        self.onBody = onBody
    }

    /// Whether nothing has come for `stallTimeout` seconds. Why Folio's own check beside libcurl's low-speed
    /// limit: libcurl averages upload and download, so a request with a body (a PROPFIND) counted its own bytes
    /// sent as traffic, and a silent server was taken for dead only after twice the timeout.
    func isStalled() -> Bool {
        let now = ContinuousClock.now
        if !connected {
            var ready: curl_off_t = 0
            guard folio_curl_getinfo_off_t(handle, CURLINFO_PRETRANSFER_TIME_T, &ready) == CURLE_OK, ready > 0 else { return false }
            connected = true
            lastMove = now
            return false
        }
        if received != receivedAtLastLook {
            receivedAtLastLook = received
            lastMove = now
            return false
        }
        return now - lastMove >= .seconds(stallTimeout)
    }
}

/// Collects the header lines of the latest response (a 401 before Digest auth, or a 100 Continue, comes first).
private func curlHeaderCallback(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let buffer, let context else { return 0 }
    let transfer = Unmanaged<TransferContext>.fromOpaque(context).takeUnretainedValue()
    transfer.received += length
    // Parsed as bytes, not as a String: in a String "\r\n" is one Character (hasSuffix("\n") misses it), and
    // lowercased()/trimmingCharacters(in:) went through Unicode tables and NSString, a tenth of a 1,000-file
    // WebDAV mirror's CPU.
    var bytes = UnsafeRawBufferPointer(start: buffer, count: length)[...]
    func isSpace(_ byte: UInt8) -> Bool { byte == 32 || byte == 9 || byte == 10 || byte == 13 }
    while let last = bytes.last, isSpace(last) { bytes = bytes.dropLast() }
    if bytes.starts(with: "HTTP/".utf8) {
        if transfer.firstLineAt == nil { transfer.firstLineAt = .now }
        let fields = bytes.split(separator: 32, maxSplits: 2)
        transfer.status = fields.count > 1 ? Int(String(decoding: fields[1], as: UTF8.self)) ?? 0 : 0
        if transfer.status == 401 { transfer.saw401 = true }
        transfer.headers = HTTPHeaders()
    } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
        // Field names are ASCII tokens (RFC 9110 §5.1): lowercase them byte by byte.
        let name = String(decoding: bytes[..<colon].map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }, as: UTF8.self)
        var value = bytes[(colon + 1)...]
        while let first = value.first, isSpace(first) { value = value.dropFirst() }
        let text = String(decoding: value, as: UTF8.self)
        if name == "www-authenticate", value.prefix(6).map({ $0 | 0x20 }).elementsEqual("digest".utf8) { transfer.sawDigestChallenge = true }
        transfer.headers.append(name: name, value: text)
    }
    return length
}

/// Routes body bytes: to the caller's sink (a download) or into a bounded buffer (a listing, an error page).
private func curlWriteCallback(_ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?) -> Int {
    let length = size * count
    guard let buffer, let context else { return 0 }
    let transfer = Unmanaged<TransferContext>.fromOpaque(context).takeUnretainedValue()
    transfer.received += length
    let bytes = UnsafeRawBufferPointer(start: buffer, count: length)
    do {
        if !transfer.decided {
            transfer.decided = true
            transfer.streaming = try transfer.decide(transfer.status, transfer.headers)
        }
        if transfer.streaming {
            try transfer.onBody(bytes)
        } else {
            let isAnswer = (200..<300).contains(transfer.status)
            let room = max(0, (isAnswer ? transfer.bodyLimit : min(transfer.bodyLimit, TransferContext.errorPageLimit)) - transfer.collected.count)
            // A listing that outgrows its bound is refused. An error page (or a redirect's body) is kept to its
            // start and the rest not waited for: a server sending one without end held the run for ever.
            if length > room {
                if isAnswer { throw HTTPClient.BodyTooLarge() }
                transfer.collected.append(contentsOf: bytes.prefix(room))
                transfer.cutShort = true
                return 0
            }
            transfer.collected.append(contentsOf: bytes)
        }
        return length
    } catch {
        transfer.error = error
        return 0  // Any count other than `length` makes libcurl stop with CURLE_WRITE_ERROR.
    }
}

/// Lets a cancelled run stop a transfer even while the server sends nothing, and stops a stalled one (libcurl
/// calls it about once a second while nothing moves).
private func curlProgressCallback(_ context: UnsafeMutableRawPointer?, _: curl_off_t, _: curl_off_t, _: curl_off_t, _: curl_off_t) -> Int32 {
    guard let context else { return 0 }
    let transfer = Unmanaged<TransferContext>.fromOpaque(context).takeUnretainedValue()
    if transfer.cancelled() { return 1 }
    if transfer.isStalled() {
        transfer.stalled = true
        return 1
    }
    return 0
}
