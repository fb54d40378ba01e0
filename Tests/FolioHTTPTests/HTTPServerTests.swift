import FolioCore
import FolioHTTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Behaviour against real nginx and Apache beyond the conformance suite: ETags, a killed server, TLS, auth.
final class HTTPServerTests: XCTestCase {
    private func source(_ url: String, _ configure: (inout SourceSettings) -> Void = { _ in }) throws -> HTTPSource {
        var settings = SourceSettings()
        configure(&settings)
        return try HTTPSource(location: SourceLocation(parsing: url), settings: settings, timeout: 5, transfers: 1)
    }

    /// Apache's ETag holds the mtime in microseconds: an edit that keeps the size and the second (all an HTTP
    /// date shows) still changes the validator, which is what the planner compares.
    func testSameSizeSameSecondEditChangesTheETag() async throws {
        let server = try ApacheServer()
        FixtureTree.write(server.servedRoot, "doc.txt", "version one\n", mtime: (1_700_000_000, 100_000_000))
        let source = try source(server.url("dav"))
        let before = try await source.snapshot(options: ListingOptions()).entries[0]
        FixtureTree.write(server.servedRoot, "doc.txt", "version two\n", mtime: (1_700_000_000, 600_000_000))
        let after = try await source.snapshot(options: ListingOptions()).entries[0]
        XCTAssertEqual(after.size, before.size)
        XCTAssertEqual(after.mtime, before.mtime)
        XCTAssertNotNil(before.validator)
        XCTAssertNotEqual(after.validator, before.validator)
    }

