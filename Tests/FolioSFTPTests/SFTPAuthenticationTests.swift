import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Host keys are checked strictly; log-in failures and unreachable servers are one line naming host and fix.
final class SFTPAuthenticationTests: SFTPTestCase {
    /// Gives the account `folio-test` a random password for this test, and locks it again when the test ends.
    private func giveTheTestUserAPassword() throws -> String {
        guard getpwnam("folio-test") != nil else { throw LoopbackServer.Failure("user folio-test is missing; run scripts/install-deps.sh as root") }
        let password = "pw-" + UUID().uuidString.prefix(12)
        _ = try LoopbackServer.run("/bin/sh", ["-c", "echo 'folio-test:\(password)' | /usr/sbin/chpasswd"])
        addTeardownBlock { _ = try? LoopbackServer.run("/usr/sbin/usermod", ["-p", "*", "folio-test"]) }
        return password
    }

    private func assertOneLine(_ error: SourceError?, _ code: SourceError.Code, contains parts: [String], file: StaticString = #filePath, line: UInt = #line) {
        guard let error else { return XCTFail("no error", file: file, line: line) }
        XCTAssertEqual(error.code, code, error.message, file: file, line: line)
        XCTAssertFalse(error.message.contains("\n"), "more than one line: \(error.message)", file: file, line: line)
        for part in parts { XCTAssertTrue(error.message.contains(part), "\"\(part)\" missing from: \(error.message)", file: file, line: line) }
    }

    func testUnknownHostIsRefusedWithTheTrustCommandThenTrustedKeyWorks() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-trust")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let home = TemporaryDirectory("sftp-home")
        let knownHosts = home.path("dot-ssh/known_hosts")  // neither the folder nor the file exists yet
        let fingerprint = try server.hostKeyFingerprint()

        let error = await snapshotError(try source(server, served.path, knownHosts: knownHosts))
        assertOneLine(error, .authentication, contains: ["folio trust sftp://127.0.0.1:\(server.port) --known-hosts \(knownHosts)", "ssh-ed25519", fingerprint])
        // A file not there (a mistyped path, say) is named as such.
        XCTAssertTrue(error?.message.contains(" is not in \(knownHosts), which does not exist yet); ") == true, "\(String(describing: error))")

