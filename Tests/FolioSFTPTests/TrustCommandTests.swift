import FolioTestSupport
import Foundation
import XCTest

/// `folio trust` run as a user runs it.
final class TrustCommandTests: XCTestCase {
    /// Bad arguments get one line and exit 2, before any connection: a timeout too large for the socket's wait
    /// crashed (an Int32 overflow), usage errors added a second line naming the wrong command, and a password
    /// with a / in it was printed back.
    func testBadArgumentsGetOneLineAndNoSecret() throws {
        let tooLong = FolioBinary.run(["trust", "127.0.0.1:1", "--timeout", "2147484"])
        XCTAssertEqual(tooLong.status, 2, tooLong.stderr)
        XCTAssertEqual(tooLong.stderrLines, ["folio: --timeout must be a whole number from 1 to 3600, as in a configuration"])
        let password = FolioBinary.run(["trust", "sftp://user:S3cret/PW@127.0.0.1:1"])
        XCTAssertEqual(password.status, 2, password.stderr)
        XCTAssertEqual(password.stderrLines, ["folio: bad port in sftp://…@127.0.0.1:1; write host:port with a number from 1 to 65535"])
    }

    func testTrustAsksOnlyOnATerminalTakesYesThenMirrorWorks() throws {
        let server = try SSHServer()
        let work = TemporaryDirectory("sftp-trust-cli")
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let knownHosts = work.path("ssh/known_hosts")
        let url = "sftp://127.0.0.1:\(server.port)"

        let noTerminal = FolioBinary.run(["trust", url, "--known-hosts", knownHosts])
        XCTAssertEqual(noTerminal.status, 1, noTerminal.stderr)
        XCTAssertEqual(noTerminal.stderrLines.count, 1, noTerminal.stderr)
        XCTAssertTrue(noTerminal.stderr.hasPrefix("folio: ") && noTerminal.stderr.contains("--yes"), noTerminal.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: knownHosts))
        // Both streams into one pipe, as a terminal or a log shows them: the fingerprint comes before the advice
        // to compare it (standard output is buffered when piped, and came last).
        let together = FolioBinary.run(["trust", url, "--known-hosts", knownHosts], launcher: ["/bin/sh", "-c", #"exec "$0" "$@" 2>&1"#])
        XCTAssertEqual(together.stdoutLines.count, 2, together.stdout)
        XCTAssertTrue(together.stdoutLines.first?.hasPrefix("\(url) offers a ssh-ed25519 key with fingerprint ") == true, together.stdout)
        XCTAssertTrue(together.stdoutLines.last?.hasPrefix("folio: not trusting \(url)") == true, together.stdout)

        let yes = FolioBinary.run(["trust", url, "--known-hosts", knownHosts, "--yes"])
        XCTAssertEqual(yes.status, 0, yes.stderr)
        XCTAssertTrue(yes.stdout.contains(try server.hostKeyFingerprint()), yes.stdout)
        XCTAssertTrue(yes.stdout.contains("ssh-ed25519"), yes.stdout)
        // A bare host:port means SFTP, as `folio trust HOST` reads in the docs.
        let again = FolioBinary.run(["trust", "127.0.0.1:\(server.port)", "--known-hosts", knownHosts, "--yes"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("already trusted in \(knownHosts)"), again.stdout)
        XCTAssertEqual(try String(contentsOfFile: knownHosts, encoding: .utf8).split(separator: "\n").count, 1, "trusted once")

        let state = TemporaryDirectory("sftp-trust-state")
        let mirror = FolioBinary.run(["mirror", server.url(work.path("src")), work.path("dst"), "--identity", server.userKeyPath, "--known-hosts", knownHosts],
                                     environment: ["FOLIO_STATE_DIR": state.path, "SSH_AUTH_SOCK": ""])
        XCTAssertEqual(mirror.status, 0, mirror.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("alpha\n".utf8))

        // A changed key is never added next to the old one.
        server.stop()
        try server.replaceHostKey()
        try server.start()
        let changed = FolioBinary.run(["trust", url, "--known-hosts", knownHosts, "--yes"])
        XCTAssertEqual(changed.status, 1, changed.stderr)
        XCTAssertEqual(changed.stderrLines.count, 1, changed.stderr)
        XCTAssertTrue(changed.stderr.contains("different ssh-ed25519 key"), changed.stderr)
        XCTAssertEqual(try String(contentsOfFile: knownHosts, encoding: .utf8).split(separator: "\n").count, 1)
    }

    /// `folio trust` writes known_hosts readable by all (host keys are public; the daemon's user must read a file
    /// root trusted into), and a run that cannot read its known_hosts says so, where it used to call the host
    /// unknown and suggest `folio trust`, which changes nothing.
    func testAKnownHostsFileTheUserCannotReadIsNamed() throws {
        let server = try SSHServer()
        let work = TemporaryDirectory("sftp-trust-unreadable")
        chmod(work.path, 0o777)
        let knownHosts = work.path("ssh/known_hosts")
        let trusted = FolioBinary.run(["trust", "sftp://127.0.0.1:\(server.port)", "--known-hosts", knownHosts, "--yes"])
        XCTAssertEqual(trusted.status, 0, trusted.stderr)
        var info = stat()
        XCTAssertEqual(stat(knownHosts, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o644)

        // The folder trust made is root's own (0700), as ~/.ssh is: another user cannot reach the file in it.
        FixtureTree.makeFolder(work.path("state"), "")
        chmod(work.path("state"), 0o777)
        let mirror = FolioBinary.run(["mirror", server.url("/srv"), work.path("dst"), "--known-hosts", knownHosts],
                                     environment: ["FOLIO_STATE_DIR": work.path("state"), "SSH_AUTH_SOCK": ""], unprivileged: true)
        XCTAssertEqual(mirror.status, 1, mirror.stderr)
        XCTAssertEqual(mirror.stderrLines, ["mirror:\(work.path("dst")): failed: cannot read \(knownHosts) (Permission denied) to check the host key of sftp://127.0.0.1:\(server.port); make it readable by nobody"])
    }

    /// With nothing in known_hosts, `folio trust` shows and pins the server's ed25519 key (what `ssh` records and
    /// its help says to compare), not the ECDSA key libssh2 1.10 would ask for first; a mirror then connects.
    func testTrustPinsTheED25519KeyOfAServerThatAlsoHasECDSA() throws {
        let server = try SSHServer(ecdsaHostKey: true)
        let work = TemporaryDirectory("sftp-trust-ed25519")
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let knownHosts = work.path("known_hosts")
        let url = "sftp://127.0.0.1:\(server.port)"

        let trust = FolioBinary.run(["trust", url, "--known-hosts", knownHosts, "--yes"])
        XCTAssertEqual(trust.status, 0, trust.stderr)
        XCTAssertEqual(trust.stdout, "\(url) offers a ssh-ed25519 key with fingerprint \(try server.hostKeyFingerprint())\nadded \(url) to \(knownHosts)\n")
        XCTAssertEqual(try String(contentsOfFile: knownHosts, encoding: .utf8), try server.knownHostsLine() + "\n")

        let state = TemporaryDirectory("sftp-trust-ed25519-state")
        let mirror = FolioBinary.run(["mirror", server.url(work.path("src")), work.path("dst"), "--identity", server.userKeyPath, "--known-hosts", knownHosts],
                                     environment: ["FOLIO_STATE_DIR": state.path, "SSH_AUTH_SOCK": ""])
        XCTAssertEqual(mirror.status, 0, mirror.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("alpha\n".utf8))
    }

    func testTrustUsageErrorsExitTwo() throws {
        let outcome = FolioBinary.run(["trust", "https://example.invalid"])
        XCTAssertEqual(outcome.status, 2, outcome.stderr)
        XCTAssertTrue(outcome.stderr.contains("sftp://"), outcome.stderr)
    }
}
