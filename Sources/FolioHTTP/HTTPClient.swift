import FolioCore
import Foundation
import Synchronization

/// Sends the requests of one source: politeness (`HostGate`), bounded retries with backoff and jitter,
/// redirects within the origin only, and every failure turned into one `SourceError`.
///
/// Shared by all the source's threads; each call runs on the caller's own (non-cooperative) thread with the
/// caller's `CurlEasy`.
final class HTTPClient: Sendable {
    /// A collected body outgrew its bound.
    struct BodyTooLarge: Error {}

    let urls: SourceURL
    let gate: HostGate
    /// The quickest requests' turns (`CurlEasy.Response.turn`): one round trip and the server's work each, a new
    /// connection's handshakes left out, so even the first request, which the listing's near/far choice reads,
    /// measures the link and not the set-up before it (a TLS handshake alone took 2-2.6 ms over loopback here,
    /// and on a LAN each of its round trips and TCP's would count again).
    let roundTrips = RoundTripGauge()
    /// Handles with live connections that the listing is done with, for the downloads to take.
    let idleHandles = IdleHandles()
    private let baseSettings: CurlSettings
    /// Why a Mutex: the auth scheme is learnt from the first challenge answered by whichever thread sees it,
    /// then read by all (Basic becomes pre-emptive, saving a round trip per request).
    private let authScheme = Mutex(CurlSettings.AuthScheme.unknown)
    private let hasPassword: Bool
    private let hasCredentials: Bool

    /// Attempts per request for transport errors, 5xx, 429 and 503.
    static let maxAttempts = 4
    /// The longest `Retry-After` or rate-limit reset Folio waits for; a longer one fails the request.
    static let maxPause: TimeInterval = 300
    static let maxRedirects = 5

    init(urls: SourceURL, settings: CurlSettings, gate: HostGate) {
        self.urls = urls
        baseSettings = settings
        self.gate = gate
        if case .password = settings.credentials { hasPassword = true } else { hasPassword = false }
        if case .none = settings.credentials { hasCredentials = false } else { hasCredentials = true }
    }

    var settings: CurlSettings {
        var settings = baseSettings
        if case .password(let user, let password, _) = settings.credentials {
            settings.credentials = .password(user: user, password: password, scheme: authScheme.withLock { $0 })
        }
        return settings
    }

    /// Sends a request, retrying what may pass on a later attempt; returns the final response whatever its
    /// status (callers turn unexpected statuses into errors with `error(status:url:)`).
    ///
    /// `makeRequest` runs before every attempt, so a download can resume from the bytes it already has.
    /// With `followRedirects` false, a redirect is returned as the final response.
    func send(
        with easy: CurlEasy, cancelled: @escaping () -> Bool = { false }, followRedirects: Bool = true,
        retriesServerErrors: Bool = true, makeRequest: () -> CurlEasy.Request,
        decide: @escaping (Int, HTTPHeaders) throws -> Bool = { _, _ in false },
        onBody: @escaping (UnsafeRawBufferPointer) throws -> Void = { _ in }
    ) throws -> CurlEasy.Response {
        var attempt = 0
        var redirects = 0
        var redirectedURL: String?
        while true {
            var request = makeRequest()
            let originalURL = request.url
            if let redirectedURL { request.url = redirectedURL }
            guard gate.enter(cancelled: cancelled) else { throw cancelledError(request.url) }
            var response: CurlEasy.Response
            do {
                defer { gate.leave() }
                response = try easy.perform(request, settings: settings, cancelled: cancelled, decide: decide, onBody: onBody)
                response.redirectedTo = redirectedURL
                if let turn = response.turn { roundTrips.record(turn) }
                if response.multiplexed { gate.noteMultiplexing() }
            } catch let failure as CurlEasy.Failure {
                if failure.isCancellation || cancelled() { throw cancelledError(request.url) }
                attempt += 1
                // Why a silent server gets one more try, not three: each try waits the whole timeout, so four took
                // 2.5 minutes at the default 30 s, and a server that answered nothing twice is down, not busy.
                if failure.isTransient, attempt < (failure.isTimeout ? 2 : Self.maxAttempts) {
                    Thread.sleep(forTimeInterval: Self.backoff(attempt: attempt))
                    continue
                }
                throw transportError(failure, url: request.url, attempts: attempt)
            } catch is BodyTooLarge {
                throw SourceError(.protocolViolation, "\(request.method) \(request.url) answered more than \(Self.describe(bytes: request.bodyLimit)), the most Folio reads of that answer; refused")
            }
            noteRateLimit(response.headers, url: request.url)
            learnAuthScheme(response)
            switch response.status {
            case 301, 302, 303, 307, 308:
                guard followRedirects, let location = response.headers["location"] else { return response }
                let target = resolve(location, against: request.url)
                guard urls.isSameOrigin(target) else {
                    throw SourceError(.protocolViolation, "\(originalURL) redirects to \(target), another origin; Folio follows redirects only within \(urls.origin) (credentials stay there): point the source at the new URL if you trust it")
                }
                redirects += 1
                guard redirects <= Self.maxRedirects else {
                    throw SourceError(.protocolViolation, "\(originalURL) redirects more than \(Self.maxRedirects) times; check the server's configuration")
                }
                redirectedURL = target
                continue
            case 429, 503:
                attempt += 1
                let wait = Self.retryAfter(response.headers["retry-after"]) ?? Self.backoff(attempt: attempt)
                if wait > Self.maxPause {
                    throw SourceError(.unreachable, "\(request.url) asks Folio to wait \(Int(wait)) s (HTTP \(response.status) Retry-After); try again later", underlying: "HTTP \(response.status)")
                }
                guard attempt < Self.maxAttempts else { throw error(status: response.status, url: request.url) }
                // Why pause the whole host, not just this request: the server asked everyone to slow down.
                gate.pause(until: Date() + wait, why: Self.pauseNotice(request.url, seconds: wait, "HTTP \(response.status) with Retry-After"))
                continue
            case 500, 502, 504...599:
                attempt += 1
                guard retriesServerErrors, attempt < Self.maxAttempts else { return response }
                Thread.sleep(forTimeInterval: Self.backoff(attempt: attempt))
                continue
            default:
                return response
            }
        }
    }