        let (key, standing) = try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: knownHosts, timeoutSeconds: 10)
        XCTAssertEqual(standing, .unknown)
        XCTAssertEqual(key.keyType, "ssh-ed25519")
        XCTAssertEqual(key.fingerprint, fingerprint)
        XCTAssertTrue(key.knownHostsLine.hasPrefix("[127.0.0.1]:\(server.port) ssh-ed25519 "))
        try HostKeyTrust.append(key, to: knownHosts)
        XCTAssertEqual(try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: knownHosts, timeoutSeconds: 10).standing, .trusted)
        var info = stat()
        XCTAssertEqual(stat(home.path("dot-ssh"), &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)

        let snapshot = try await source(server, served.path, knownHosts: knownHosts).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
    }

    func testHashedKnownHostsEntryIsAccepted() async throws {
        let server = try SSHServer()
        try server.hashKnownHosts()
        let text = try String(contentsOfFile: server.knownHostsPath, encoding: .utf8)
        XCTAssertTrue(text.hasPrefix("|1|"), text)
        let served = TemporaryDirectory("sftp-hashed")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let snapshot = try await source(server, served.path).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.count, 1)
    }

    /// A server with an ed25519 and an ECDSA host key is asked for the key of a type known_hosts lists for it, so
    /// a host pinned by `ssh` (its ed25519 key, plain or hashed) or by an older `folio trust` (its ECDSA key)
    /// connects; libssh2 1.10 on its own asks for ECDSA first.
    func testTheHostKeyOfATypeKnownHostsListsIsAskedFor() async throws {
        let server = try SSHServer(ecdsaHostKey: true)
        let ecdsaKey = try XCTUnwrap(server.ecdsaHostKeyPath)
        let served = TemporaryDirectory("sftp-key-types")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let files = TemporaryDirectory("sftp-key-types-known-hosts")
        FixtureTree.write(files.path, "ecdsa", try server.knownHostsLine(ecdsaKey) + "\n")
        let ed25519 = (try server.hostKeyFingerprint(), "ssh-ed25519")
        let ecdsa = (try server.hostKeyFingerprint(ecdsaKey), "ecdsa-sha2-nistp256")

        func assertConnects(_ knownHosts: String, offering expected: (fingerprint: String, type: String), _ label: String) async throws {
            let (key, standing) = try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: knownHosts, timeoutSeconds: 10)
            XCTAssertEqual([key.keyType, key.fingerprint], [expected.type, expected.fingerprint], label)
            XCTAssertEqual(standing, .trusted, label)
            do {
                let snapshot = try await source(server, served.path, knownHosts: knownHosts).snapshot(options: ListingOptions())
                XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"], label)
            } catch {
                XCTFail("\(label): \(error)")
            }
        }
        try await assertConnects(server.knownHostsPath, offering: ed25519, "ed25519 line only")
        try await assertConnects(files.path("ecdsa"), offering: ecdsa, "ECDSA line only")
        try server.hashKnownHosts()
        XCTAssertTrue(try String(contentsOfFile: server.knownHostsPath, encoding: .utf8).hasPrefix("|1|"))
        try await assertConnects(server.knownHostsPath, offering: ed25519, "hashed ed25519 line only")

        let (key, standing) = try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: files.path("none"), timeoutSeconds: 10)
        XCTAssertEqual([key.keyType, key.fingerprint], [ed25519.1, ed25519.0], "nothing known: the ed25519 key")
        XCTAssertEqual(standing, .unknown)
    }

    /// A host typed with capitals is looked up in lower case, as OpenSSH writes it, and as typed, as older Folio
    /// versions' `folio trust` wrote it: both lines let it connect.
    func testAHostTypedWithCapitalsMatchesItsLineInEitherCase() throws {
        let server = try SSHServer()
        let files = TemporaryDirectory("sftp-host-case")
        let line = try String(contentsOfFile: server.knownHostsPath, encoding: .utf8)
        XCTAssertTrue(line.hasPrefix("[127.0.0.1]:\(server.port) "), line)
        for name in ["localhost", "LocalHost"] {
            FixtureTree.write(files.path, name, line.replacingOccurrences(of: "[127.0.0.1]", with: "[\(name)]"))
            let (_, standing) = try HostKeyTrust.fetch(host: "LocalHost", port: server.port, knownHostsPath: files.path(name), timeoutSeconds: 10)
            XCTAssertEqual(standing, .trusted, "a line for \(name)")
        }
        FixtureTree.write(files.path, "other", line.replacingOccurrences(of: "[127.0.0.1]", with: "[otherhost]"))
        XCTAssertEqual(try HostKeyTrust.fetch(host: "LocalHost", port: server.port, knownHostsPath: files.path("other"), timeoutSeconds: 10).standing, .unknown)
    }

    func testChangedHostKeyIsRefused() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-changed")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        server.stop()
        try server.replaceHostKey()
        try server.start()
        let error = await snapshotError(try source(server, served.path))
        assertOneLine(error, .authentication, contains: ["HOST KEY CHANGED", "sftp://127.0.0.1:\(server.port)", try server.hostKeyFingerprint(), "refusing to connect"])
        XCTAssertThrowsError(try source(server, served.path).makeConnection()) { error in
            XCTAssertEqual((error as? SourceError)?.code, .authentication)
        }
        XCTAssertEqual(try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: server.knownHostsPath, timeoutSeconds: 10).standing, .changed)
    }

    /// known_hosts lines whose hosts are patterns count as OpenSSH counts them: `*` and `?` match, `!` rules the
    /// line out; libssh2 alone compared names, so such a host was "not a known host".
    func testKnownHostsPatternsMatchAsInOpenSSH() async throws {
        let names = HostKeyTrust.knownHostsNames(host: "127.0.0.1", port: 2222)
        let key = "ssh-ed25519 AAAA"
        XCTAssertEqual(HostKeyTrust.resolvingPatterns("[127.0.0.*]:2222 \(key)", names: names), "[127.0.0.1]:2222 \(key)")
        XCTAssertEqual(HostKeyTrust.resolvingPatterns("nas,[127.0.0.?]:2222 \(key)", names: names), "[127.0.0.1]:2222 \(key)")
        XCTAssertNil(HostKeyTrust.resolvingPatterns("[127.0.0.*]:2222,![127.0.0.1]:2222 \(key)", names: names))
        XCTAssertNil(HostKeyTrust.resolvingPatterns("[10.*]:2222 \(key)", names: names))
        XCTAssertEqual(HostKeyTrust.resolvingPatterns("[127.0.0.1]:2222 \(key)", names: names), "[127.0.0.1]:2222 \(key)", "a plain line is left as it is")
        XCTAssertEqual(HostKeyTrust.resolvingPatterns("@revoked * \(key)", names: names), "@revoked * \(key)")

        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-known-hosts-pattern")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let hostKey = try String(contentsOfFile: server.hostKeyPath + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
        FixtureTree.write(served.path, "known_hosts", "[127.0.0.*]:\(server.port) \(hostKey)\n")
        let snapshot = try await source(server, served.path, knownHosts: served.path("known_hosts")).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt", "known_hosts"])
    }

    /// A host key marked `@revoked` is refused, even where a plain line trusts it too (libssh2 skips marker lines,
    /// so it was accepted), and `folio trust` will not add it.
    func testARevokedHostKeyIsRefusedAndNotTrusted() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-revoked")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let hostKey = try String(contentsOfFile: server.hostKeyPath + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
        let knownHosts = served.path("known_hosts")
        FixtureTree.write(served.path, "known_hosts", "@revoked * \(hostKey)\n[127.0.0.1]:\(server.port) \(hostKey)\n")
        let error = await snapshotError(try source(server, served.path, knownHosts: knownHosts))
        assertOneLine(error, .authentication, contains: ["REVOKED HOST KEY: sftp://127.0.0.1:\(server.port) offers ssh-ed25519 \(try server.hostKeyFingerprint()), which \(knownHosts) marks @revoked; refusing to connect"])
        XCTAssertEqual(try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: knownHosts, timeoutSeconds: 10).standing, .revoked)

        let trust = FolioBinary.run(["trust", "sftp://127.0.0.1:\(server.port)", "--known-hosts", knownHosts, "--yes"])
        XCTAssertEqual(trust.status, 1)
        XCTAssertEqual(trust.stderrLines, ["folio: not trusting sftp://127.0.0.1:\(server.port): \(knownHosts) marks this key @revoked; the server needs a new host key"])
        XCTAssertEqual(try String(contentsOfFile: knownHosts, encoding: .utf8).split(separator: "\n").count, 2, "nothing was added")
    }

    /// A server on a port other than 22 is checked against its own `[host]:port` line only, as OpenSSH does:
    /// a line for the plain host (its port 22) neither makes it "changed" (a different key) nor trusted (the
    /// same key). Names are looked up in lower case.
    func testOnlyTheHostAndPortLineCountsForAPortOtherThan22() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-port-22-line")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let fingerprint = try server.hostKeyFingerprint()
        let hostKey = try String(contentsOfFile: server.hostKeyPath + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
        let otherKey = try String(contentsOfFile: try server.makeUnauthorizedKey() + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
        for (label, key) in [("a different key", otherKey), ("the same key", hostKey)] {
            let knownHosts = served.path("known_hosts \(label)")
            FixtureTree.write(served.path, "known_hosts \(label)", "127.0.0.1 \(key)\n")
            let error = await snapshotError(try source(server, served.path, knownHosts: knownHosts))
            XCTAssertEqual(error?.message, "sftp://127.0.0.1:\(server.port) is not a known host (ssh-ed25519 key \(fingerprint) is not in \(knownHosts)); if that fingerprint is right, run: folio trust sftp://127.0.0.1:\(server.port) --known-hosts \(knownHosts)", label)
            XCTAssertEqual(error?.code, .authentication, label)
            XCTAssertEqual(try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: knownHosts, timeoutSeconds: 10).standing, .unknown, label)
        }
        XCTAssertEqual(HostKeyTrust.knownHostsName(host: "NAS.Example", port: 22), "nas.example")
        XCTAssertEqual(HostKeyTrust.knownHostsName(host: "NAS.Example", port: 2222), "[nas.example]:2222")
    }

    func testWrongKeyIsRefusedInOneLine() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-wrong-key")
        let wrongKey = try server.makeUnauthorizedKey()
        let error = await snapshotError(try source(server, served.path, identity: wrongKey))
        assertOneLine(error, .authentication, contains: ["sftp://127.0.0.1:\(server.port)", "refused to log in \(server.user)", wrongKey, "authorized_keys"])
    }

    /// A password file on a server that takes keys only is named as tried and why it could not be used, not
    /// reported as "no key or password was configured".
    func testPasswordFileOnAKeysOnlyServerSaysTheServerTakesNoPasswords() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-no-passwords")
        let wrongKey = try server.makeUnauthorizedKey()
        FixtureTree.write(served.path, "password", "secret\n")
        var settings = settings(server, identity: wrongKey)
        settings.passwordFile = served.path("password")
        let source = try SFTPSource(location: SourceLocation(parsing: server.url(served.path)), settings: settings,
                                    timeout: 10, transfers: 4)
        let error = await snapshotError(source)
        assertOneLine(error, .authentication, contains: [
            "tried key \(wrongKey), password-file, which the server does not take, at least not before a key; server offers publickey); log in with a key: set identity (folio mirror: --identity) to one whose .pub is in ~\(server.user)/.ssh/authorized_keys on the server"])
        XCTAssertFalse(error?.message.contains("secret") ?? true, "the password never appears")

        // The same server with a password-file that is not there: the line names that too.
        settings.passwordFile = served.path("missing")
        let missing = try SFTPSource(location: SourceLocation(parsing: server.url(served.path)), settings: settings,
                                     timeout: 10, transfers: 4)
        let missingError = await snapshotError(missing)
        assertOneLine(missingError, .authentication, contains: [
            "tried key \(wrongKey), password-file, which the server does not take, at least not before a key, and \(served.path("missing")) cannot be read; server offers publickey)"])
    }

    /// A default key (`~/.ssh/id_ed25519`, no identity set) that has a passphrase, with no passphrase-file, does
    /// not end the log-in: the next way in is tried. Alone, it is named in the refusal as tried, with why.
    func testADefaultKeyWithAPassphraseIsPassedOver() throws {
        let server = try SSHServer()
        let keys = TemporaryDirectory("sftp-default-keys")
        let locked = try server.makeUnauthorizedKey(passphrase: "correct horse")
        try server.authorize(locked)
        try FileManager.default.copyItem(atPath: locked, toPath: keys.path("id_ed25519"))
        let endpoint = SFTPEndpoint(host: server.host, port: server.port, user: server.user, rootPath: "/", identity: nil, passphraseFile: nil,
                                    passwordFile: nil, knownHostsPath: server.knownHostsPath, timeoutSeconds: 10, defaultKeyFolder: keys.path)
        let agent = (ProcessInfo.processInfo.environment["SSH_AUTH_SOCK"] ?? "").isEmpty ? "" : ", ssh-agent"
        XCTAssertThrowsError(try SSHSession.open(endpoint)) { error in
            XCTAssertEqual((error as? SourceError)?.code, .authentication)
            XCTAssertEqual((error as? SourceError)?.message, "sftp://127.0.0.1:\(server.port) refused to log in \(server.user) (tried key \(keys.path("id_ed25519")) (needs a passphrase-file)\(agent); server offers publickey); add the public key to ~\(server.user)/.ssh/authorized_keys on the server or set identity / password-file")
        }

        let open = try server.makeUnauthorizedKey(type: "ecdsa")
        try server.authorize(open)
        try FileManager.default.copyItem(atPath: open, toPath: keys.path("id_ecdsa"))
        let session = try SSHSession.open(endpoint)
        session.close()
        let log = server.log(waitingFor: "Accepted publickey for \(server.user) from 127.0.0.1")
        XCTAssertTrue(log.contains("Accepted publickey for \(server.user) from 127.0.0.1") && log.contains("ECDSA"), log)
    }

    func testECDSAKeyLogsIn() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-ecdsa")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let key = try server.makeUnauthorizedKey(type: "ecdsa")
        try server.authorize(key)
        let snapshot = try await source(server, served.path, identity: key).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
    }

    func testMissingIdentityFileIsNamed() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-no-key")
        let error = await snapshotError(try source(server, served.path, identity: served.path("no-such-key")))
        assertOneLine(error, .authentication, contains: [served.path("no-such-key"), "does not exist"])
    }

    func testRSAKeyGetsTheSHA1Explanation() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-rsa")
        let rsaKey = try server.makeUnauthorizedKey(type: "rsa")
        let error = await snapshotError(try source(server, served.path, identity: rsaKey))
        assertOneLine(error, .authentication, contains: ["RSA", "SHA-1", "which this server (OpenSSH_9.", "OpenSSH 8.8", "ed25519"])
    }

    /// Only OpenSSH 8.8 and later are known to refuse SHA-1 RSA signatures; elsewhere a refused RSA key is most
    /// likely not in authorized_keys, and the line says that first.
    func testOnlyServersThatRefuseSHA1GetTheSHA1Explanation() {
        let refusing = ["SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3", "SSH-2.0-OpenSSH_8.8", "SSH-2.0-OpenSSH_10.0p2", "SSH-2.0-OpenSSH_8.9p1 Ubuntu-3", "SSH-2.0-OpenSSH_for_Windows_9.5"]
        let taking = ["SSH-2.0-OpenSSH_8.4p1 Debian-5", "SSH-2.0-OpenSSH_7.4", "SSH-2.0-dropbear_2022.83", "SSH-2.0-OpenSSH_for_Windows_8.1", "SSH-2.0-Go", ""]
        for banner in refusing { XCTAssertTrue(SSHAuthenticator.refusesSHA1Signatures(banner: banner), banner) }
        for banner in taking { XCTAssertFalse(SSHAuthenticator.refusesSHA1Signatures(banner: banner), banner) }
        XCTAssertEqual(SSHAuthenticator.software("SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"), "OpenSSH_9.2p1")
    }

    func testPassphraseFromFileAndWrongPassphraseNeverShown() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-passphrase")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let key = try server.makeUnauthorizedKey(passphrase: "correct horse")
        try server.authorize(key)
        let secrets = TemporaryDirectory("sftp-secrets")
        FixtureTree.write(secrets.path, "good", "correct horse\n")
        FixtureTree.write(secrets.path, "bad", "battery staple\n")

        var settings = settings(server, identity: key)
        settings.passphraseFile = secrets.path("good")
        let good = try SFTPSource(location: SourceLocation(parsing: server.url(served.path)), settings: settings, timeout: 10, transfers: 1)
        let snapshot = try await good.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.count, 1)

        settings.passphraseFile = secrets.path("bad")
        let bad = try SFTPSource(location: SourceLocation(parsing: server.url(served.path)), settings: settings, timeout: 10, transfers: 1)
        let error = await snapshotError(bad)
        assertOneLine(error, .authentication, contains: ["cannot use identity \(key) for sftp://127.0.0.1:\(server.port): the passphrase in \(secrets.path("bad")) does not open it; check that the file holds that key's passphrase alone"])
        XCTAssertFalse(error?.message.contains("battery") ?? true)
        XCTAssertFalse(error?.underlying?.contains("battery") ?? false)
    }

    /// A password-file logs in where the server takes passwords: by sshd's own password method, and where it asks
    /// only through PAM (keyboard-interactive, FreeBSD's and macOS's default), at its prompt. A wrong password is
    /// refused in one line that names the file to check, and never shows. The test user gets a random password for
    /// the test, locked again after it.
    func testAPasswordFileLogsInByPasswordAndAtAKeyboardInteractivePrompt() throws {
        let password = try giveTheTestUserAPassword()
        let secrets = TemporaryDirectory("sftp-password-files")
        FixtureTree.write(secrets.path, "good", password + "\n")
        FixtureTree.write(secrets.path, "bad", "battery staple\n")
        let noKeys = TemporaryDirectory("sftp-no-default-keys")  // so that no default key is tried first
        for (login, offered, tried) in [(SSHServer.PasswordLogin.password, "publickey,password", "password-file"),
                                        (.keyboardInteractive, "publickey,keyboard-interactive", "password-file (at the keyboard-interactive prompt)")] {
            let server = try SSHServer(user: "folio-test", passwordLogin: login)
            func endpoint(_ file: String) -> SFTPEndpoint {
                SFTPEndpoint(host: server.host, port: server.port, user: server.user, rootPath: "/", identity: nil, passphraseFile: nil,
                             passwordFile: secrets.path(file), knownHostsPath: server.knownHostsPath, timeoutSeconds: 10, defaultKeyFolder: noKeys.path)
            }
            let session = try SSHSession.open(endpoint("good"))
            session.close()
            let accepted = "Accepted \(login == .password ? "password" : "keyboard-interactive/pam") for folio-test"
            let log = server.log(waitingFor: accepted)
            XCTAssertTrue(log.contains(accepted), log)

            XCTAssertThrowsError(try SSHSession.open(endpoint("bad"))) { error in
                let error = error as? SourceError
                assertOneLine(error, .authentication, contains: ["sftp://127.0.0.1:\(server.port) refused to log in folio-test (tried \(tried); server offers \(offered)); check the password in \(secrets.path("bad")), or add the public key to ~folio-test/.ssh/authorized_keys on the server"])
                XCTAssertFalse(error?.message.contains("battery") ?? true)
                XCTAssertFalse(error?.message.contains(password) ?? true)
            }
        }
    }

    /// An ssh-agent holding more keys than the server allows tries (MaxAuthTries) no longer keeps a password-file
    /// from logging in: the password goes first (the server hung up on the agent's keys before it was sent, and
    /// the line said the network was lost). Without a password, that hang-up is said for what it is.
    func testAnAgentWithManyKeysNeitherHidesThePasswordNorReadsAsANetworkLoss() throws {
        let password = try giveTheTestUserAPassword()
        let server = try SSHServer(user: "folio-test", extraConfig: ["MaxAuthTries 3"], passwordLogin: .password)
        let work = TemporaryDirectory("sftp-agent-keys")
        chmod(work.path, 0o755)
        FixtureTree.write(work.path, "served/a.txt", "alpha\n")
        _ = try LoopbackServer.run("chmod", ["-R", "a+rX", work.path("served")])
        FixtureTree.write(work.path, "good", password + "\n")
        let socket = work.path("agent.sock")
        let agent = try LoopbackServer.spawn("/usr/bin/ssh-agent", ["-D", "-a", socket], output: work.path("agent.log"))
        defer { LoopbackServer.stop(pid: agent) }
        for _ in 0..<100 where !FileManager.default.fileExists(atPath: socket) { usleep(20_000) }
        let keys = try (0..<4).map { _ in try server.makeUnauthorizedKey() }
        _ = try LoopbackServer.run("/bin/sh", ["-c", "SSH_AUTH_SOCK=\(socket) ssh-add -q " + keys.joined(separator: " ")])
        let environment = ["FOLIO_STATE_DIR": work.path("state"), "SSH_AUTH_SOCK": socket]
        let base = ["mirror", server.url(work.path("served")), work.path("dst"), "--known-hosts", server.knownHostsPath]

        let withPassword = FolioBinary.run(base + ["--password-file", work.path("good")], environment: environment)
        XCTAssertEqual(withPassword.status, 0, withPassword.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("alpha\n".utf8))

        let agentOnly = FolioBinary.run(base, environment: environment)
        XCTAssertEqual(agentOnly.status, 1)
        XCTAssertEqual(agentOnly.stderrLines, ["mirror:\(work.path("dst")): failed: sftp://127.0.0.1:\(server.port) closed the connection while ssh-agent's keys were tried for folio-test: it refused more of them than it allows (sshd's MaxAuthTries, 6 by default); set identity to the key it takes, or remove keys from the agent (ssh-add -d)"])
    }

    /// A server that takes a key and then a password (AuthenticationMethods publickey,password) says so when the
    /// password-file is missing: the line said to add the key it had just accepted. With both, the log-in goes.
    func testAKeyThenPasswordServerAsksForThePasswordFile() throws {
        let password = try giveTheTestUserAPassword()
        let server = try SSHServer(user: "folio-test", extraConfig: ["AuthenticationMethods publickey,password"], passwordLogin: .password)
        let secrets = TemporaryDirectory("sftp-two-steps")
        FixtureTree.write(secrets.path, "good", password + "\n")
        func endpoint(password: String?) -> SFTPEndpoint {
            SFTPEndpoint(host: server.host, port: server.port, user: server.user, rootPath: "/", identity: server.userKeyPath, passphraseFile: nil,
                         passwordFile: password, knownHostsPath: server.knownHostsPath, timeoutSeconds: 10)
        }
        XCTAssertThrowsError(try SSHSession.open(endpoint(password: nil))) { error in
            assertOneLine(error as? SourceError, .authentication, contains: ["sftp://127.0.0.1:\(server.port) accepted folio-test's key and asks for a password as well (two steps, as AuthenticationMethods publickey,password sets); give the password as password-file (--password-file)"])
        }
        let session = try SSHSession.open(endpoint(password: secrets.path("good")))
        session.close()
    }

    /// A configured key that cannot be used says which of two things is wrong: a key with a passphrase and no
    /// passphrase-file names the setting to add; a file that is no private key (here the .pub) says so.
    func testAnUnusableIdentitySaysWhetherItNeedsAPassphraseOrIsNoPrivateKey() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-unusable-key")
        let locked = try server.makeUnauthorizedKey(passphrase: "correct horse")
        try server.authorize(locked)
        let needsPassphrase = await snapshotError(try source(server, served.path, identity: locked))
        assertOneLine(needsPassphrase, .authentication, contains: ["cannot use identity \(locked) for sftp://127.0.0.1:\(server.port): it is protected by a passphrase; put the passphrase in a file only this user can read and give it as passphrase-file (--passphrase-file)"])

        let unlocked = try server.makeUnauthorizedKey(type: "ecdsa")
        try server.authorize(unlocked)
        XCTAssertFalse(SSHAuthenticator.isEncryptedKey(unlocked))
        XCTAssertTrue(SSHAuthenticator.isEncryptedKey(locked))
        let publicHalf = await snapshotError(try source(server, served.path, identity: unlocked + ".pub"))
        assertOneLine(publicHalf, .authentication, contains: ["cannot use identity \(unlocked).pub for sftp://127.0.0.1:\(server.port): not a private key libssh2 can read (OpenSSH, PEM or PKCS#8; a .pub file is only the public half)"])
    }

    /// A server offering only algorithms libssh2 1.10 lacks (chacha20-poly1305, AES-GCM, -etm MACs, the sntrup761
    /// key exchange) is refused in one line that names each list it shares nothing of, what each side offers, and
    /// what to change; a server narrowed to exactly algorithms libssh2 offers works.
    func testNoAlgorithmInCommonNamesWhatEachSideOffers() async throws {
        let served = TemporaryDirectory("sftp-algorithms")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let modern = try SSHServer(extraConfig: ["Ciphers chacha20-poly1305@openssh.com,aes256-gcm@openssh.com,aes128-gcm@openssh.com"])
        let error = await snapshotError(try source(modern, served.path))
        XCTAssertEqual(error?.code, .protocolViolation)
        XCTAssertEqual(error?.message, "sftp://\(modern.user)@127.0.0.1:\(modern.port)\(served.path): the server offers no cipher that Folio's libssh2 1.10.0 can use (server: chacha20-poly1305@openssh.com, aes256-gcm@openssh.com, aes128-gcm@openssh.com; libssh2: aes128-ctr, aes192-ctr, aes256-ctr); in the server's sshd_config, add one of libssh2's ciphers to Ciphers")

        let etmOnly = try SSHServer(extraConfig: ["MACs hmac-sha2-256-etm@openssh.com,hmac-sha2-512-etm@openssh.com", "Ciphers aes256-ctr"])
        let etmError = await snapshotError(try source(etmOnly, served.path))
        XCTAssertEqual(etmError?.code, .protocolViolation)
        XCTAssertEqual(etmError?.message, "sftp://\(etmOnly.user)@127.0.0.1:\(etmOnly.port)\(served.path): the server offers no MAC that Folio's libssh2 1.10.0 can use (server: hmac-sha2-256-etm@openssh.com, hmac-sha2-512-etm@openssh.com; libssh2: hmac-sha2-256, hmac-sha2-512); in the server's sshd_config, add one of libssh2's MACs to MACs")

        let quantumSafe = try SSHServer(extraConfig: ["KexAlgorithms sntrup761x25519-sha512@openssh.com", "Ciphers aes256-gcm@openssh.com"])
        let kexError = await snapshotError(try source(quantumSafe, served.path))
        XCTAssertEqual(kexError?.code, .protocolViolation)
        XCTAssertEqual(kexError?.message, "sftp://\(quantumSafe.user)@127.0.0.1:\(quantumSafe.port)\(served.path): the server offers no key exchange that Folio's libssh2 1.10.0 can use (server: sntrup761x25519-sha512@openssh.com; libssh2: curve25519-sha256, curve25519-sha256@libssh.org, ecdh-sha2-nistp256, ecdh-sha2-nistp384, ecdh-sha2-nistp521, diffie-hellman-group-exchange-sha256, diffie-hellman-group16-sha512, diffie-hellman-group18-sha512, diffie-hellman-group14-sha256), and no cipher (server: aes256-gcm@openssh.com; libssh2: aes128-ctr, aes192-ctr, aes256-ctr); in the server's sshd_config, add one of libssh2's key exchanges to KexAlgorithms and add one of libssh2's ciphers to Ciphers")

        let narrowed = try SSHServer(extraConfig: ["KexAlgorithms curve25519-sha256", "HostKeyAlgorithms ssh-ed25519", "Ciphers aes128-ctr", "MACs hmac-sha2-512"])
        let snapshot = try await source(narrowed, served.path).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
    }

    /// A connection cut during the key exchange is said to be lost, not taken for a server with no algorithm in
    /// common (libssh2 reports both alike): the server's offer, read again on a connection of its own, shares
    /// an algorithm of every list.
    func testAConnectionLostDuringTheKeyExchangeIsNotCalledAMismatch() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-kex-cut")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        // The client's turns: its identification, its key exchange init, its key exchange reply (each waits for the
        // server's). libssh2 names the cut by where it fell (a failed exchange, its generic socket error, a failed
        // read); the line says what happened whichever it names.
        for turn in 2...3 {
            let proxy = try DelayProxy(forwardingTo: server.port, cutAtTurn: turn)
            defer { proxy.stop() }
            let error = await snapshotError(try source(server, served.path, through: proxy))
            XCTAssertEqual(error?.code, .unreachable, "cut at turn \(turn): \(error?.message ?? "no error")")
            let message = error?.message ?? ""
            XCTAssertTrue(message.hasPrefix("sftp://\(server.user)@127.0.0.1:\(proxy.port)\(served.path): lost the connection during the SSH key exchange (LIBSSH2_ERROR_"), message)
            XCTAssertTrue(message.hasSuffix("); check the network and the server, then run again"), message)
        }
    }

    /// (An unknown host name is not tested: resolving it would send a DNS query off this machine.)
    /// A connection lost during the log-in is said to be lost, never taken for the server refusing the key:
    /// libssh2 reports a drop while it waits for a log-in's answer as a refusal. Cut at each of the client's turns
    /// around the log-in in turn, through a proxy.
    func testAConnectionLostWhileLoggingInIsNotCalledARefusal() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-cut")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        var lostWhileLoggingIn = 0
        for turn in 2...8 {
            let proxy = try DelayProxy(forwardingTo: server.port, cutAtTurn: turn)
            defer { proxy.stop() }
            let message = await snapshotError(try source(server, served.path, through: proxy))?.message ?? ""
            XCTAssertFalse(message.contains("refused"), "cut at turn \(turn): \(message)")
            if message.contains("lost the connection to") && message.contains("while logging in; check the network and the server") {
                lostWhileLoggingIn += 1
            }
        }
        XCTAssertGreaterThan(lostWhileLoggingIn, 0, "no cut fell in the log-in")
    }

    func testUnreachableServer() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-down")
        server.stop()
        let error = await snapshotError(try source(server, served.path))
        assertOneLine(error, .unreachable, contains: ["cannot connect to 127.0.0.1 port \(server.port)", "Connection refused"])
    }

    /// A server that accepts the connection and then says nothing (stopped with SIGSTOP) fails the run after the
    /// timeout instead of hanging it.
    func testSilentServerTimesOut() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-silent")
        XCTAssertEqual(kill(server.pid, SIGSTOP), 0)
        defer { kill(server.pid, SIGCONT) }
        let error = await snapshotError(try source(server, served.path, timeout: 1))
        assertOneLine(error, .unreachable, contains: ["sftp://\(server.user)@127.0.0.1:\(server.port)", "handshake"])
    }

    /// More connections at once than sshd's MaxStartups (10): the handshake gate keeps every one of them alive.
    func testManySimultaneousConnectionsAllSucceed() throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-many")
        FixtureTree.write(served.path, "a.txt", "alpha\n", mtime: (1_600_000_000, 0))
        let source = try source(server, served.path)
        let entry = Entry(path: try RelativePath(validating: "a.txt"), kind: .file, size: 6, mtime: FileTime(seconds: 1_600_000_000))
        let scratch = TemporaryDirectory("sftp-many-out")
        let failures = Failures()
        DispatchQueue.concurrentPerform(iterations: 24) { index in
            do {
                let connection = try source.makeConnection()
                defer { connection.close() }
                let bytes = try SourceConformance.download(entry, with: connection, into: scratch.path("out\(index)"), from: 0)
                if bytes != Array("alpha\n".utf8) { failures.add("wrong content \(bytes)") }
            } catch {
                failures.add("\(error)")
            }
        }
        XCTAssertEqual(failures.all, [])
    }
}

/// Errors collected from several threads.
final class Failures: @unchecked Sendable {
    // Why @unchecked: `items` is only touched under `lock`.
    private let lock = NSLock()
    private var items: [String] = []
    func add(_ item: String) { lock.withLock { items.append(item) } }
    var all: [String] { lock.withLock { items } }
}
