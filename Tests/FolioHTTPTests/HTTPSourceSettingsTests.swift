import FolioCore
import FolioHTTP
import FolioTestSupport
import XCTest

/// What `HTTPSource.init` checks without touching the network.
final class HTTPSourceSettingsTests: XCTestCase {
    private func make(_ configure: (inout SourceSettings) -> Void) throws -> HTTPSource {
        var settings = SourceSettings()
        configure(&settings)
        // Port 9 on 127.0.0.1: nothing listens, and init must not try.
        return try HTTPSource(location: SourceLocation(parsing: "https://127.0.0.1:9/a%20b/"), settings: settings, timeout: 5, transfers: 2)
    }

    private func message(_ configure: (inout SourceSettings) -> Void) -> String? {
        do {
            _ = try make(configure)
            return nil
        } catch {
            return (error as? SourceError)?.message
        }
    }

    func testInitChecksSettingsOffline() throws {
        let source = try make { _ in }
        XCTAssertEqual(source.displayName, "https://127.0.0.1:9/a%20b/")
        XCTAssertEqual(source.features, SourceFeatures(mtimePrecision: .second, checksums: false, resumable: true, batchDownloads: true, parallelBatches: true, listsAhead: true))

        let folder = TemporaryDirectory("settings")
        FixtureTree.write(folder.path, "secret", "hunter2\n")
        XCTAssertNoThrow(try make { $0.username = "u"; $0.passwordFile = folder.path("secret") })
        XCTAssertEqual(message { $0.username = "u" }, "source https://127.0.0.1:9/a%20b/: username is set but password-file is not; add password-file, the path of a file holding the password")
        XCTAssertEqual(message { $0.passwordFile = folder.path("secret") }, "source https://127.0.0.1:9/a%20b/: password-file is set but username is not; add username")
        XCTAssertEqual(message { $0.tokenFile = folder.path("secret"); $0.username = "u" },
                       "source https://127.0.0.1:9/a%20b/: token-file is set together with username or password-file; use one: a bearer token, or a user name and its password")
        XCTAssertEqual(message { $0.caFile = folder.path("missing.pem") },
                       "cannot read ca-file \(folder.path("missing.pem")) for https://127.0.0.1:9/a%20b/; check that it exists and holds PEM certificates")
        FixtureTree.write(folder.path, "ca.der", [0x30, 0x82, 0x01, 0x0A])
        XCTAssertEqual(message { $0.caFile = folder.path("ca.der") },
                       "ca-file \(folder.path("ca.der")) holds no PEM certificate (-----BEGIN CERTIFICATE-----); give the CA's certificate in PEM form (openssl x509 -inform der -in ca.der -out ca.pem converts a DER one)")
        let unreadable = message { $0.username = "u"; $0.passwordFile = folder.path("missing") }
        XCTAssertEqual(unreadable, "cannot read password-file \(folder.path("missing")) (No such file or directory); check that it exists and is readable by this user")
    }

    /// The error listing `url` ends with; nil, and a failure, if it lists.
    private func listingError(_ url: String, timeout: Int, file: StaticString = #filePath, line: UInt = #line) async throws -> SourceError? {
        let source = try HTTPSource(location: SourceLocation(parsing: url), settings: SourceSettings(), timeout: timeout, transfers: 1)
        do {
            _ = try await source.snapshot(options: ListingOptions())
            XCTFail("listed \(url)", file: file, line: line)
            return nil
        } catch let error as SourceError {
            return error
        }
    }

    /// Lists `url` and checks that it fails as unreachable with a message from `prefix` to `suffix` (curl's own
    /// words between them). Each caller counts the server's connections to show there were no retries.
    private func assertRefusedAtOnce(_ url: String, saying prefix: String, _ suffix: String, file: StaticString = #filePath, line: UInt = #line) async throws {
        guard let error = try await listingError(url, timeout: 5, file: file, line: line) else { return }
        XCTAssertEqual(error.code, .unreachable, file: file, line: line)
        XCTAssertTrue(error.message.hasPrefix(prefix), error.message, file: file, line: line)
        XCTAssertTrue(error.message.hasSuffix(suffix), error.message, file: file, line: line)
    }

    func testUnreachableServerIsOneClearError() async throws {
        let port = try LoopbackServer.freePort()
        if let error = try await listingError("http://127.0.0.1:\(port)/files/", timeout: 2) {
            XCTAssertEqual(error.code, .unreachable)
            XCTAssertTrue(error.failsRun)
            XCTAssertTrue(error.message.hasPrefix("cannot reach http://127.0.0.1:\(port)/files/: curl 7 ("), error.message)
            XCTAssertTrue(error.message.hasSuffix("; check that the server is up and the URL is right"), error.message)
        }
    }

    /// An http:// URL for a port that serves another protocol (here, what an SSH server says first) says that the
    /// port does not answer in HTTP, at once, rather than libcurl's "Received HTTP/0.9 when not allowed".
    func testHTTPToAnSSHPortSaysItIsNotHTTP() async throws {
        let (listener, port) = try LoopbackServer.listeningSocket()
        defer { close(listener) }
        let connections = Locked(0)
        // Every connection gets an SSH banner and is closed, as sshd does with a client that speaks HTTP.
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                connections.withLock { $0 += 1 }
                _ = "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n".withCString { write(client, $0, strlen($0)) }
                close(client)
            }
        }
        let url = "http://127.0.0.1:\(port)/files/"
        try await assertRefusedAtOnce(url, saying: "\(url) does not answer in HTTP on that port (curl 1 (",
                                      "); check the URL's port (it may be another service's, such as SSH's), else the server sent a malformed answer (its log may say why)")
        shutdown(listener, Int32(SHUT_RDWR))
        // No retries: the listing's first requests (at most two) go out together, and a retry would add more.
        XCTAssertLessThanOrEqual(connections.withLock { $0 }, 2)
    }

    /// An https:// URL for a port that serves plain HTTP says so, with the fix, at once (no retries), rather than
    /// "cannot reach … check that the server is up".
    func testHTTPSToAPlainHTTPPortSaysItDoesNotSpeakTLS() async throws {
        let server = try NginxServer()
        let url = "https://127.0.0.1:\(server.port)/dav/"
        try await assertRefusedAtOnce(url, saying: "\(url) does not speak TLS on that port (curl 35 (",
                                      "); if the server serves plain HTTP there, write http://")
        // No retries: nginx logs each TLS hello it cannot read as HTTP as a 400; the listing's first requests (at
        // most two) go out together, and retrying them took eight.
        let log = try String(contentsOfFile: server.accessLog, encoding: .utf8)
        XCTAssertLessThanOrEqual(log.split(separator: "\n").count, 2, log)
    }
}