    /// The error for a final response that is not what the caller needed.
    func error(status: Int, url: String, path: RelativePath? = nil) -> SourceError {
        let underlying = "HTTP \(status)"
        switch status {
        case 401 where hasCredentials:
            return SourceError(.authentication, "\(url) refused the credentials (HTTP 401); check username, password-file or token-file", path: path, underlying: underlying)
        case 401:
            return SourceError(.authentication, "\(url) requires authentication (HTTP 401); set username and password-file, or token-file", path: path, underlying: underlying)
        case 403:
            return SourceError(.permission, "\(url) is forbidden (HTTP 403); check the server's permissions for this user", path: path, underlying: underlying)
        case 404, 410:
            return SourceError(.notFound, "\(url) does not exist (HTTP \(status)); check the URL", path: path, underlying: underlying)
        case 414:
            return SourceError(.protocolViolation, "\(url) is longer than the server takes (HTTP 414); raise its limit (nginx: large_client_header_buffers; Apache: LimitRequestLine), or exclude this folder", path: path, underlying: underlying)
        case 400 where path?.isRoot ?? true:
            // The source's own URL refused outright: most often http:// to a port that serves HTTPS, which nginx
            // answers with a 400 page saying so.
            return SourceError(.protocolViolation, "\(url) was refused as a bad request (HTTP 400); \(url.hasPrefix("http://") ? "if that port serves HTTPS, write https://; else check the URL" : "check the URL")", path: path, underlying: underlying)
        case 400:
            // lighttpd answers so for a name it cannot serve (one that is not UTF-8, say), which it still lists.
            return SourceError(.protocolViolation, "\(url) was refused as a bad request (HTTP 400); the server cannot serve this name (is it UTF-8?): rename it on the server, or exclude it", path: path, underlying: underlying)
        case 429, 503:
            return SourceError(.unreachable, "\(url) kept refusing requests (HTTP \(status)) after \(Self.maxAttempts) attempts; try again later or lower requests-per-second", path: path, underlying: underlying)
        case 500, 502...599:
            // Why not `.unreachable`: the server answered, so the error is this URL's (a script that fails), and
            // it fails only this file or folder; the root's listing still fails the run (`ListingWalk`).
            return SourceError(.serverError, "\(url) failed with a server error (HTTP \(status)) after \(Self.maxAttempts) attempts; check the server", path: path, underlying: underlying)
        default:
            return SourceError(.protocolViolation, "\(url) answered HTTP \(status), which Folio did not expect here", path: path, underlying: underlying)
        }
    }

    private func transportError(_ failure: CurlEasy.Failure, url: String, attempts: Int) -> SourceError {
        if failure.isNameMismatch {
            return SourceError(.authentication, "the TLS certificate of \(url) is for another name than the URL's host: \(failure); use a name the certificate was issued for in the URL (openssl x509 -noout -ext subjectAltName lists them)", underlying: failure.description)
        }
        if failure.isCertificateProblem {
            return SourceError(.authentication, "the TLS certificate of \(url) is not trusted: \(failure); add its CA with ca-file", underlying: failure.description)
        }
        if failure.isPlainHTTPPort {
            return SourceError(.unreachable, "\(url) does not speak TLS on that port (\(failure)); if the server serves plain HTTP there, write http://",
                               underlying: failure.description)
        }
        if failure.isNotHTTP {
            return SourceError(.unreachable, "\(url) does not answer in HTTP on that port (\(failure)); check the URL's port (it may be another service's, such as SSH's), else the server sent a malformed answer (its log may say why)",
                               underlying: failure.description)
        }
        if failure.isTooSlow {
            return SourceError(.unreachable, "\(url) came slower than 1 byte a second for \(settings.stallTimeout) s (\(attempts == 1 ? "1 try" : "\(attempts) tries")): the server or the link is stalling; check the server's load and the link, or raise timeout",
                               underlying: failure.description)
        }
        if failure.isTimeout {
            return SourceError(.unreachable, "no answer from \(url) within \(settings.stallTimeout) s (\(attempts == 1 ? "1 try" : "\(attempts) tries")): \(failure); check that the server is up and the URL is right, or raise timeout",
                               underlying: failure.description)
        }
        if failure.isCutShort {
            // Why not "cannot reach": the server answered, then ended the body early (rclone serve does for a file
            // it may not read), so the place to look is its log, not whether it is up.
            return SourceError(.unreachable, "\(url) was cut short by the server after \(attempts == 1 ? "1 try" : "\(attempts) tries") (\(failure)); check the server's log for this file (can it read it?)",
                               underlying: failure.description)
        }
        if failure.isTransient {
            // A TLS server given plain HTTP resets the connection or closes it without a word.
            let https = url.hasPrefix("http://") && failure.isDroppedWithoutAnswer ? "; if that port serves HTTPS, write https://" : ""
            return SourceError(.unreachable, "cannot reach \(url): \(failure); check that the server is up and the URL is right\(https)", underlying: failure.description)
        }
        return SourceError(.protocolViolation, "request to \(url) failed: \(failure)", underlying: failure.description)
    }

    private func cancelledError(_ url: String) -> SourceError {
        SourceError(.cancelled, "cancelled while talking to \(url)")
    }

    /// A 429 or 503 seen outside `send` (a batch's parallel GET): pauses the host for its `Retry-After`, so the
    /// requests that follow wait as the server asked.
    func pauseAfterRefusal(_ response: CurlEasy.Response, url: String) {
        let wait = min(Self.retryAfter(response.headers["retry-after"]) ?? Self.backoff(attempt: 1), Self.maxPause)
        gate.pause(until: Date() + wait, why: Self.pauseNotice(url, seconds: wait, "HTTP \(response.status) with Retry-After"))
    }

    /// The line that says the server at `url` asked for a pause of `seconds`, and how.
    static func pauseNotice(_ url: String, seconds: TimeInterval, _ how: String) -> String {
        "\(url) asks Folio to wait \(Int(seconds.rounded(.up))) s (\(how)); every request to the server waits until then"
    }

    /// `X-RateLimit-Remaining: 0` with `X-RateLimit-Reset` (seconds from now, or an epoch time) pauses the host
    /// before the server starts refusing.
    func noteRateLimit(_ headers: HTTPHeaders, url: String) {
        guard let remaining = headers["x-ratelimit-remaining"].flatMap({ Int($0) }), remaining <= 0,
              let reset = headers["x-ratelimit-reset"].flatMap({ Double($0) }) else { return }
        let now = Date()
        let until = min(reset > 1_000_000_000 ? Date(timeIntervalSince1970: reset) : now + reset, now + Self.maxPause)
        gate.pause(until: until, why: Self.pauseNotice(url, seconds: until.timeIntervalSince(now), "X-RateLimit-Remaining: 0 until X-RateLimit-Reset"))
    }

    /// Learns the scheme from the first request whose 401 challenge curl answered and got past. Why only then:
    /// an answer without a challenge (a public folder) says nothing about the scheme, and taking it for Basic sent
    /// the password in every request after (in the clear over http://) and failed a Digest-protected folder below.
    private func learnAuthScheme(_ response: CurlEasy.Response) {
        guard hasPassword, response.status != 401, response.status < 500, let scheme = response.answeredChallenge else { return }
        authScheme.withLock { if $0 == .unknown { $0 = scheme } }
    }

    /// Resolves a `Location` against the request URL (absolute, origin-relative or path-relative).
    private func resolve(_ location: String, against url: String) -> String {
        if location.contains("://") { return location }
        if location.hasPrefix("//") { return urls.scheme + ":" + location }
        if location.hasPrefix("/") { return urls.origin + location }
        let folder = url[..<(url.lastIndex(of: "/") ?? url.endIndex)]
        return folder + "/" + location
    }

    /// A body bound as people read it: whole MiB from 1 MiB up (the listings' bounds), else bytes (the one-byte
    /// size probe's).
    private static func describe(bytes: Int) -> String {
        if bytes >= 1 << 20, bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
        return bytes == 1 ? "1 byte" : "\(bytes) bytes"
    }

    /// Seconds to wait before attempt `attempt + 1`: exponential from 0.5 s, capped at 8 s, with ±50 % jitter
    /// so that many workers do not retry in step.
    static func backoff(attempt: Int) -> TimeInterval {
        let base = min(8, 0.5 * pow(2, Double(attempt - 1)))
        return base * Double.random(in: 0.5...1.5)
    }

    /// `Retry-After` as seconds or as an HTTP date.
    static func retryAfter(_ value: String?) -> TimeInterval? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value) { return TimeInterval(max(0, seconds)) }
        guard let date = HTTPDate.parse(value) else { return nil }
        return max(0, TimeInterval(date) - Date().timeIntervalSince1970)
    }
}
