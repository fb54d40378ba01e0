import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// The built `folio` binary mirroring from a real sshd, as a user runs it.
final class SFTPEndToEndTests: XCTestCase {
    var work: TemporaryDirectory!
    var environment: [String: String] = [:]

    override func setUp() {
        work = TemporaryDirectory("sftp-cli")
        FixtureTree.makeFolder(work.path, "state")
        // Why no SSH_AUTH_SOCK: a developer's agent must not make a refused-key test pass.
        environment = ["FOLIO_STATE_DIR": work.path("state"), "SSH_AUTH_SOCK": ""]
    }

    // See `TemporaryDirectory`: the folder goes now, not at the process's end.
    override func tearDown() { work = nil }

    private func mirror(_ server: SSHServer, _ source: String, identity: String? = nil, knownHosts: String? = nil, json: Bool = true, extra: [String] = []) -> [String] {
        ["mirror", server.url(source), work.path("dst"), "--identity", identity ?? server.userKeyPath,
         "--known-hosts", knownHosts ?? server.knownHostsPath] + (json ? ["--json"] : []) + extra
    }

    private func assertOneLine(_ outcome: FolioBinary.Outcome, contains parts: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(outcome.status, 1, outcome.stderr, file: file, line: line)
        XCTAssertEqual(outcome.stderrLines.count, 1, outcome.stderr, file: file, line: line)
        XCTAssertTrue(outcome.stderr.hasPrefix("mirror:\(work.path("dst")): failed: "), outcome.stderr, file: file, line: line)
        for part in parts { XCTAssertTrue(outcome.stderr.contains(part), "\"\(part)\" missing from: \(outcome.stderr)", file: file, line: line) }
    }

    /// Two small files (which tar batches) and one of 300 KiB (past the batches: SFTP alone) in `src`.
    private func writeSmallFilesAndALargeOne() {
        FixtureTree.write(work.path("src"), "a #1.txt", "alpha\n", mtime: (1_600_000_000, 123))
        FixtureTree.write(work.path("src"), "a/notes.txt", "bravo\n", mtime: (1_600_000_001, 0))
        FixtureTree.write(work.path("src"), "z.bin", FixtureTree.bytes(count: 300 << 10, seed: 5), mtime: (1_600_000_002, 0))
        FixtureTree.write(work.path("src"), "empty.dat", "", mtime: (1_600_000_003, 0))
    }

