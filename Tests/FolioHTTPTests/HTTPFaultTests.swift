import FolioCore
import FolioHTTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// What real servers will not do on demand, from the Python stub: each case ends in a clear error or a
/// correct result, and never in a path outside the source.
final class HTTPFaultTests: XCTestCase {
    private func source(_ url: String) throws -> HTTPSource {
        try HTTPSource(location: SourceLocation(parsing: url), settings: SourceSettings(), timeout: 5, transfers: 1)
    }

    /// The stub's listing of `scenario`.
    private func listing(of scenario: String, from stub: StubServer) async throws -> Snapshot {
        try await source(stub.url(scenario)).snapshot(options: ListingOptions())
    }

    private func snapshotError(_ url: String) async throws -> SourceError {
        do {
            let snapshot = try await source(url).snapshot(options: ListingOptions())
            XCTFail("listed \(snapshot.entries.map(\.path)) from a hostile server")
        } catch let error as SourceError {
            return error
        }
        throw XCTSkip("unreachable")
    }

    func testRetryAfterPausesTheHostThenLists() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "ratelimit", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["f.txt"])
        XCTAssertEqual(snapshot.entries.first?.validator, "\"r1\"")
        let propfinds = stub.requests.filter { $0["method"] as? String == "PROPFIND" }
        XCTAssertGreaterThanOrEqual(propfinds.count, 2, "\(propfinds)")
        // The request refused with 429 went again only after the second the server asked for (the root's Depth: 1
        // request, sent alongside it, was already on its way).
        let gap = (propfinds.last!["time"] as! Double) - (propfinds[0]["time"] as! Double)
        XCTAssertGreaterThanOrEqual(gap, 0.95, "\(propfinds)")
    }

    func testExhaustedRateLimitPausesBeforeTheNextRequest() async throws {
        let stub = try StubServer()
        let source = try source(stub.url("ratelimit-header"))
        let entry = try await source.snapshot(options: ListingOptions()).entries[0]
        let scratch = TemporaryDirectory("ratelimit")
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertEqual(try SourceConformance.download(entry, with: connection, into: scratch.path("f"), from: 0), Array("hello".utf8))
        let requests = stub.requests
        let listed = requests.last { $0["method"] as? String == "PROPFIND" }!["time"] as! Double
        let fetched = requests.last { $0["method"] as? String == "GET" }!["time"] as! Double
        // X-RateLimit-Remaining: 0 with X-RateLimit-Reset: 1 held the next request for a second.
        XCTAssertGreaterThanOrEqual(fetched - listed, 0.95)
    }

    func testRequestsPerSecondSpacesRequests() async throws {
        let stub = try StubServer()
        var settings = SourceSettings()
        settings.requestsPerSecond = 2
        let source = try HTTPSource(location: SourceLocation(parsing: stub.url("hostile-dup")), settings: settings, timeout: 5, transfers: 1)
        _ = try await source.snapshot(options: ListingOptions())
        let times = stub.requests.map { $0["time"] as! Double }
        XCTAssertEqual(times.count, 2)  // PROPFIND infinity (refused), PROPFIND depth 1: no OPTIONS probe first
        for (earlier, later) in zip(times, times.dropFirst()) { XCTAssertGreaterThanOrEqual(later - earlier, 0.45) }
    }

    func testBearerTokenFromTokenFile() async throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("bearer")
        FixtureTree.write(scratch.path, "token", "tok-123\n")
        var settings = SourceSettings()
        settings.tokenFile = scratch.path("token")
        let source = try HTTPSource(location: SourceLocation(parsing: stub.url("bearer")), settings: settings, timeout: 5, transfers: 1)
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["f.txt"])
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertEqual(try SourceConformance.download(snapshot.entries[0], with: connection, into: scratch.path("f"), from: 0), Array("hello".utf8))
        XCTAssertTrue(stub.requests.allSatisfy { $0["authorized"] as? Bool == true })

        let error = try await snapshotError(stub.url("bearer"))
        XCTAssertEqual(error.code, .authentication)
        XCTAssertEqual(error.message, "\(stub.url("bearer")) requires authentication (HTTP 401); set username and password-file, or token-file")
    }

    func testHostileHrefsAreProtocolErrorsNotPaths() async throws {
        let stub = try StubServer()
        let cases = [
            "hostile-dotdot": "contains . or ..",
            "hostile-encoded": "contains . or ..",
            "hostile-slash": "encodes /",
            "hostile-foreign": "points to another server",
            "hostile-outside": "lies outside the source folder",
        ]
        for (scenario, why) in cases {
            let error = try await snapshotError(stub.url(scenario))
            XCTAssertEqual(error.code, .protocolViolation, scenario)
            XCTAssertTrue(error.message.hasPrefix("PROPFIND \(stub.url(scenario)) listed href \""), error.message)
            XCTAssertTrue(error.message.contains(why) && error.message.hasSuffix("refused this folder's listing"), error.message)
        }
    }

    /// An index page's link to a child that Folio cannot read (an encoded `/`) is an unreadable issue, which holds
    /// back every removal, not an entry left out without a word (its local copy then looked removed at the source).
    func testAnUnreadableChildLinkOnAnIndexPageHoldsBackRemovals() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "index-badlink", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["ok.txt"])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot list a%2Fb.txt: the index page's link has a bad %-escape or encodes / or NUL, so Folio cannot tell which file it names; nothing is removed until it can",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// A listing with no autoindex title from a server that redirects `…/index.html` to its folder (Go's
    /// http.FileServer) is a listing: the redirect is not taken for an index.html of the page's length.
    func testAnUntitledListingWhoseIndexHTMLRedirectsIsListed() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "go-listing", from: stub)
        XCTAssertEqual(snapshot.issues.map(\.description), [])
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(stub.requests.filter { $0["path"] as? String == "/go-listing/index.html" }.map { $0["method"] as? String }, ["HEAD"])
    }

    /// A folder that answers with a page that is not a listing (an application's welcome page: a title that is
    /// not an index's, no link into the folder) cannot be listed, which holds back removals there; it was taken
    /// for an empty folder, and its files were removed. So was a folder answering with a body that is neither
    /// HTML nor JSON (lighttpd serving a file's old bytes for its new folder). An empty folder as Go's file server
    /// lists it (no title, no links) is still an empty folder, and a listing without a content type a listing.
    func testAFolderAnsweringWithAPageThatIsNotAListingHoldsBackRemovals() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "welcome-sub", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["empty", "sub", "untyped", "untyped/x.txt", "was-a-file"])
        XCTAssertEqual(snapshot.issues.map(\.description).sorted(), [
            "cannot list sub: \(stub.url("welcome-sub"))sub/ answers with a page that is not a listing (no \"Index of\" title, no link to anything in the folder), so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder (an HTML or JSON index, or WebDAV), or exclude it",
            "cannot list was-a-file: \(stub.url("welcome-sub"))was-a-file/ answers with a body of type application/octet-stream, not a listing of the folder, so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder (an HTML or JSON index, or WebDAV), or exclude it",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// A file that redirects to a web page (here a login page) cannot be listed: it was listed with the page's size
    /// and time, fetched, and the login page installed in the file's place, exit 0.
    func testAFileRedirectingToAWebPageIsNotListedAsThatPage() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "login-redirect", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), [])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot mirror b.txt: \(stub.url("login-redirect"))b.txt redirects to \(stub.url("login-redirect"))login.html, a web page (a login page?), not the file; nothing is fetched or removed in its place until the server sends the file: check username and password-file or token-file, or exclude it",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// A server that answers HEAD with 405 is asked for a file's first byte instead, whose headers give its size
    /// and time; every file failed to list ("answered HTTP 405, which Folio did not expect here").
    func testAServerRefusingHEADIsListedByAOneByteGET() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "no-head", from: stub)
        XCTAssertEqual(snapshot.issues.map(\.description), [])
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(snapshot.entries.first?.size, 5)
        XCTAssertEqual(snapshot.entries.first?.mtime.seconds, 1795320000, "Sun, 22 Nov 2026 04:00:00 GMT")
    }

    /// A file whose HEAD is answered 503 after every retry fails alone, as a 500 does; it failed the whole run.
    func testAFileAnsweringServiceUnavailableFailsAlone() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "busy-file", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(snapshot.issues.count, 1)
        XCTAssertTrue(snapshot.issues.first?.description.hasPrefix("cannot mirror b.txt: \(stub.url("busy-file"))b.txt ") == true, "\(snapshot.issues)")
        XCTAssertTrue(snapshot.issues.first?.description.contains("HTTP 503") == true, "\(snapshot.issues)")
        XCTAssertFalse(snapshot.isComplete)
    }

    /// A folder the server may not read, answered as lighttpd does (207 with the folder's own 403 and no
    /// children), is unreadable, not empty: its files were removed from the mirror. At the root, the run fails.
    func testAFolderTheServersListingRefusesIsUnreadableNotEmpty() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "forbidden-sub", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt", "private"])
        XCTAssertEqual(snapshot.issues.map(\.description), ["cannot list private: the server's listing answers HTTP/1.1 403 Forbidden for it; check its permissions on the server"])
        XCTAssertFalse(snapshot.isComplete)

        let error = try await snapshotError(stub.url("forbidden-root"))
        XCTAssertEqual(error.code, .permission)
        XCTAssertEqual(error.message, "source folder \(stub.url("forbidden-root")) cannot be read: the server's listing answers HTTP/1.1 403 Forbidden for it; check the server's permissions for this user")
    }

    /// A file the server lists but refuses as a bad request (lighttpd, for a name that is not UTF-8) says what to
    /// do: it said "answered HTTP 400, which Folio did not expect here".
    func testAFileRefusedAsABadRequestSaysWhatToDo() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "bad-request", from: stub)
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot mirror caf\\xe9.txt: \(stub.url("bad-request"))caf%E9.txt was refused as a bad request (HTTP 400); the server cannot serve this name (is it UTF-8?): rename it on the server, or exclude it",
        ])
    }

    /// A body over its bound names the request and states the bound as it is: the one-byte size probe's answer
    /// was said to exceed "0 MiB for a listing".
    func testABodyOverItsBoundNamesTheRequestAndTheBound() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "range-overrun", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), [])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot mirror f.txt: GET \(stub.url("range-overrun"))f.txt answered more than 1 byte, the most Folio reads of that answer; refused",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// An error page without end is read to its start only, and the run goes on to say what it was: it was read
    /// for ever, and the run never ended.
    func testAnErrorPageWithoutEndIsCutShort() async throws {
        let stub = try StubServer()
        let error = try await snapshotError(stub.url("endless-error"))
        XCTAssertTrue(error.message.contains("HTTP 500"), error.message)
    }

    func testExternalEntityIsRefusedUnparsed() async throws {
        let stub = try StubServer()
        let error = try await snapshotError(stub.url("hostile-entity"))
        XCTAssertEqual(error.code, .protocolViolation)
        XCTAssertEqual(error.message, "PROPFIND \(stub.url("hostile-entity")): the multistatus declares a DTD or entity (<!DOCTYPE); refused")
    }

    func testDuplicateHrefIsReportedAndKeptOnce() async throws {
        let stub = try StubServer()
        let snapshot = try await listing(of: "hostile-dup", from: stub)
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["f.txt"])
        XCTAssertEqual(snapshot.entries.first?.validator, "\"a\"")
        XCTAssertEqual(snapshot.issues, [ListingIssue(path: "f.txt", kind: .skipped("listed twice by the server; kept the first"))])
    }

    func testCrossOriginRedirectNamesBothURLsAndIsNotFollowed() async throws {
        let stub = try StubServer()
        let error = try await snapshotError(stub.url("redirect"))
        XCTAssertEqual(error.code, .protocolViolation)
        XCTAssertTrue(error.message.hasPrefix("\(stub.url("redirect")) redirects to http://localhost:\(stub.port)/elsewhere/, another origin;"), error.message)
        XCTAssertFalse(stub.requests.contains { ($0["path"] as? String)?.hasPrefix("/elsewhere") == true })
    }

    func testTruncatedBodyFailsAfterBoundedRetries() async throws {
        let stub = try StubServer()
        let source = try source(stub.url("truncated"))
        let entry = try await source.snapshot(options: ListingOptions()).entries[0]
        let scratch = TemporaryDirectory("truncated")
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertThrowsError(try SourceConformance.download(entry, with: connection, into: scratch.path("part"), from: 0)) { error in
            let error = error as? SourceError
            XCTAssertEqual(error?.code, .unreachable)
            XCTAssertEqual(error?.underlying?.hasPrefix("curl 18 "), true, "\(String(describing: error))")
            XCTAssertTrue(error?.message.hasPrefix("\(stub.url("truncated"))big.bin was cut short by the server after 4 tries (curl 18 (") == true, "\(String(describing: error))")
            XCTAssertTrue(error?.message.hasSuffix("); check the server's log for this file (can it read it?)") == true, "\(String(describing: error))")
        }
        // Only the bytes that really came are in the partial file, never more than the server sent once.
        XCTAssertEqual(FixtureTree.read(scratch.path("part"))?.count, 40_000)
        XCTAssertEqual(stub.requests.filter { $0["method"] as? String == "GET" }.count, 4)
    }

    /// A server that sends a byte every two seconds is not silent (Folio's own check sees bytes come within the
    /// timeout of 3 s), but slower than libcurl's low-speed limit of 1 byte a second: the line says it is slow, not
    /// that nothing answered.
    func testTricklingServerHitsTheStallTimeout() async throws {
        let stub = try StubServer()
        let source = try HTTPSource(location: SourceLocation(parsing: stub.url("trickle")), settings: SourceSettings(), timeout: 3, transfers: 1)
        let entry = try await source.snapshot(options: ListingOptions()).entries[0]
        let scratch = TemporaryDirectory("trickle")
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertThrowsError(try SourceConformance.download(entry, with: connection, into: scratch.path("part"), from: 0)) { error in
            XCTAssertEqual((error as? SourceError)?.code, .unreachable)
            XCTAssertEqual((error as? SourceError)?.underlying, "curl 28 (Operation too slow. Less than 1 bytes/sec transferred the last 3 seconds)")
            XCTAssertEqual((error as? SourceError)?.message, "\(stub.url("trickle"))t.bin came slower than 1 byte a second for 3 s (2 tries): the server or the link is stalling; check the server's load and the link, or raise timeout")
        }
        // Each try waits the whole timeout: a server that stalled twice gets no third.
        XCTAssertEqual(stub.requests.filter { $0["method"] as? String == "GET" }.count, 2)
    }

    /// A server that reads a PROPFIND and answers nothing is given up on after the timeout, not twice it: libcurl's
    /// own low-speed limit counted the request's body as traffic. Folio's stall check says so in its text.
    func testASilentServerIsGivenUpOnAfterTheTimeoutEvenForARequestWithABody() async throws {
        let stub = try StubServer()
        let error = try await webdavListingError(stub, "silent", timeout: 1)
        XCTAssertEqual(error.code, .unreachable)
        XCTAssertEqual(error.underlying, "curl 28 (nothing received for 1 s)")
        XCTAssertTrue(error.message.hasPrefix("no answer from \(stub.url("silent")) within 1 s (2 tries): "), error.message)
    }

    /// A server that closes every connection without an answer may be a TLS one given plain HTTP: the line says
    /// to write https:// if so, besides checking that the server is up.
    func testAServerThatHangsUpWithoutAnAnswerSuggestsHTTPS() async throws {
        let stub = try StubServer()
        let error = try await webdavListingError(stub, "hangup", timeout: 2)
        XCTAssertEqual(error.code, .unreachable)
        XCTAssertEqual(error.message, "cannot reach \(stub.url("hangup")): curl 52 (Empty reply from server); check that the server is up and the URL is right; if that port serves HTTPS, write https://")
    }

    /// The error a WebDAV listing of the stub's `scenario` fails with (the test fails if it lists, or fails
    /// otherwise than with a `SourceError`).
    private func webdavListingError(_ stub: StubServer, _ scenario: String, timeout: Int) async throws -> SourceError {
        var settings = SourceSettings()
        settings.webdav = true
        let source = try HTTPSource(location: SourceLocation(parsing: stub.url(scenario)), settings: settings, timeout: timeout, transfers: 1)
        do {
            let snapshot = try await source.snapshot(options: ListingOptions())
            XCTFail("the \(scenario) server gave a listing of \(snapshot.entries.count) entries")
            throw CancellationError()
        } catch let error as SourceError {
            return error
        }
    }

    func testDroppedConnectionResumesWithRangeAndIfRange() async throws {
        let stub = try StubServer()
        let source = try source(stub.url("resume"))
        let entry = try await source.snapshot(options: ListingOptions()).entries[0]
        let scratch = TemporaryDirectory("resume")
        let connection = try source.makeConnection()
        defer { connection.close() }
        let got = try SourceConformance.download(entry, with: connection, into: scratch.path("part"), from: 0)
        XCTAssertEqual(got, (0..<StubServer.bigSize).map { UInt8($0 % 251) })
        let gets = stub.requests.filter { $0["method"] as? String == "GET" }
        XCTAssertEqual(gets.count, 2)
        XCTAssertEqual(gets[1]["range"] as? String, "bytes=40000-")
        XCTAssertEqual(gets[1]["if_range"] as? String, "\"r1\"")
    }

    func testETagChangedDuringDownloadIsRefused() async throws {
        let stub = try StubServer()
        let source = try source(stub.url("changing"))
        let entry = try await source.snapshot(options: ListingOptions()).entries[0]
        let scratch = TemporaryDirectory("changing")
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertThrowsError(try SourceConformance.download(entry, with: connection, into: scratch.path("part"), from: 0)) { error in
            XCTAssertEqual((error as? SourceError)?.code, .changed)
            XCTAssertEqual((error as? SourceError)?.message,
                           "\(stub.url("changing"))f.txt changed since it was listed (its ETag is \"v2\", not \"v1\"); it will be fetched next run")
        }
        XCTAssertEqual(FixtureTree.read(scratch.path("part")), [])
    }
}