    /// A server that ignores Range answers the one-byte GET (sent when HEAD gives no size) with the whole file:
    /// its Content-Length is the size. It was refused as a body over the one-byte bound, and the file, unreadable,
    /// held back every removal on every run.
    func testAServerThatIgnoresRangeGivesTheSizeInItsWholeAnswer() async throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "probe/a.txt", "hello world\n", mtime: (1_700_000_000, 0))
        FixtureTree.write(server.servedRoot, "probe/b.txt", "second file, longer\n", mtime: (1_700_000_100, 0))
        let snapshot = try await source(server.url("norange", "probe/")).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.issues.map(\.description), [])
        XCTAssertEqual(snapshot.entries.map { "\($0.path) \($0.size) \($0.mtime.seconds)" }, ["a.txt 12 1700000000", "b.txt 20 1700000100"])
        XCTAssertTrue(snapshot.isComplete)
        // The sizes came from the one-byte GETs, which the server answered in whole (200).
        XCTAssertEqual(server.requests(containing: "GET /norange/probe/").filter { $0.contains(" 200 ") && $0.contains("range=bytes=0-0") }.count, 2,
                       "\(server.requests(containing: "/norange/probe/"))")
    }

    /// A file whose size neither HEAD nor a GET states (Range ignored, no Content-Length) is one clear issue line.
    func testAFileWithNoStatedSizeIsOneClearIssue() async throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "probe/a.txt", "hello world\n")
        let snapshot = try await source(server.url("nosize", "probe/")).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), [])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot mirror a.txt: \(server.url("nosize", "probe/a.txt")) states no size: HEAD gave no Content-Length, and a one-byte GET was answered with the whole file and no Content-Length either; nothing is removed until the server states it",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// While probing (`webdav = "auto"`), a 404 to PROPFIND means a plain server that does not know the method,
    /// not a missing folder: the index pages list the tree. It was reported as "does not exist".
    func testAPlainServerAnsweringPROPFINDWith404IsListedFromItsIndexPages() async throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "plain/sub/a.txt", "alpha\n")
        let snapshot = try await source(server.url("nodav", "plain/")).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.issues.map(\.description), [])
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["sub", "sub/a.txt"])
        XCTAssertTrue(snapshot.isComplete)
        XCTAssertFalse(server.requests(containing: "PROPFIND /nodav/plain/ 404 ").isEmpty, "\(server.requests(containing: "/nodav/"))")
    }

    /// A missing source folder is still named, in one line, whichever way the server answers PROPFIND: by
    /// PROPFIND's own 404 when the server is known to speak WebDAV, by the index GET's while probing.
    func testAMissingSourceFolderIsNamedWhateverThePROPFINDAnswer() async throws {
        let server = try NginxServer()
        for (location, webdav) in [("dav", true), ("dav", nil), ("nodav", nil), ("html", nil)] as [(String, Bool?)] {
            let url = server.url(location, "no-such-folder/")
            do {
                let snapshot = try await source(url) { $0.webdav = webdav }.snapshot(options: ListingOptions())
                XCTFail("\(url) listed \(snapshot.entries.map(\.path))")
            } catch let error as SourceError {
                XCTAssertEqual(error.code, .notFound, url)
                XCTAssertEqual(error.message, "source folder \(url) does not exist (HTTP 404); check the URL")
            }
        }
    }

    /// A WebDAV server whose source folder was missing on one run is still asked with PROPFIND on the next: the
    /// probe's 404 no longer says the server is plain, so its index pages are not asked first.
    func testAMissingFolderDoesNotMakeAWebDAVServerPlain() async throws {
        let server = try NginxServer()
        let source = try source(server.url("dav", "later/"))
        do {
            _ = try await source.snapshot(options: ListingOptions())
            XCTFail("a missing folder listed")
        } catch let error as SourceError {
            XCTAssertEqual(error.code, .notFound)
        }
        FixtureTree.write(server.servedRoot, "later/a.txt", "alpha\n")
        let before = server.requests(containing: "/dav/later/").count
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(server.requests(containing: "/dav/later/").dropFirst(before).filter { $0.hasPrefix("GET ") }, [])
    }

    /// A folder that shows its index.html in place of an autoindex is an issue for that folder (which holds back
    /// every removal), not a listing of what the page links: the files it left out looked removed at the source,
    /// and their local copies went to the trash. What the page links below the folder is real and is listed (its
    /// HEAD ran while the index.html check did). The same for an index.htm or a Default.htm (a gallery tool's,
    /// an IIS export's), found by the page's ETag. Autoindex pages, titled as such, still list, at no extra request.
    func testAFolderShowingItsIndexHTMLIsAnIssueNotAListing() async throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "site/listed/a.txt", "alpha\n")
        let page = "<html><head><title>Welcome</title></head><body><a href=\"a.txt\">A</a></body></html>\n"
        for (folder, index) in [("page", "index.html"), ("gallery", "index.htm"), ("export", "Default.htm")] {
            FixtureTree.write(server.servedRoot, "site/\(folder)/\(index)", page)
            FixtureTree.write(server.servedRoot, "site/\(folder)/a.txt", "alpha\n")
            FixtureTree.write(server.servedRoot, "site/\(folder)/b.txt", "beta\n")
        }
        let snapshot = try await source(server.url("html", "site/")).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["export", "export/a.txt", "gallery", "gallery/a.txt", "listed", "listed/a.txt", "page", "page/a.txt"])
        XCTAssertEqual(snapshot.issues.map(\.description).sorted(), [("export", "Default.htm"), ("gallery", "index.htm"), ("page", "index.html")].map { folder, index in
            "cannot list \(folder): \(server.url("html", "site/\(folder)/")) shows its \(index), a web page, instead of a listing of the folder, so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder, or exclude it"
        })
        XCTAssertFalse(snapshot.isComplete)
        let checks = server.requests(containing: "HEAD ").filter { !$0.contains(".txt ") }.map { $0.split(separator: " ").prefix(3).joined(separator: " ") }
        XCTAssertEqual(checks.filter { $0.contains("/page/") }, ["HEAD /html/site/page/index.html 200"])
        XCTAssertEqual(checks.filter { $0.contains("/gallery/") }, ["HEAD /html/site/gallery/index.html 404", "HEAD /html/site/gallery/index.htm 200"])
        XCTAssertEqual(checks.filter { $0.contains("/export/") }.last, "HEAD /html/site/export/Default.htm 200")
        XCTAssertEqual(checks.filter { $0.contains("/listed/") || $0.hasPrefix("HEAD /html/site/ ") }, [], "an autoindex page costs no check")
    }

    /// Python's http.server shows a folder's index.htm in place of its listing, as it does index.html, with a
    /// Last-Modified and no ETag: an issue for that folder, not a listing (its files left out looked removed).
    /// Its own listings, titled "Directory listing for", still list.
    func testPythonsServerShowingAnIndexHTMIsAnIssueNotAListing() async throws {
        let served = TemporaryDirectory("python-served"), logs = TemporaryDirectory("python-log")
        FixtureTree.write(served.path, "listed/a.txt", "alpha\n")
        FixtureTree.write(served.path, "gallery/index.htm", "<html><head><title>Gallery</title></head><body><a href=\"a.txt\">A</a></body></html>\n")
        FixtureTree.write(served.path, "gallery/a.txt", "alpha\n")
        FixtureTree.write(served.path, "gallery/b.txt", "beta\n")
        let port = try LoopbackServer.freePort()
        let pid = try LoopbackServer.spawn("python3", ["-m", "http.server", "--bind", "127.0.0.1", "--directory", served.path, String(port)],
                                           output: logs.path("server.log"))
        defer {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        try LoopbackServer.waitForPort(port, name: "python3 -m http.server", log: logs.path("server.log"))
        let url = "http://127.0.0.1:\(port)/"
        let snapshot = try await source(url).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["gallery", "gallery/a.txt", "listed", "listed/a.txt"])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot list gallery: \(url)gallery/ shows its index.htm, a web page, instead of a listing of the folder, so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder, or exclude it",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// A folder answered with a login page (a password field; here through a redirect, as a login portal sends
    /// it) is an issue for that folder, not a listing: the page's links were taken for the folder's files.
    func testAFolderAnsweredWithALoginPageIsAnIssueNotAListing() async throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "login.html", """
            <html><head><title>Sign in</title></head><body><form method="post" action="/session">
            <input name="user"><INPUT Type=Password name="pass"><a href="forgot.html">Forgot it?</a></form></body></html>
            """)
        FixtureTree.write(server.servedRoot, "site/open/a.txt", "alpha\n")
        FixtureTree.write(server.servedRoot, "site/login-required/b.txt", "beta\n")
        let snapshot = try await source(server.url("html", "site/")).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["login-required", "open", "open/a.txt"])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot list login-required: \(server.url("html", "site/login-required/")) answers with a login page (it asks for a password), not a listing of the folder; nothing is removed until Folio can list it: check username and password-file or token-file, and the URL",
        ])
        XCTAssertFalse(snapshot.isComplete)
    }

    /// A server killed mid-download fails the file; after a restart the download resumes with Range from the
    /// bytes already in the partial file, and only the rest crosses the wire.
    func testKilledServerThenResumeWithRange() async throws {
        let server = try NginxServer()
        let content = FixtureTree.bytes(count: 2 << 20, seed: 3)
        FixtureTree.write(server.servedRoot, "movie.bin", content, mtime: (1_700_000_000, 0))
        let source = try source(server.url("slow"))
        let entry = try await source.snapshot(options: ListingOptions()).entries[0]
        let scratch = TemporaryDirectory("killed")
        let partial = scratch.path("part")
        let failure = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SourceError?, any Error>) in
            // Why a thread: the download blocks in libcurl, as on an engine worker.
            // Why `ended`: a download that fails before 300 KB must fail the test, not keep this loop waiting.
            let ended = Locked(false)
            Thread.detachNewThread {
                do {
                    let connection = try source.makeConnection()
                    defer { connection.close() }
                    _ = try SourceConformance.download(entry, with: connection, into: partial, from: 0)
                    ended.withLock { $0 = true }
                    continuation.resume(returning: nil)
                } catch {
                    ended.withLock { $0 = true }
                    continuation.resume(returning: error as? SourceError)
                }
            }
            while !ended.withLock({ $0 }), (FixtureTree.read(partial)?.count ?? 0) < 300_000 { usleep(5_000) }
            server.stop(signal: SIGKILL)
        }
        XCTAssertEqual(failure?.code, .unreachable, "\(String(describing: failure))")
        let prefix = FixtureTree.read(partial) ?? []
        XCTAssertGreaterThanOrEqual(prefix.count, 300_000)
        XCTAssertLessThan(prefix.count, content.count)
        XCTAssertEqual(prefix, Array(content[..<prefix.count]))

        try server.start()
        let connection = try source.makeConnection()
        defer { connection.close() }
        let resumed = try SourceConformance.download(entry, with: connection, into: scratch.path("resumed"), from: Int64(prefix.count), prefix: prefix)
        XCTAssertEqual(resumed, content)
        let last = server.requests(containing: "GET /slow/movie.bin").last ?? ""
        XCTAssertTrue(last.hasPrefix("GET /slow/movie.bin 206 \(content.count - prefix.count) range=bytes=\(prefix.count)- if_range="), last)
    }

    func testHTTPSWithCAFileInsecureAndUntrusted() async throws {
        let server = try NginxServer(tls: true)
        FixtureTree.write(server.servedRoot, "a.txt", "tls\n", mtime: (1_700_000_000, 0))
        let url = server.url("dav")

        let trusted = try await source(url) { $0.caFile = server.certificatePath }.snapshot(options: ListingOptions())
        XCTAssertEqual(trusted.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(trusted.issues, [])

        do {
            _ = try await source(url).snapshot(options: ListingOptions())
            XCTFail("an untrusted certificate was accepted")
        } catch let error as SourceError {
            XCTAssertEqual(error.code, .authentication)
            XCTAssertTrue(error.message.hasPrefix("the TLS certificate of \(url) is not trusted: curl 60 ("), error.message)
            XCTAssertTrue(error.message.hasSuffix("; add its CA with ca-file"), error.message)
        }

        let insecure = try await source(url) { $0.insecureTLS = true }.snapshot(options: ListingOptions())
        XCTAssertEqual(insecure.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(insecure.issues.count, 1)
        guard case .warning(let text) = insecure.issues.first?.kind else { return XCTFail("no warning: \(insecure.issues)") }
        XCTAssertTrue(text.hasPrefix("insecure-tls = true"), text)
    }

    /// `webdav = true` for a server that does not speak WebDAV (nginx without dav_ext answers PROPFIND 405) says
    /// so and what to set; it read "answered HTTP 405, which Folio did not expect here".
    func testWebDAVSetForAPlainServerSaysToSetAuto() async throws {
        let server = try NginxServer()
        let url = server.url("html")
        do {
            _ = try await source(url) { $0.webdav = true }.snapshot(options: ListingOptions())
            XCTFail("PROPFIND to a plain server gave a listing")
        } catch let error as SourceError {
            XCTAssertEqual(error.message, "\(url) does not speak WebDAV (PROPFIND answered HTTP 405); set webdav = \"auto\" (folio mirror: --webdav auto) to read its index pages instead")
        }
    }

    /// http:// to a port that serves HTTPS: nginx answers 400 with a page that says so, which read as a name the
    /// server cannot serve ("is it UTF-8?"). The line says to write https://.
    func testPlainHTTPToAnHTTPSPortSaysToWriteHTTPS() async throws {
        let server = try NginxServer(tls: true)
        let url = server.url("dav").replacingOccurrences(of: "https://", with: "http://")
        do {
            _ = try await source(url).snapshot(options: ListingOptions())
            XCTFail("plain HTTP to an HTTPS port gave a listing")
        } catch let error as SourceError {
            XCTAssertEqual(error.message, "\(url) was refused as a bad request (HTTP 400); if that port serves HTTPS, write https://; else check the URL")
        }
    }

    /// A certificate trusted (its CA given) but issued for another name than the URL's host says so, and what to
    /// do: it advised adding the CA with ca-file, already given.
    func testACertificateForAnotherNameSaysSo() async throws {
        let server = try NginxServer(tls: true, certificateName: "nas.example.test")
        let url = server.url("dav")
        do {
            _ = try await source(url) { $0.caFile = server.certificatePath }.snapshot(options: ListingOptions())
            XCTFail("a certificate for another name was accepted")
        } catch let error as SourceError {
            XCTAssertEqual(error.code, .authentication)
            XCTAssertTrue(error.message.hasPrefix("the TLS certificate of \(url) is for another name than the URL's host: curl 60 ("), error.message)
            XCTAssertTrue(error.message.hasSuffix("; use a name the certificate was issued for in the URL (openssl x509 -noout -ext subjectAltName lists them)"), error.message)
        }
    }

    func testBasicAuthWithPasswordFileAndRefusedPassword() async throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "secret.txt", "inside\n", mtime: (1_700_000_000, 0))
        let folder = TemporaryDirectory("auth")
        FixtureTree.write(folder.path, "good", server.password + "\n")
        FixtureTree.write(folder.path, "bad", "wrong-Pa55word\n")
        let url = server.url("private")

        let source = try source(url) { $0.username = "folio"; $0.passwordFile = folder.path("good") }
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["secret.txt"])
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertEqual(try SourceConformance.download(snapshot.entries[0], with: connection, into: folder.path("out"), from: 0), Array("inside\n".utf8))

        for file in ["bad", nil] {
            do {
                _ = try await self.source(url) { settings in
                    if let file { settings.username = "folio"; settings.passwordFile = folder.path(file) }
                }.snapshot(options: ListingOptions())
                XCTFail("listed without the right password")
            } catch let error as SourceError {
                XCTAssertEqual(error.code, .authentication)
                let expected = file == nil ? "\(url) requires authentication (HTTP 401); set username and password-file, or token-file"
                                           : "\(url) refused the credentials (HTTP 401); check username, password-file or token-file"
                XCTAssertEqual(error.message, expected)
                XCTAssertFalse("\(error.message) \(error.underlying ?? "")".contains("Pa55"))
            }
        }
    }

    /// The password goes in the scheme of a challenge the server made, never in a guessed one: the public root
    /// answers without a challenge, and the Digest-protected folder below it is still listed and fetched, with no
    /// request ever carrying Basic credentials.
    func testDigestFolderBelowAPublicRootIsListedWithoutBasic() async throws {
        let server = try ApacheServer()
        FixtureTree.write(server.servedRoot, "open.txt", "open\n", mtime: (1_700_000_000, 0))
        FixtureTree.write(server.servedRoot, "locked/d.txt", "digest\n", mtime: (1_700_000_000, 0))
        let folder = TemporaryDirectory("digest-below")
        FixtureTree.write(folder.path, "password", server.password + "\n")
        // A password file other users can read is warned about, every run, as an SFTP key is.
        let exposed = try await source(server.url("mixed")) { $0.username = "folio"; $0.passwordFile = folder.path("password") }.snapshot(options: ListingOptions())
        XCTAssertEqual(exposed.issues.map(\.description), ["\(server.url("mixed")): password-file \(folder.path("password")) can be read by other users (mode 644), and it holds a secret; chmod 600 \(folder.path("password"))"])
        chmod(folder.path("password"), 0o600)
        let source = try source(server.url("mixed")) { $0.username = "folio"; $0.passwordFile = folder.path("password") }
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["locked", "locked/d.txt", "open.txt"])
        XCTAssertEqual(snapshot.issues, [])
        let connection = try source.makeConnection()
        defer { connection.close() }
        for (entry, content) in zip(snapshot.entries.filter { $0.kind == .file }, ["digest\n", "open\n"]) {
            XCTAssertEqual(try SourceConformance.download(entry, with: connection, into: folder.path("out-\(content.count)"), from: 0), Array(content.utf8))
        }
        let log = ((try? String(contentsOfFile: server.authLog, encoding: .utf8)) ?? "").split(separator: "\n")
        XCTAssertTrue(log.contains { $0.hasPrefix("PROPFIND /mixed/ 207 -") }, "the root was not public: \(log)")
        XCTAssertTrue(log.contains { $0.hasPrefix("PROPFIND /mixed/locked/ 207 Digest ") }, "\(log)")
        XCTAssertFalse(log.contains { $0.contains(" Basic ") }, "\(log)")
    }

    func testDigestAuthOnApache() async throws {
        let server = try ApacheServer()
        FixtureTree.write(server.servedRoot, "d.txt", "digest\n", mtime: (1_700_000_000, 0))
        let folder = TemporaryDirectory("digest")
        FixtureTree.write(folder.path, "password", server.password + "\n")
        let source = try source(server.url("digest")) { $0.username = "folio"; $0.passwordFile = folder.path("password") }
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["d.txt"])
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertEqual(try SourceConformance.download(snapshot.entries[0], with: connection, into: folder.path("out"), from: 0), Array("digest\n".utf8))
    }
}