    /// ProFTPD's mod_sftp capping the user at one connection (`MaxClientsPerUser 1`, as shared hosts do) lets the
    /// download workers' sessions log in, then drops them as their SFTP begins. The files those sessions took are
    /// left to the session the server keeps, and the mirror is exact, exit 0: each such file failed with "the
    /// server offers no SFTP subsystem", exit 3, one file fetched per run.
    func testAServerThatDropsSessionsPastItsCapGetsEveryFileThroughTheOneItKeeps() throws {
        let server = try ProFTPDServer(maxClientsPerUser: 1)
        for index in 0..<6 {
            FixtureTree.write(server.home, "m/big\(index).bin", FixtureTree.bytes(count: 400 << 10, seed: UInt64(index)), mtime: (1_600_000_000 + index, 0))
        }
        for index in 0..<10 { FixtureTree.write(server.home, "m/s\(index).txt", "small \(index)\n", mtime: (1_600_000_100, 0)) }
        _ = try LoopbackServer.run("chmod", ["-R", "a+rX", server.home])
        let outcome = FolioBinary.run(["mirror", server.url("m"), work.path("dst"), "--identity", server.userKeyPath, "--known-hosts", server.knownHostsPath,
                                       "--transfers", "4"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr + outcome.stdout)
        XCTAssertEqual(outcome.stderr, "")
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(server.home + "/m"))
        for index in 0..<6 { XCTAssertEqual(FixtureTree.read(work.path("dst/big\(index).bin")), FixtureTree.bytes(count: 400 << 10, seed: UInt64(index))) }
        let log = (try? String(contentsOfFile: server.logPath, encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains("Maximum connections for host/user reached"), "the cap was never met, so this tested nothing: \(log)")
    }

    /// Mirrors `writeSmallFilesAndALargeOne`'s tree from a server whose SFTP cannot be used, and checks that the
    /// small files came over exec (tar), exact, and that the large one failed alone (exit 3, never half a file).
    /// Returns the large file's message.
    private func mirrorWhereOnlyTheLargeFileFails(_ server: SSHServer, file: StaticString = #filePath, line: UInt = #line) -> String {
        let outcome = FolioBinary.run(mirror(server, work.path("src"), extra: ["--timeout", "60"]), environment: environment)
        XCTAssertEqual(outcome.status, 3, "some files failed\n\(outcome.stdout)\n\(outcome.stderr)", file: file, line: line)
        for path in ["a #1.txt", "a/notes.txt", "empty.dat"] {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), path, file: file, line: line)
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + path)), FixtureTree.mtime(work.path("src/" + path)), path, file: file, line: line)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/z.bin")), "never half a file", file: file, line: line)
        let failed = outcome.events.filter { $0["event"] as? String == "file-failed" }
        XCTAssertEqual(failed.map { $0["path"] as? String }, ["z.bin"], outcome.stdout, file: file, line: line)
        return failed.first?["message"] as? String ?? ""
    }

    func testMirrorIsExactAndANoChangeRerunFetchesNothing() throws {
        let server = try SSHServer()
        ConformanceTree.create(at: work.path("src"))
        let first = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")))
        for path in FixtureTree.listing(work.path("src")) where !path.hasSuffix("/") {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), path)
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + path)), FixtureTree.mtime(work.path("src/" + path)), "mtime of \(path), to the nanosecond")
        }
        let again = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(again.events.last?["downloaded"] as? Int, 0, again.stdout)
    }

    /// `--bwlimit` holds the run's downloads together to the rate, over the tar batch and SFTP alike, and the files
    /// arrive exact. A lower bound on the time only (see `HTTPMirrorCLITests`): noise cannot make it fail.
    func testABandwidthLimitHoldsTheRunToItsRate() throws {
        let server = try SSHServer()
        writeSmallFilesAndALargeOne()
        let started = ContinuousClock.now
        let outcome = FolioBinary.run(mirror(server, work.path("src"), extra: ["--bwlimit", "100"]), environment: environment)
        let took = ContinuousClock.now - started
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        for path in ["a #1.txt", "a/notes.txt", "z.bin"] {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), path)
        }
        XCTAssertGreaterThanOrEqual(took, .milliseconds(2_500), "300 KiB at 100 KiB/s take 3 s")
    }

    /// 300 small files (600 KB) come in one tar batch from the tar the listing's command left waiting: one login
    /// and one command in all; byte- and nanosecond-exact; an edit comes too.
    func testSmallFilesComeInBatchesAndTheMirrorIsExact() throws {
        let server = try SSHServer()
        for index in 0..<300 {
            FixtureTree.write(work.path("src"), "folder \(index % 3)/file #\(index) 100%.txt", FixtureTree.bytes(count: 100 + index * 13, seed: UInt64(index)),
                              mtime: (1_600_000_000 + index, index * 1_000 + 7))
        }
        let first = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(first.events.last?["downloaded"] as? Int, 300, first.stdout)
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Starting session: command").count - 1, 1, "one command: the listing, whose tar then sent the batch")
        XCTAssertEqual(log.components(separatedBy: "Accepted publickey").count - 1, 1, "the listing's session fetched the files")
        XCTAssertFalse(log.contains("subsystem request for sftp"), "find and tar did it all: the SFTP channel was never started\n\(log)")
        XCTAssertFalse(log.contains("dispatch_protocol_error"), "no keepalive before log-in, which sshd logs as a protocol error\n\(log)")
        FixtureTree.write(work.path("src"), "folder 1/file #1 100%.txt", "edited", mtime: (1_700_000_000, 0))
        let second = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")))
        for path in FixtureTree.listing(work.path("src")) where !path.hasSuffix("/") {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), path)
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + path)), FixtureTree.mtime(work.path("src/" + path)), path)
        }
    }

    /// An SFTP-only account (`ForceCommand internal-sftp`): no find, no tar. The 200 small files come in one batch
    /// over the listing's session, many requests in flight (`SFTPBatchFetch`), so no other worker logs in; the
    /// mirror is exact, to the second (SFTP's precision).
    func testAnSFTPOnlyServerSendsTheSmallFilesInOneBatch() throws {
        let server = try SSHServer(forceInternalSFTP: true)
        for index in 0..<200 {
            FixtureTree.write(work.path("src"), "file #\(index) 100%.txt", FixtureTree.bytes(count: 100 + index * 13, seed: UInt64(index)),
                              mtime: (1_600_000_000 + index, 0))
        }
        let outcome = FolioBinary.run(mirror(server, work.path("src"), extra: ["--transfers", "4"]), environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(outcome.events.last?["downloaded"] as? Int, 200, outcome.stdout)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")))
        for path in FixtureTree.listing(work.path("src")) {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), path)
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + path)), FixtureTree.mtime(work.path("src/" + path)), path)
        }
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Accepted publickey").count - 1, 1, log)
    }

    /// A bare shell account, without the SFTP subsystem: the listing and the small files come over exec (find,
    /// tar) and are exact; the one large file, which needs SFTP, fails on its own with the fix in its message.
    func testServerWithoutSFTPSubsystemMirrorsSmallFilesAndNamesTheFixForLargeOnes() throws {
        let server = try SSHServer(sftpSubsystem: false)
        writeSmallFilesAndALargeOne()
        let message = mirrorWhereOnlyTheLargeFileFails(server)
        XCTAssertTrue(message.contains("the server offers no SFTP subsystem; enable \"Subsystem sftp internal-sftp\" in its sshd_config"), message)
    }

    /// A shell account whose SFTP subsystem names a program the server does not have (an sshd_config copied from
    /// another distribution): the small files come over exec (tar), and the large one fails with what ended the
    /// subsystem and where to fix it. libssh2 alone waited out its whole timeout for the subsystem's answer (30 s
    /// a session), then called it a lost connection; the timeout is 60 s here, so that such a wait would show as
    /// a wrong message, and the retry (one more session) would not wait again.
    func testASubsystemWhoseProgramIsMissingFailsTheLargeFileWithTheFix() throws {
        let server = try SSHServer(sftpSubsystem: false, extraConfig: ["Subsystem sftp \(work.path("no/such/sftp-server"))"])
        writeSmallFilesAndALargeOne()
        XCTAssertEqual(mirrorWhereOnlyTheLargeFileFails(server), "opening \(server.url(work.path("src/z.bin"))) failed: the server's SFTP subsystem ended before it answered: its program was not found (exit status 127); fix the \"Subsystem sftp\" line (or a ForceCommand) in the server's sshd_config: \"Subsystem sftp internal-sftp\" needs no program")
    }

    /// An account whose every command and subsystem is a program that is not an SFTP server (here `ForceCommand
    /// /bin/true`): the run fails at once with one line, where libssh2 alone waited out the timeout.
    func testAnAccountWhoseSubsystemEndsAtOnceFailsTheRunWithOneLine() throws {
        let server = try SSHServer(extraConfig: ["ForceCommand /bin/true"])
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let outcome = FolioBinary.run(mirror(server, work.path("src"), json: false, extra: ["--timeout", "60"]), environment: environment)
        assertOneLine(outcome, contains: ["opening \(server.url(work.path("src"))) failed: the server's SFTP subsystem ended before it answered (exit status 0); fix the \"Subsystem sftp\" line (or a ForceCommand) in the server's sshd_config"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/a.txt")))
    }

    /// A subsystem that prints a line before SFTP (as a shell start-up file that greets does: OpenSSH's sftp then
    /// says "Received message too long"): the line names the text and where it comes from. On a shell account the
    /// small files still come over exec (tar) and the large one fails with that line; where every command is that
    /// program, the run fails with it.
    func testASubsystemThatPrintsTextFirstIsNamedWithTheText() throws {
        let script = work.path("greeting-sftp-server")
        FixtureTree.write(work.path, "greeting-sftp-server", "#!/bin/sh\necho 'Welcome to the NAS'\nexec /usr/lib/openssh/sftp-server\n")
        XCTAssertEqual(chmod(script, 0o755), 0)
        let why = "the server's SFTP subsystem sent text before SFTP (\"Welcome to the NAS\"): a shell start-up file of the account (such as ~/.bashrc) prints it; make it print nothing when the session is not interactive (ssh HOST true must print nothing)"
        writeSmallFilesAndALargeOne()

        let shell = try SSHServer(sftpSubsystem: false, extraConfig: ["Subsystem sftp \(script)"])
        XCTAssertEqual(mirrorWhereOnlyTheLargeFileFails(shell), "opening \(shell.url(work.path("src/z.bin"))) failed: \(why)")

        try? FileManager.default.removeItem(atPath: work.path("dst"))
        let sftpOnly = try SSHServer(extraConfig: ["ForceCommand \(script)"])
        let refused = FolioBinary.run(mirror(sftpOnly, work.path("src"), json: false, extra: ["--timeout", "60"]), environment: environment)
        assertOneLine(refused, contains: ["opening \(sftpOnly.url(work.path("src"))) failed: \(why)"])

        // An account whose shell is nologin gets its line in place of the external sftp-server's SFTP: the fix is
        // internal-sftp, not a start-up file.
        let nologin = work.path("nologin-shell")
        FixtureTree.write(work.path, "nologin-shell", "#!/bin/sh\necho 'This account is currently not available.'\nexit 1\n")
        XCTAssertEqual(chmod(nologin, 0o755), 0)
        try? FileManager.default.removeItem(atPath: work.path("dst"))
        let noShell = try SSHServer(extraConfig: ["ForceCommand \(nologin)"])
        let told = FolioBinary.run(mirror(noShell, work.path("src"), json: false, extra: ["--timeout", "60"]), environment: environment)
        assertOneLine(told, contains: ["the server's SFTP subsystem sent text before SFTP (\"This account is currently not available.\"): the account's shell is nologin, through which sshd starts an external sftp-server; set \"Subsystem sftp internal-sftp\" in the server's sshd_config (it needs no shell), or give the account a shell"])
    }

    /// A known-hosts flag naming a folder says so, where it called the host unknown and advised `folio trust` into
    /// that folder; one written `--known-hosts=~/…` (which no shell expands) is below the home folder, not in a
    /// folder named `~` in the working folder.
    func testAKnownHostsFlagThatIsAFolderOrStartsWithATildeIsReadAsMeant() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let folder = FolioBinary.run(mirror(server, work.path("src"), knownHosts: work.path(""), json: false), environment: environment)
        assertOneLine(folder, contains: ["known-hosts \(work.path("")) is a folder, not a known_hosts file; give the file's path"])
        let name = "folio-test-known-hosts-\(UUID().uuidString.prefix(8))"
        let tilde = FolioBinary.run(["mirror", server.url(work.path("src")), work.path("dst"), "--identity", server.userKeyPath, "--known-hosts=~/\(name)"],
                                    environment: environment, currentDirectory: work.path(""))
        assertOneLine(tilde, contains: ["is not in \(String(cString: getpwuid(geteuid())!.pointee.pw_dir))/\(name), which does not exist yet)"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("~")))
    }

    /// A private key other users can read is used, with a warning every run naming the chmod that fixes it
    /// (OpenSSH refuses such a key); it was used without a word.
    func testAnIdentityOthersCanReadIsWarnedAbout() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let key = work.path("open_key")
        XCTAssertTrue(FileManager.default.createFile(atPath: key, contents: FileManager.default.contents(atPath: server.userKeyPath)))
        XCTAssertEqual(chmod(key, 0o644), 0)
        // So is a password file, which holds a secret too (unused here: the key logs in).
        FixtureTree.write(work.path(""), "password", "unused\n")
        XCTAssertEqual(chmod(work.path("password"), 0o644), 0)
        let outcome = FolioBinary.run(mirror(server, work.path("src"), identity: key, json: false) + ["--password-file", work.path("password")], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(Array(outcome.stdoutLines.prefix(2)), [
            "mirror:\(work.path("dst")): \(server.url(work.path("src"))): identity \(key) can be read by other users (mode 644), which ssh refuses for a private key; chmod 600 \(key)",
            "mirror:\(work.path("dst")): \(server.url(work.path("src"))): password-file \(work.path("password")) can be read by other users (mode 644), and it holds a secret; chmod 600 \(work.path("password"))",
        ])
    }

    /// A file dated past 2262 (more than `FileTime` holds) is mirrored at the first run: its SFTP time was
    /// compared with the listing's kept one, and it "changed on the server while it was being copied".
    func testAFileDatedPast2262IsMirroredAtTheFirstRun() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "far.bin", FixtureTree.bytes(count: 300 << 10, seed: 9), mtime: (13_569_465_600, 0))
        let outcome = FolioBinary.run(mirror(server, work.path("src"), json: false), environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/far.bin")), FixtureTree.bytes(count: 300 << 10, seed: 9))
    }

    /// `sftp://host` with no path is the account's home folder, as scp and rsync read it, and `sftp://host/` the
    /// server's root: taken for the root, a path left out copied the server's whole filesystem.
    func testNoPathIsTheHomeFolder() throws {
        for (url, root, shown) in [("sftp://ann@127.0.0.1:2222", ".", "sftp://ann@127.0.0.1:2222/~"),
                                   ("sftp://ann@127.0.0.1:2222/", "/", "sftp://ann@127.0.0.1:2222/"),
                                   ("sftp://ann@127.0.0.1:2222/~/x", "x", "sftp://ann@127.0.0.1:2222/~/x")] {
            let source = try SFTPSource(location: SourceLocation(parsing: url), settings: SourceSettings(), timeout: 5, transfers: 1)
            XCTAssertEqual(source.endpoint.rootPath, root, url)
            XCTAssertEqual(source.endpoint.url(), shown, url)
        }
    }

    /// `sftp://host/~/path` is below the account's home folder, on a shell account (find, tar, and SFTP for the
    /// large file) and on an SFTP-only one; a message names the path as written.
    func testATildePathIsBelowTheHomeFolder() throws {
        let home = String(cString: getpwuid(geteuid())!.pointee.pw_dir)
        let name = "folio-test-home-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: home + "/" + name) }
        FixtureTree.write(home, name + "/a.txt", "alpha\n", mtime: (1_600_000_000, 0))
        FixtureTree.write(home, name + "/b/notes.txt", "bravo\n", mtime: (1_600_000_001, 0))
        FixtureTree.write(home, name + "/z.bin", FixtureTree.bytes(count: 300 << 10, seed: 5), mtime: (1_600_000_002, 0))
        for (label, server) in [("shell", try SSHServer()), ("SFTP only", try SSHServer(forceInternalSFTP: true))] {
            try? FileManager.default.removeItem(atPath: work.path("dst"))
            try? FileManager.default.removeItem(atPath: work.path("state"))
            FixtureTree.makeFolder(work.path, "state")
            let url = "sftp://\(server.user)@127.0.0.1:\(server.port)/~/\(name)"
            let outcome = FolioBinary.run(["mirror", url, work.path("dst"), "--identity", server.userKeyPath, "--known-hosts", server.knownHostsPath],
                                          environment: environment)
            XCTAssertEqual(outcome.status, 0, "\(label)\n\(outcome.stdout)\n\(outcome.stderr)")
            XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(home + "/" + name), label)
            for path in ["a.txt", "b/notes.txt", "z.bin"] {
                XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(home + "/" + name + "/" + path), "\(label): \(path)")
                XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + path)), FixtureTree.mtime(home + "/" + name + "/" + path), "\(label): \(path)")
            }
            let missing = FolioBinary.run(["mirror", url + "-gone", work.path("dst"), "--identity", server.userKeyPath, "--known-hosts", server.knownHostsPath],
                                          environment: environment)
            XCTAssertEqual(missing.stderr, "mirror:\(work.path("dst")): failed: \(url)-gone does not exist on the server; check the path\n", label)
        }
    }

    /// A server that allows one channel per connection (`MaxSessions 1`) refused the SFTP channel of a large file
    /// while the session held the listing's waiting tar or the pipe, which read as "the server offers no SFTP
    /// subsystem". Those are now given up for it: small and large files arrive exact, on a shell account and on an
    /// SFTP-only one.
    func testAServerAllowingOneChannelPerConnectionStillGetsEveryFile() throws {
        // Whole seconds: SFTP version 3, all an SFTP-only account offers, carries no more.
        FixtureTree.write(work.path("src"), "a #1.txt", "alpha\n", mtime: (1_600_000_000, 0))
        for index in 0..<40 { FixtureTree.write(work.path("src"), "small/\(index).txt", "small \(index)\n", mtime: (1_600_000_001, 0)) }
        for index in 0..<3 {
            FixtureTree.write(work.path("src"), "large \(index).bin", FixtureTree.bytes(count: 600 << 10, seed: UInt64(index)), mtime: (1_600_000_002, 0))
        }
        for (label, server) in [("shell", try SSHServer(extraConfig: ["MaxSessions 1"])),
                                ("SFTP only", try SSHServer(forceInternalSFTP: true, extraConfig: ["MaxSessions 1"]))] {
            try? FileManager.default.removeItem(atPath: work.path("dst"))
            let outcome = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
            XCTAssertEqual(outcome.status, 0, "\(label)\n\(outcome.stdout)\n\(outcome.stderr)")
            XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")), label)
            for path in FixtureTree.listing(work.path("src")) where !path.hasSuffix("/") {
                XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), "\(label): \(path)")
                XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + path)), FixtureTree.mtime(work.path("src/" + path)), "\(label): \(path)")
            }
        }
    }

    /// Ctrl-C while the server is silent in the middle of the listing (its `find` never writes, as a NAS whose
    /// disks do not spin up) stops the run at once: the listing's socket is shut down, and the run ends
    /// "interrupted", where it used to wait out `--timeout` and fail. Without an SFTP subsystem there is no other
    /// listing path to fall back on.
    func testCtrlCDuringASilentListingStopsTheRun() throws {
        let tools = TemporaryDirectory("tools-silent-find")
        let started = tools.path("find-started")
        FixtureTree.write(tools.path, "find", "#!/bin/sh\ntouch '\(started)'\nexec sleep 25\n")
        XCTAssertEqual(chmod(tools.path("find"), 0o755), 0)
        let server = try SSHServer(sftpSubsystem: false, commandPath: "\(tools.path):/usr/bin:/bin")
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let running = FolioBinary.start(mirror(server, work.path("src"), extra: ["--timeout", "20"]), environment: environment)
        let deadline = Date().addingTimeInterval(15)
        while !FileManager.default.fileExists(atPath: started), Date() < deadline { usleep(20_000) }
        XCTAssertTrue(FileManager.default.fileExists(atPath: started), "the listing reached find")
        kill(running.process.processIdentifier, SIGINT)
        let output = String(decoding: running.standardOutputPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationStatus, 1)
        let done = output.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(done.contains("\"event\":\"target-done\"") && done.contains("\"result\":\"interrupted\""), done)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")), "nothing left behind")
    }

    /// A subsystem slower to answer than the first wait (here it sleeps 4 s, past the 3 s Folio first gives
    /// libssh2) is not taken for one that ended: Folio's own channel finds it answering, libssh2 goes on waiting
    /// for its answer, and the large file comes over it, exact.
    func testASlowSubsystemStillServesTheLargeFile() throws {
        let script = work.path("slow-sftp-server")
        FixtureTree.write(work.path, "slow-sftp-server", "#!/bin/sh\nsleep 4\nexec /usr/lib/openssh/sftp-server\n")
        XCTAssertEqual(chmod(script, 0o755), 0)
        let server = try SSHServer(sftpSubsystem: false, extraConfig: ["Subsystem sftp \(script)"])
        FixtureTree.write(work.path("src"), "z.bin", FixtureTree.bytes(count: 300 << 10, seed: 5), mtime: (1_600_000_002, 0))
        let outcome = FolioBinary.run(mirror(server, work.path("src"), extra: ["--timeout", "60"]), environment: environment)
        XCTAssertEqual(outcome.status, 0, "\(outcome.stdout)\n\(outcome.stderr)")
        XCTAssertEqual(FixtureTree.read(work.path("dst/z.bin")), FixtureTree.read(work.path("src/z.bin")))
        XCTAssertEqual(FixtureTree.mtime(work.path("dst/z.bin")), FixtureTree.mtime(work.path("src/z.bin")))
    }

    /// Files dated before 1970 (scanned photos, archives restored with their dates). SFTP version 3 carries a time
    /// in 32 bits without a sign, so sshd sends 1969 as 2106. Once, where the listing (find) read the true time, the
    /// check after each SFTP download took that difference for a change on the server: such a file failed on every
    /// run and was never mirrored.
    func testFilesDatedBefore1970AreMirroredAndStayUnchanged() throws {
        let old = (seconds: -31_536_000, nanoseconds: 500_000_000)  // 1969-01-01, and half a second
        for (label, server) in [("shell", try SSHServer()), ("SFTP only", try SSHServer(forceInternalSFTP: true))] {
            try? FileManager.default.removeItem(atPath: work.path("dst"))
            try? FileManager.default.removeItem(atPath: work.path("src"))
            try? FileManager.default.removeItem(atPath: work.path("state"))
            FixtureTree.makeFolder(work.path, "state")
            FixtureTree.write(work.path("src"), "old.txt", "small and old\n", mtime: old)
            FixtureTree.write(work.path("src"), "old.bin", FixtureTree.bytes(count: 300 << 10, seed: 7), mtime: old)
            FixtureTree.write(work.path("src"), "new.txt", "new\n", mtime: (1_700_000_000, 0))
            let first = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
            XCTAssertEqual(first.status, 0, "\(label)\n\(first.stdout)\n\(first.stderr)")
            for path in ["old.txt", "old.bin", "new.txt"] {
                XCTAssertTrue(FixtureTree.read(work.path("dst/" + path)) == FixtureTree.read(work.path("src/" + path)), "\(label): \(path) differs or is missing")
            }
            // The shell's listing reads the true time; a readdir listing gets what SFTP version 3 can carry, as
            // OpenSSH's own sftp client does: 2106.
            let expected = label == "shell" ? Int64(old.seconds) * 1_000_000_000 + Int64(old.nanoseconds) : (Int64(old.seconds) + (1 << 32)) * 1_000_000_000
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/old.bin")), expected, label)
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/old.txt")), expected, label)
            let again = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
            XCTAssertEqual(again.status, 0, "\(label)\n\(again.stderr)")
            XCTAssertEqual(again.events.last?["result"] as? String, "unchanged", "\(label)\n\(again.stdout)")
            server.stop()
        }
    }

    func testUnknownHostExitsOneWithTheTrustCommandThenTrustedWorks() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let knownHosts = work.path("known_hosts")
        let refused = FolioBinary.run(mirror(server, work.path("src"), knownHosts: knownHosts, json: false), environment: environment)
        assertOneLine(refused, contains: ["folio trust sftp://127.0.0.1:\(server.port)", "ssh-ed25519", try server.hostKeyFingerprint()])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/a.txt")))

        let (key, _) = try HostKeyTrust.fetch(host: server.host, port: server.port, knownHostsPath: knownHosts, timeoutSeconds: 10)
        try HostKeyTrust.append(key, to: knownHosts)
        let trusted = FolioBinary.run(mirror(server, work.path("src"), knownHosts: knownHosts), environment: environment)
        XCTAssertEqual(trusted.status, 0, trusted.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("alpha\n".utf8))
    }

    func testWrongKeyExitsOneInOneLine() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let outcome = FolioBinary.run(mirror(server, work.path("src"), identity: try server.makeUnauthorizedKey(), json: false), environment: environment)
        assertOneLine(outcome, contains: ["sftp://127.0.0.1:\(server.port)", "refused to log in"])
    }

    /// The SSH log-in starts while the state database opens, before the destination's lock is taken. A run that
    /// then finds the lock held ends that log-in before it waits, so it holds no connection to the server for as
    /// long as the other run lasts; once the lock is its own it logs in again, and mirrors.
    func testARunWaitingForTheLockHoldsNoConnectionToTheServerMeanwhile() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n", mtime: (1_600_000_000, 0))
        FixtureTree.makeFolder(work.path("dst"), ".folio")
        let held = open(work.path("dst/.folio/lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        XCTAssertGreaterThanOrEqual(held, 0)
        XCTAssertEqual(flock(held, LOCK_EX), 0)
        var holding = true
        defer { if holding { close(held) } }

        let running = FolioBinary.start(mirror(server, work.path("src"), json: false), environment: environment)
        var said = Data()
        let errors = running.standardErrorPipe.fileHandleForReading
        errors.read(into: &said, until: "waiting")
        XCTAssertTrue(String(decoding: said, as: UTF8.self).contains("\(work.path("dst")) is being synced by another folio process; waiting"),
                      String(decoding: said, as: UTF8.self))
        // Time for a log-in that was left running to finish: none may be open while the run waits.
        usleep(500_000)
        XCTAssertEqual(OpenConnections.count(toPort: server.port), 0, "a connection to the server stayed open while the run waited")

        close(held)
        holding = false
        said.append(errors.readDataToEndOfFile())
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationStatus, 0, String(decoding: said, as: UTF8.self))
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("alpha\n".utf8))
        XCTAssertEqual(FixtureTree.mtime(work.path("dst/a.txt")), 1_600_000_000 * 1_000_000_000)
    }

    /// A target left with `--no-wait` because its lock is held ends the log-in it started ahead: no connection to
    /// its server stays open while the next target runs.
    func testABusyTargetLeftWithNoWaitHoldsNoConnectionWhileTheNextTargetRuns() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        FixtureTree.write(work.path("slow"), "big.bin", FixtureTree.bytes(count: 300 << 10, seed: 3))
        FixtureTree.write(work.path, "folio.toml", """
            [[target]]
            name = "remote"
            source = "\(server.url(work.path("src")))"
            destination = "\(work.path("dst"))"
            identity = "\(server.userKeyPath)"
            known-hosts = "\(server.knownHostsPath)"

            [[target]]
            name = "local"
            source = "\(work.path("slow"))"
            destination = "\(work.path("slow-copy"))"
            bandwidth-limit = "100K"
            """)
        FixtureTree.makeFolder(work.path("dst"), ".folio")
        let held = open(work.path("dst/.folio/lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        XCTAssertEqual(flock(held, LOCK_EX), 0)
        defer { close(held) }

        let running = FolioBinary.start(["sync", "--now", "--no-wait", "--config", work.path("folio.toml"), "remote", "local"], environment: environment)
        let deadline = Date().addingTimeInterval(30)
        while !FileManager.default.fileExists(atPath: work.path("slow-copy/.folio/lock")), running.process.isRunning, Date() < deadline { usleep(20_000) }
        // 300 KiB at 100 KiB/s: about 3 s of the second target, watched throughout.
        var looks = 0
        while running.process.isRunning, Date() < deadline {
            XCTAssertEqual(OpenConnections.count(toPort: server.port), 0, "a connection to the busy target's server stayed open")
            looks += 1
            usleep(100_000)
        }
        let errors = String(decoding: running.standardErrorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        running.process.waitUntilExit()
        XCTAssertGreaterThan(looks, 5, "the second target ran too briefly to be watched")
        XCTAssertEqual(running.process.terminationStatus, 1, errors)
        XCTAssertTrue(errors.contains("remote: failed: ") && errors.contains("is being synced by another folio process"), errors)
        XCTAssertEqual(FixtureTree.read(work.path("slow-copy/big.bin")), FixtureTree.bytes(count: 300 << 10, seed: 3))
    }

    /// A state directory that cannot be made fails an SFTP run in its one line and exit 1, as before its log-in
    /// started while the database opened (that log-in is ended before the line).
    func testAStateDirectoryThatCannotBeMadeFailsAnSFTPRunInOneLine() throws {
        let server = try SSHServer()
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        FixtureTree.write(work.path, "file", "not a folder")
        environment["FOLIO_STATE_DIR"] = work.path("file/state")
        let outcome = FolioBinary.run(mirror(server, work.path("src"), json: false), environment: environment)
        XCTAssertEqual(outcome.status, 1, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, ["folio: cannot create the state directory \(work.path("file/state")): Not a directory; set state-dir or FOLIO_STATE_DIR to a writable folder"])
        XCTAssertEqual(outcome.stdout, "")
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")), "nothing made")
    }

    func testSSHDKilledMidTransferThenRerunResumesThePartialFile() throws {
        let server = try SSHServer()
        let big = FixtureTree.bytes(count: 96 << 20, seed: 5)
        FixtureTree.write(work.path("src"), "big.bin", big, mtime: (1_600_000_000, 0))
        for i in 0..<20 { FixtureTree.write(work.path("src"), "small/\(i).txt", "small \(i)\n") }
        let running = FolioBinary.start(mirror(server, work.path("src"), extra: ["--transfers", "1"]), environment: environment)
        // Wait until the big file's partial copy holds a few MiB, then kill sshd and its sessions by PID.
        var partialSize: Int64 = 0
        for _ in 0..<20_000 where partialSize < 4 << 20 && running.process.isRunning {
            usleep(1_000)
            partialSize = largestFile(under: work.path("dst/.folio/partial"))
        }
        XCTAssertGreaterThanOrEqual(partialSize, 4 << 20, "never saw the partial file grow")
        server.stop(signal: SIGKILL)
        let stderr = String(decoding: running.standardErrorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        _ = running.standardOutputPipe.fileHandleForReading.readDataToEndOfFile()
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationStatus, 1, stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/big.bin")), "a half file was installed")
        for path in FixtureTree.listing(work.path("dst")) where !path.hasSuffix("/") {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), "\(path) is complete or absent")
        }

        try server.start()
        let rerun = FolioBinary.run(mirror(server, work.path("src")), environment: environment)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")))
        XCTAssertEqual(FixtureTree.read(work.path("dst/big.bin")), big)
        let bytes = try XCTUnwrap(rerun.events.last?["bytes"] as? Int, rerun.stdout)
        XCTAssertLessThan(bytes, big.count, "the rerun resumed the partial file instead of fetching it whole")
    }

    private func largestFile(under folder: String) -> Int64 {
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return 0 }
        var largest: Int64 = 0
        while let name = walker.nextObject() as? String {
            var info = stat()
            if stat(folder + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG { largest = max(largest, Int64(info.st_size)) }
        }
        return largest
    }
}
