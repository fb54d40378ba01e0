import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Listing: the exec and readdir paths agree, hostile names and links stay contained, unreadable folders block
/// removals without stopping the rest.
final class SFTPListingTests: SFTPTestCase {
    /// A tree with names that break naive listings, special files, and links inside and outside the root.
    private func makeTrickyTree(_ root: String) {
        FixtureTree.write(root, "a.txt", "alpha\n", mtime: (1_600_000_000, 123_456_789))
        FixtureTree.write(root, "folder/inner.txt", "inner\n", mtime: (1_600_000_001, 0))
        FixtureTree.write(root, "sp ace/#hash %25 100%.txt", "odd\n", mtime: (1_600_000_002, 0))
        FixtureTree.write(root, "unicode/\(ConformanceTree.nfc)", "nfc\n", mtime: (1_600_000_003, 0))
        FixtureTree.write(root, "unicode/\(ConformanceTree.nfd)", "nfd\n", mtime: (1_600_000_004, 0))
        FixtureTree.write(root, "bad\nname.txt", "newline\n", mtime: (1_600_000_005, 0))
        FixtureTree.write(root, "bad\ndir/hidden.txt", "below a bad name\n", mtime: (1_600_000_006, 0))
        FixtureTree.write(root, "after newline.txt", "still listed\n", mtime: (1_600_000_007, 0))
        FixtureTree.write(root, "skipme/x.txt", "excluded\n")
        XCTAssertEqual(mkfifo(root + "/fifo", 0o644), 0)
        FixtureTree.makeFolder(root, "links")
        for (name, target) in [
            ("to-file", "../a.txt"), ("to-folder", "../folder"), ("loop", ".."), ("passwd", "/etc/passwd"),
            ("etc", "/etc"), ("dangling", "nowhere"), ("escape", "../../.."),
        ] {
            XCTAssertEqual(symlink(target, root + "/links/" + name), 0)
        }
        // Two links that lead to each other's folder.
        FixtureTree.write(root, "cycle/a/x.txt", "x\n", mtime: (1_600_000_008, 0))
        FixtureTree.write(root, "cycle/b/y.txt", "y\n", mtime: (1_600_000_009, 0))
        XCTAssertEqual(symlink("../b", root + "/cycle/a/to-b"), 0)
        XCTAssertEqual(symlink("../a", root + "/cycle/b/to-a"), 0)
    }

    func testExecAndReaddirListingsAreEqual() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-tricky")
        makeTrickyTree(served.path)
        for policy in ListingOptions.SymlinkPolicy.allCases {
            let options = ListingOptions(symlinks: policy, exclude: ExcludeFilter(["skipme/"]))
            let byExec = try await source(server, served.path, method: .execOnly).snapshot(options: options)
            let byReaddir = try await source(server, served.path, method: .readdirOnly).snapshot(options: options)
            let bySessions = try await source(server, served.path, method: .sessionReaddirOnly).snapshot(options: options)
            XCTAssertEqual(summary(byExec), summary(byReaddir), "entries, symlinks = \(policy)")
            XCTAssertEqual(byExec.issues.map(\.description).sorted(), byReaddir.issues.map(\.description).sorted(), "issues, symlinks = \(policy)")
            XCTAssertEqual(summary(bySessions), summary(byReaddir), "entries over libssh2's SFTP, symlinks = \(policy)")
            XCTAssertEqual(bySessions.issues.map(\.description).sorted(), byReaddir.issues.map(\.description).sorted(), "issues over libssh2's SFTP, symlinks = \(policy)")
            XCTAssertTrue(byExec.entries.allSatisfy { $0.kind != .file || $0.path.description.hasPrefix("links/") || $0.path.description.contains("/to-") || $0.precision == .nanosecond },
                          "only what a followed link leads to has SFTP's whole seconds")
            XCTAssertEqual(byExec.entry(at: try RelativePath(validating: "a.txt"))?.mtime, FileTime(seconds: 1_600_000_000, nanoseconds: 123_456_789))

            let paths = byReaddir.entries.map(\.path.description)
            // A name with a newline is refused and reported; it corrupts nothing around it.
            XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "bad\\x0aname.txt", kind: .skipped("name contains a control character"))), "\(byReaddir.issues)")
            XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "bad\\x0adir", kind: .skipped("name contains a control character"))))
            XCTAssertFalse(paths.contains { $0.contains("hidden") || $0.contains("skipme") })
            XCTAssertTrue(paths.contains("after newline.txt"))
            XCTAssertTrue(paths.contains("sp ace/#hash %25 100%.txt"))
            XCTAssertTrue(paths.contains("unicode/\(ConformanceTree.nfc)") && paths.contains("unicode/\(ConformanceTree.nfd)"))
            XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "fifo", kind: .skipped("not a regular file, folder or link (FIFO, socket or device)"))))
            XCTAssertTrue(byReaddir.isComplete)

            switch policy {
            case .skip:
                XCTAssertFalse(paths.contains { $0.hasPrefix("links/") }, "\(paths)")
                XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "links/passwd", kind: .skipped("symbolic link (symlinks = \"skip\")"))))
            case .follow:
                let outside = ListingIssue.Kind.skipped("symbolic link leads outside the source root or nowhere")
                for name in ["passwd", "etc", "dangling", "escape"] {
                    XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "links/\(name)", kind: outside)), "links/\(name): \(byReaddir.issues)")
                    XCTAssertFalse(paths.contains { $0.hasPrefix("links/\(name)") })
                }
                XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "links/loop", kind: .skipped("symbolic link loop"))))
                XCTAssertEqual(byReaddir.entry(at: try RelativePath(validating: "links/to-file"))?.size, 6)
                XCTAssertEqual(byReaddir.entry(at: try RelativePath(validating: "links/to-folder"))?.kind, .folder)
                XCTAssertEqual(byReaddir.entry(at: try RelativePath(validating: "links/to-folder/inner.txt"))?.size, 6)
                // A link back to a folder the path already went through is a loop at once, as a local source
                // sees it: it was followed once more, and the other folder copied into itself.
                XCTAssertEqual(byReaddir.entry(at: try RelativePath(validating: "cycle/a/to-b/y.txt"))?.size, 2)
                XCTAssertTrue(byReaddir.issues.contains(ListingIssue(path: "cycle/a/to-b/to-a", kind: .skipped("symbolic link loop"))), "\(byReaddir.issues)")
                XCTAssertFalse(paths.contains { $0.hasPrefix("cycle/a/to-b/to-a/") || $0.hasPrefix("cycle/b/to-a/to-b/") }, "\(paths)")
            }
        }
    }

    /// A link that leads outside the root is never downloaded through, whatever the policy.
    /// A session going from folder to folder sends each folder's open with the readdir of the one before, and
    /// each folder's close with the end of the next one's names: two round trips a folder (its names, their end),
    /// not four. A folder listed without knowing the next costs three (its open carries the close before it).
    /// Counted as turns by a delay proxy in front of sshd; every request waited for alone costs one more.
    func testEachFolderCostsTwoRoundTripsWhenTheNextIsKnown() async throws {
        let server = try SSHServer()
        let proxy = try DelayProxy(forwardingTo: server.port)
        defer { proxy.stop() }
        let served = TemporaryDirectory("sftp-folder-turns")
        let folders = (0..<13).map { String(format: "folder %02d", $0) }
        for folder in folders {
            FixtureTree.write(served.path, "\(folder)/a.txt", "a\n")
            FixtureTree.write(served.path, "\(folder)/b.txt", "b\n")
        }
        let endpoint = try source(server, served.path, through: proxy).endpoint
        let remotes = try folders.map { endpoint.remotePath(try RelativePath(validating: $0)) }
        let (listed, alone, chained) = try await Self.onWorker { () -> ([[String]], Int, Int) in
            let session = try SSHSession.open(endpoint)
            defer { session.close() }
            func names(_ index: Int, next: Int? = nil) throws -> [String] {
                try session.listFolder(remotes[index], next: next.map { remotes[$0] }).map { String(decoding: $0.name, as: UTF8.self) }
                    .filter { $0 != "." && $0 != ".." }.sorted()
            }
            // The first folder also pays for starting SFTP; count from the second on.
            var listed = [try names(0)]
            var before = proxy.turns
            for index in 1...6 { listed.append(try names(index)) }
            let alone = proxy.turns - before
            before = proxy.turns
            for index in 7...12 { listed.append(try names(index, next: index < 12 ? index + 1 : nil)) }
            return (listed, alone, proxy.turns - before)
        }
        XCTAssertEqual(listed, Array(repeating: ["a.txt", "b.txt"], count: folders.count))
        XCTAssertEqual(alone, 3 * 6, "round trips for 6 folders listed one by one")
        // The last of the chain is opened by the one before it, and ends with the close of that one.
        XCTAssertEqual(chained, 3 + 2 * 5, "round trips for 6 folders listed each with the next")
    }

    /// A readdir listing over libssh2's SFTP (where the pipe cannot be used) of a wide level logs in the listing's
    /// parallelism of sessions (4) over a near link, and
    /// as many as may log in at once (8) over a far one (10 ms round trips), where each folder costs its turns.
    func testAFarLinkListsAWideLevelWithMoreSessions() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-wide")
        for index in 0..<12 { FixtureTree.write(served.path, String(format: "folder %02d/a.txt", index), "a\n") }
        for (delay, sessions) in [(0.0, 4), (0.005, 8)] {
            let proxy = try DelayProxy(forwardingTo: server.port, delay: delay)
            defer { proxy.stop() }
            var source = try source(server, served.path, through: proxy)
            source.listingMethod = .sessionReaddirOnly
            let snapshot = try await source.snapshot(options: ListingOptions())
            await source.finishRun()
            XCTAssertEqual(snapshot.entries.filter { $0.kind == .file }.count, 12, "files listed, delay \(delay) s")
            XCTAssertEqual(proxy.connections, sessions, "sessions, delay \(delay) s")
        }
    }

    /// A server that takes fewer connections than the listing would open (a cap on each user's connections) is
    /// listed in full by the sessions it took; the refused ones are not asked again on the next level.
    func testAServerCappingConnectionsIsListedByTheSessionsItTakes() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-capped")
        for index in 0..<12 {
            FixtureTree.write(served.path, String(format: "folder %02d/a.txt", index), "a\n")
            FixtureTree.write(served.path, String(format: "folder %02d/below/b.txt", index), "b\n")
        }
        let proxy = try DelayProxy(forwardingTo: server.port, mostConnections: 3)
        defer { proxy.stop() }
        var source = try source(server, served.path, through: proxy)
        source.listingMethod = .sessionReaddirOnly
        let snapshot = try await source.snapshot(options: ListingOptions())
        await source.finishRun()
        XCTAssertEqual(snapshot.entries.filter { $0.kind == .file }.count, 24)
        XCTAssertTrue(snapshot.isComplete)
        XCTAssertEqual(proxy.connections, 3)
    }

    /// A listing of an SFTP-only account leaves a memo saying so; the next listing, given it, goes straight to
    /// readdir (no exec tried, so fewer turns) and expects no tar, and lists the same tree. A week later it tries
    /// exec again.
    func testAnSFTPOnlyServerIsRememberedAndExecIsNotTriedAgainForAWeek() async throws {
        let server = try SSHServer(forceInternalSFTP: true)
        let served = TemporaryDirectory("sftp-memo")
        FixtureTree.write(served.path, "a.txt", "alpha\n", mtime: (1_600_000_000, 0))
        FixtureTree.write(served.path, "b.txt", "bravo\n", mtime: (1_600_000_001, 0))
        let today = ListingHints.today()
        func list(memo: String?) async throws -> (snapshot: Snapshot, turns: Int, tar: Bool) {
            // Why a delay: with none, an answer can come back between two requests written together, and on a
            // busy machine that counts one turn as two.
            let proxy = try DelayProxy(forwardingTo: server.port)
            defer { proxy.stop() }
            let source = try source(server, served.path, through: proxy)
            var options = ListingOptions()
            options.hints.memo = memo
            let snapshot = try await source.snapshot(options: options)
            await source.finishRun()
            return (snapshot, proxy.turns, source.tarBatchesAvailable)
        }
        let first = try await list(memo: nil)
        XCTAssertEqual(first.snapshot.memo, "no-commands=\(today)")
        XCTAssertFalse(first.tar)
        let second = try await list(memo: first.snapshot.memo)
        XCTAssertEqual(summary(second.snapshot), summary(first.snapshot))
        XCTAssertEqual(second.snapshot.memo, "no-commands=\(today)")
        XCTAssertFalse(second.tar)
        XCTAssertLessThan(second.turns, first.turns, "exec not tried")
        let weekOld = try await list(memo: "no-commands=\(today - ListingHints.answerDays)")
        XCTAssertEqual(weekOld.snapshot.memo, "no-commands=\(today)", "tried again")
        XCTAssertGreaterThan(weekOld.turns, second.turns, "exec tried")
    }

    /// Over the pipe, one session lists a tree level after level with many folders in flight: 60 folders in
    /// three levels through the delay proxy take a handful of turns after the log-in, where libssh2's calls take
    /// two a folder, and no other session logs in.
    func testThePipeListsManyFoldersInAFewRoundTripsOnOneSession() async throws {
        let server = try SSHServer(forceInternalSFTP: true)
        let served = TemporaryDirectory("sftp-pipe-walk")
        for top in 0..<4 {
            for middle in 0..<14 {
                FixtureTree.write(served.path, "top \(top)/middle \(middle)/leaf/a.txt", "a\n")
            }
        }
        var counted: [String: (turns: Int, connections: Int, files: Int)] = [:]
        for (label, method) in [("pipe", SFTPLister.Method.readdirOnly), ("sessions", .sessionReaddirOnly)] {
            let proxy = try DelayProxy(forwardingTo: server.port)
            defer { proxy.stop() }
            var source = try source(server, served.path, through: proxy)
            source.listingMethod = method
            let snapshot = try await source.snapshot(options: ListingOptions())
            await source.finishRun()
            counted[label] = (proxy.turns, proxy.connections, snapshot.entries.filter { $0.kind == .file }.count)
        }
        XCTAssertEqual(counted["pipe"]?.files, 56)
        XCTAssertEqual(counted["sessions"]?.files, 56)
        XCTAssertEqual(counted["pipe"]?.connections, 1)
        // The log-in, starting SFTP and resolving the root take about 15 turns; the pipe's start 3; then the root,
        // 4 top folders, 56 middle and 56 leaf folders: about two turns a level.
        XCTAssertLessThanOrEqual(counted["pipe"]?.turns ?? .max, 15 + 3 + 4 * 3, "turns over the pipe")
        XCTAssertLessThan(counted["pipe"]?.turns ?? .max, counted["sessions"]?.turns ?? 0)
    }

    /// A server whose readdir of one folder goes round in circles (here a relay in front of sftp-server answers
    /// the end of the folder `loop` with its names again) fails that folder alone, with a line saying so, over the
    /// pipe and over libssh2's sessions; the rest is listed. It grew Folio's memory until the kernel killed it.
    func testAFolderWhoseListingGoesRoundInCirclesFailsAlone() async throws {
        let scripts = TemporaryDirectory("sftp-loop")
        FixtureTree.write(scripts.path, "sftp", #"""
            #!/usr/bin/python3
            import struct, subprocess, sys, threading
            child = subprocess.Popen(["/usr/lib/openssh/sftp-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            opening, reading, looping, last = {}, {}, set(), {}
            def packets(stream):
                while True:
                    head = stream.read(4)
                    if len(head) < 4: return
                    yield head + stream.read(struct.unpack(">I", head)[0])
            def field(packet, at):
                length = struct.unpack(">I", packet[at:at + 4])[0]
                return packet[at + 4:at + 4 + length]
            def answers():
                for packet in packets(child.stdout):
                    kind, id = packet[4], packet[5:9]
                    if kind == 102 and opening.pop(id, False): looping.add(field(packet, 9))
                    handle = reading.pop(id, None)
                    if handle in looping:
                        if kind == 104: last[handle] = packet[9:]
                        elif kind == 101 and struct.unpack(">I", packet[9:13])[0] == 1 and handle in last:
                            body = bytes([104]) + id + last[handle]
                            packet = struct.pack(">I", len(body)) + body
                    sys.stdout.buffer.write(packet)
                    sys.stdout.buffer.flush()
            threading.Thread(target=answers, daemon=True).start()
            for packet in packets(sys.stdin.buffer):
                kind, id = packet[4], packet[5:9]
                if kind == 11: opening[id] = field(packet, 9).endswith(b"/loop")
                if kind == 12: reading[id] = field(packet, 9)
                child.stdin.write(packet)
                child.stdin.flush()

            """#)
        XCTAssertEqual(chmod(scripts.path("sftp"), 0o755), 0)
        let server = try SSHServer(sftpSubsystem: false, extraConfig: ["Subsystem sftp \(scripts.path("sftp"))"])
        defer { server.stop() }
        let served = TemporaryDirectory("sftp-loop-served")
        for index in 0..<50 { FixtureTree.write(served.path, "loop/file \(index)", "x") }
        FixtureTree.write(served.path, "other/a.txt", "a\n")
        for method in [SFTPLister.Method.readdirOnly, .sessionReaddirOnly] {
            let snapshot = try await source(server, served.path, method: method).snapshot(options: ListingOptions())
            XCTAssertEqual(snapshot.entries.map(\.path.description), ["loop", "other", "other/a.txt"], "\(method)")
            XCTAssertFalse(snapshot.isComplete)
            let line = try XCTUnwrap(snapshot.issues.map(\.description).first, "\(method)")
            XCTAssertTrue(line.hasPrefix("cannot list loop: the server listed \"file "), line)
            XCTAssertTrue(line.hasSuffix("\" twice in it, after 100000 names: its listing goes round in circles (a fault of the disk or share behind the server); check the folder on the server"), line)
            XCTAssertEqual(snapshot.issues.count, 1, "\(snapshot.issues)")
        }
    }

    /// When the pipe cannot be used (here the server's first SFTP channel, the pipe's, answers with bytes that are
    /// not SFTP), the root is resolved through libssh2's SFTP and the listing falls back to libssh2's readdir
    /// across sessions, and lists the whole tree. The channels are counted under a lock, as added sessions may
    /// start theirs at once.
    func testAListingFallsBackToLibssh2sReaddirWhenThePipeFails() async throws {
        let scripts = TemporaryDirectory("sftp-wrapper")
        let (server, count) = try serverWhoseFirstSFTPChannel(runs: "printf 'not SFTP at all'", scripts: scripts)
        let served = TemporaryDirectory("sftp-fallback")
        for index in 0..<6 { FixtureTree.write(served.path, "folder \(index)/below/a.txt", "a\n") }
        let source = try source(server, served.path, method: .readdirOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        await source.finishRun()
        XCTAssertEqual(snapshot.entries.filter { $0.kind == .file }.count, 6)
        XCTAssertTrue(snapshot.isComplete)
        let channels = Int(FixtureTree.read(count).map { String(decoding: $0, as: UTF8.self) }?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") ?? 0
        // Not more: an added session starts its channel only if the first leaves it a folder to list.
        XCTAssertGreaterThanOrEqual(channels, 2, "the pipe's channel, which failed, then libssh2's (the root, then readdir)")
    }

    /// A pipe that breaks in the middle of the listing is dropped with what it listed, and the whole tree is listed
    /// again through libssh2's readdir: every entry once, nothing lost, nothing twice. Here the server's first SFTP
    /// channel ends after 4,000 bytes of answers, in the middle of a packet, once the root and several folders came
    /// back over it, as when the server's sftp-server crashes.
    func testAPipeThatBreaksMidListingFallsBackAndListsTheWholeTree() async throws {
        let scripts = TemporaryDirectory("sftp-wrapper")
        let sent = scripts.path("sent"), answers = scripts.path("answers")
        // The channel ends once dd has passed on 4,000 bytes (one at a time: head would wait for all 4,000 before
        // writing any); the server dies at its next answer. stdin is kept on fd 3 for it, as a background command
        // gets /dev/null.
        let (server, _) = try serverWhoseFirstSFTPChannel(runs: """
            exec 3<&0
                mkfifo \(answers)
                /usr/lib/openssh/sftp-server <&3 2>/dev/null >\(answers) &
                dd bs=1 count=4000 status=none <\(answers) | tee \(sent)
            """, scripts: scripts)
        let served = TemporaryDirectory("sftp-broken-pipe")
        var expected: [String] = []
        for folder in 0..<20 {
            expected += ["folder \(folder)", "folder \(folder)/below"]
            for file in 0..<3 {
                FixtureTree.write(served.path, "folder \(folder)/below/file \(file) with a longer name.txt", "\(folder) \(file)\n")
                expected.append("folder \(folder)/below/file \(file) with a longer name.txt")
            }
        }
        let source = try source(server, served.path, method: .readdirOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        await source.finishRun()
        XCTAssertEqual(snapshot.entries.map(\.path.description).sorted(), expected.sorted())
        XCTAssertTrue(snapshot.isComplete)
        XCTAssertTrue(snapshot.issues.isEmpty, "\(snapshot.issues)")
        // The pipe was cut inside the listing, not before it: the root's two answers take about 150 bytes.
        XCTAssertEqual(FixtureTree.read(sent)?.count, 4000)
    }

    func testLinkToPasswdIsNotFollowed() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-links")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        XCTAssertEqual(symlink("/etc/passwd", served.path + "/passwd"), 0)
        XCTAssertEqual(symlink("/etc", served.path + "/etc"), 0)
        let snapshot = try await source(server, served.path).snapshot(options: ListingOptions(symlinks: .follow))
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertEqual(Set(snapshot.issues.map(\.path)), ["passwd", "etc"])
    }

    /// Logged in as an unprivileged user (root reads everything): a folder it cannot read is reported as
    /// unreadable (which blocks removals) and the rest of the tree is still listed, by either path.
    func testUnreadableFolderIsReportedAndTheRestListed() async throws {
        guard let server = try unprivilegedServer() else { return }
        let served = TemporaryDirectory("sftp-unreadable")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        FixtureTree.write(served.path, "open/b.txt", "bravo\n")
        FixtureTree.write(served.path, "secret/c.txt", "charlie\n")
        XCTAssertEqual(chmod(served.path + "/secret", 0), 0)
        for method in [SFTPLister.Method.automatic, .readdirOnly] {
            let snapshot = try await source(server, served.path, method: method).snapshot(options: ListingOptions())
            XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt", "open", "open/b.txt", "secret"], "\(method)")
            XCTAssertEqual(snapshot.issues, [ListingIssue(path: "secret", kind: .unreadable("permission denied on the server"))], "\(method)")
            XCTAssertFalse(snapshot.isComplete)
        }
        // find exits non-zero on the unreadable folder, so the exec path refuses to produce a partial listing.
        let error = await snapshotError(try source(server, served.path, method: .execOnly))
        XCTAssertEqual(error?.code, .protocolViolation)

        // An unreadable root is the run's error, not an empty tree.
        let rootError = await snapshotError(try source(server, served.path + "/secret"))
        XCTAssertEqual(rootError?.code, .permission, "\(String(describing: rootError))")
    }

    /// A root that does not exist, one the server may not reach (a folder on the way denies the user) and one it
    /// may not read are each the run's error in one line saying which, by either listing path. libssh2 1.10 takes
    /// a failed realpath's request id for its status: as a session's first request, the root's failed realpath
    /// came back as an empty path, whose stat called the unreachable root missing.
    func testAMissingOrUnreachableRootIsNamedByEitherPath() async throws {
        guard let server = try unprivilegedServer() else { return }
        let served = TemporaryDirectory("sftp-root-errors")
        FixtureTree.write(served.path, "closed/inner/a.txt", "alpha\n")
        FixtureTree.write(served.path, "plain.txt", "alpha\n")
        XCTAssertEqual(chmod(served.path("closed"), 0), 0)
        defer { chmod(served.path("closed"), 0o755) }
        // The root is resolved over the pipe (readdir), through libssh2's SFTP (readdir across sessions), or by
        // the exec listing.
        for method in [SFTPLister.Method.automatic, .readdirOnly, .sessionReaddirOnly] {
            let missing = await snapshotError(try source(server, served.path("gone"), method: method))
            XCTAssertEqual(missing?.code, .notFound, "\(method)")
            XCTAssertEqual(missing?.message, "\(server.url(served.path("gone"))) does not exist on the server; check the path", "\(method)")
            let denied = await snapshotError(try source(server, served.path("closed/inner"), method: method))
            XCTAssertEqual(denied?.code, .permission, "\(method)")
            XCTAssertEqual(denied?.message, "cannot read \(server.url(served.path("closed/inner"))): permission denied on the server; give folio-test read access there", "\(method)")
            let closed = await snapshotError(try source(server, served.path("closed"), method: method))
            XCTAssertEqual(closed?.code, .permission, "\(method)")
            XCTAssertEqual(closed?.message, "cannot read \(server.url(served.path("closed"))): permission denied on the server; give folio-test read access there", "\(method)")
            let file = await snapshotError(try source(server, served.path("plain.txt"), method: method))
            XCTAssertEqual(file?.code, .notFound, "\(method)")
            XCTAssertEqual(file?.message, "\(server.url(served.path("plain.txt"))) is not a folder on the server; give the folder to mirror", "\(method)")
        }
    }

    /// With `symlinks = follow`, a link inside the root that the server cannot resolve (permission denied on
    /// the way to its target) is unreadable, which blocks removals: what was mirrored through it is not trashed.
    /// A dangling link is still only skipped, and an excluded link blocks nothing. The target's folder is
    /// excluded, so that the link is the only way to it.
    func testALinkTheServerCannotResolveBlocksRemovals() async throws {
        guard let server = try unprivilegedServer() else { return }
        let served = TemporaryDirectory("sftp-link-denied")
        FixtureTree.write(served.path, "real/data/f.txt", "data\n")
        FixtureTree.makeFolder(served.path, "links")
        XCTAssertEqual(symlink("../real/data", served.path("links/to-data")), 0)
        XCTAssertEqual(symlink("nowhere", served.path("links/dangling")), 0)
        let options = ListingOptions(symlinks: .follow, exclude: ExcludeFilter(["real/"]))
        let readable = try await source(server, served.path, method: .readdirOnly).snapshot(options: options)
        XCTAssertEqual(readable.entries.map(\.path.description), ["links", "links/to-data", "links/to-data/f.txt"])

        XCTAssertEqual(chmod(served.path("real"), 0), 0)
        defer { chmod(served.path("real"), 0o755) }
        for method in [SFTPLister.Method.automatic, .readdirOnly] {
            let snapshot = try await source(server, served.path, method: method).snapshot(options: options)
            XCTAssertEqual(snapshot.entries.map(\.path.description), ["links"], "\(method)")
            XCTAssertEqual(snapshot.issues.sorted { $0.path < $1.path }, [
                ListingIssue(path: "links/dangling", kind: .skipped("symbolic link leads outside the source root or nowhere")),
                ListingIssue(path: "links/to-data", kind: .unreadable("cannot resolve the symbolic link: permission denied on the server")),
            ], "\(method)")
            XCTAssertFalse(snapshot.isComplete, "\(method)")
        }
        let excluded = ListingOptions(symlinks: .follow, exclude: ExcludeFilter(["real/", "links/to-data"]))
        let snapshot = try await source(server, served.path, method: .readdirOnly).snapshot(options: excluded)
        XCTAssertTrue(snapshot.isComplete, "\(snapshot.issues)")
    }

    /// A server that says nothing for longer than a keepalive interval but less than the timeout (a NAS whose
    /// disks spin up during `find`) is waited for: the listing succeeds. Here `find` sleeps 6.5 s before it
    /// starts, with an 8 s timeout; libssh2's own keepalive (every 5 s at that timeout) used to end the wait
    /// early with LIBSSH2_ERROR_TIMEOUT.
    func testAServerSilentForLessThanTheTimeoutIsWaitedFor() async throws {
        let (server, tools) = try server(running: "sleep 6.5\nexec /usr/bin/find \"$@\"\n", as: "find")
        defer { withExtendedLifetime(tools) {} }
        let served = TemporaryDirectory("sftp-slow")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let started = ContinuousClock.now
        let snapshot = try await source(server, served.path, method: .execOnly, timeout: 8).snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["a.txt"])
        XCTAssertGreaterThan(ContinuousClock.now - started, .seconds(6), "the listing went through the slow find")
    }

    /// A server that says nothing for longer than the timeout while it lists (a NAS stuck on a disk or a share)
    /// fails the listing with a line that says the server went silent, not that the connection was lost: the
    /// connection is up, and the place to look is the server.
    func testAServerSilentForLongerThanTheTimeoutIsSaidToBeSilent() async throws {
        let (server, tools) = try server(running: "sleep 8\n", as: "find")
        defer { withExtendedLifetime(tools) {} }
        let served = TemporaryDirectory("sftp-stuck")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let error = await snapshotError(try source(server, served.path, method: .execOnly, timeout: 2))
        XCTAssertEqual(error?.code, .unreachable)
        XCTAssertEqual(error?.message, "sftp://127.0.0.1:\(server.port) sent nothing for 2 s while listing sftp://\(server.user)@127.0.0.1:\(server.port)\(served.path); the server is stuck (on a slow disk or share?) or the link is down: check both, or raise timeout")
    }

    /// A file the server lists without a size is unreadable: taken as empty, a 10-byte file was installed empty
    /// and then "unchanged" on every run.
    func testAFileListedWithoutASizeIsUnreadable() throws {
        var listing = FolderListing()
        let path = try RelativePath(validating: "nosz.txt")
        XCTAssertEqual(EntryClassifier.admit(path, kind: .file, size: nil, mtime: FileTime(seconds: 1), precision: .second, options: ListingOptions(), into: &listing), .done)
        let snapshot = listing.found.finish()
        XCTAssertEqual(snapshot.entries.map(\.path), [])
        XCTAssertEqual(snapshot.issues.map(\.description), ["cannot mirror nosz.txt: the server gave no size for it"])
        XCTAssertFalse(snapshot.isComplete)
    }

    func testExecListingParserRefusesTruncatedOrMalformedOutput() {
        let body = "f\u{0}6\u{0}1600000000.1234567890\u{0}a.txt\u{0}d\u{0}4096\u{0}1600000001.0000000000\u{0}dir\u{0}folio-listing-end\u{0}"
        let good = Array("/srv/my tree\n\u{0}\(body)".utf8)
        let parsed = Self.parse(good)
        XCTAssertEqual(parsed.map { String(decoding: $0.realRoot, as: UTF8.self) }, "/srv/my tree")
        let records = parsed?.records
        XCTAssertEqual(records?.count, 2)
        XCTAssertEqual(records?.first?.mtime, FileTime(seconds: 1_600_000_000, nanoseconds: 123_456_789))
        XCTAssertEqual(records.map { $0.map(\.path) }, ["a.txt", "dir"])
        // The output arrives in reads of any size: a record or the root's line cut between two is read whole.
        for size in [1, 2, 3, 7, 16, 33] {
            XCTAssertEqual(Self.parse(good, readsOf: size)?.records.map(\.path), ["a.txt", "dir"], "reads of \(size) bytes")
        }
        XCTAssertNil(Self.parse(Array(good.prefix(good.count - 5))), "cut inside the end marker")
        XCTAssertNil(Self.parse(Array(good.prefix(30))), "cut inside a record")
        XCTAssertNil(Self.parse(Array(body.utf8)), "no root line")
        XCTAssertNil(Self.parse(Array("srv\n\u{0}\(body)".utf8)), "a root that is not absolute")
        XCTAssertNil(Self.parse(Array("/srv\n\u{0}f\u{0}six\u{0}1\u{0}a\u{0}folio-listing-end\u{0}".utf8)), "bad size")
        XCTAssertNil(Self.parse(Array("/srv\n\u{0}f\u{0}6\u{0}1\u{0}/etc/passwd\u{0}folio-listing-end\u{0}".utf8)), "absolute path")
        XCTAssertNil(Self.parse(Array("/srv\n\u{0}ff\u{0}6\u{0}1\u{0}a\u{0}folio-listing-end\u{0}".utf8)), "a type of two letters")
        XCTAssertNil(Self.parse(good + Array("f\u{0}".utf8)), "bytes after the end marker")
        XCTAssertNil(Self.parse(Array("/srv\n\u{0}f\u{0}6\u{0}1\u{0}".utf8) + [UInt8](repeating: 0x61, count: 100_000) + [0] + Array("folio-listing-end\u{0}".utf8), readsOf: 4_096),
                     "a record longer than any path")
        XCTAssertNil(Self.parse([]), "nothing at all (exec refused, or the root cannot be entered)")
        let farOff = Self.parse(Array("/srv\n\u{0}f\u{0}6\u{0}99999999999.5\u{0}a\u{0}f\u{0}6\u{0}-99999999999.5\u{0}b\u{0}folio-listing-end\u{0}".utf8))
        XCTAssertEqual(farOff?.records.map(\.mtime), [.latest, .earliest], "times past 2262 or before 1677 are held at the nearest end")
        let before1970 = Self.parse(Array("/srv\n\u{0}f\u{0}6\u{0}-31536000.5000000000\u{0}a\u{0}folio-listing-end\u{0}".utf8))
        XCTAssertEqual(before1970?.records.first?.mtime, FileTime(seconds: -31_536_000, nanoseconds: 500_000_000),
                       "find prints a timespec's two parts: half a second after -31536000, not before")
        var refusing = ExecListing.Parser()
        XCTAssertFalse(refusing.read(good) { $0.path.elementsEqual("dir".utf8) == false }, "a record the caller refuses ends the parse")

        // The listing stops reading at the end marker when tar waits after it. A file named like the marker,
        // listed last, ends the output the same way: the parser tells the two apart.
        let lookalike = Array("/srv\n\u{0}f\u{0}6\u{0}1\u{0}folio-listing-end\u{0}".utf8)
        var parser = ExecListing.Parser()
        XCTAssertTrue(parser.read(lookalike) { _ in true })
        XCTAssertFalse(parser.ended, "a file named like the marker is not the end")
        XCTAssertTrue(parser.read(Array("folio-listing-end\u{0}".utf8)) { $0.path.isEmpty })
        XCTAssertTrue(parser.ended)
        XCTAssertNil(Self.parse(lookalike), "a file named like the marker is not the end")
        XCTAssertEqual(Self.parse(lookalike + Array("folio-listing-end\u{0}".utf8))?.records.map(\.path), ["folio-listing-end"])
    }

    /// What the exec listing's parser makes of `output` read `size` bytes at a time: the root and each record (its
    /// path as text), or nil when it is not a whole, well-formed listing.
    private static func parse(_ output: [UInt8], readsOf size: Int = 256 << 10) -> (realRoot: [UInt8], records: [(path: String, mtime: FileTime)])? {
        var parser = ExecListing.Parser()
        var records: [(path: String, mtime: FileTime)] = []
        var start = 0
        while start < output.count {
            let end = min(output.count, start + size)
            guard parser.read(output[start..<end], { records.append((String(decoding: $0.path, as: UTF8.self), $0.mtime)); return true }) else { return nil }
            start = end
        }
        guard parser.ended, let root = parser.realRoot else { return nil }
        return (root, records)
    }

    /// A server that logs in the unprivileged user folio-test (root reads everything), or nil, failing the test,
    /// where scripts/install-deps.sh has not made that user.
    /// An sshd whose SFTP subsystem is a script: the first channel (the pipe's, on a first session) runs `first`
    /// (shell lines) and ends; every later one runs the real sftp-server. Returns the server and the file counting
    /// the channels, kept under `flock` as sessions may start theirs at once.
    private func serverWhoseFirstSFTPChannel(runs first: String, scripts: TemporaryDirectory) throws -> (SSHServer, count: String) {
        let count = scripts.path("count")
        FixtureTree.write(scripts.path, "count", "0\n")
        FixtureTree.write(scripts.path, "sftp", """
            #!/bin/sh
            exec 9>>\(count).lock
            flock 9
            n=$(cat \(count)); echo $((n + 1)) > \(count)
            exec 9>&-
            if [ "$n" = 0 ]; then
                \(first)
                exit 0
            fi
            exec /usr/lib/openssh/sftp-server

            """)
        XCTAssertEqual(chmod(scripts.path("sftp"), 0o755), 0)
        return (try SSHServer(sftpSubsystem: false, extraConfig: ["Subsystem sftp \(scripts.path("sftp"))"]), count)
    }

    private func unprivilegedServer(file: StaticString = #filePath, line: UInt = #line) throws -> SSHServer? {
        guard getpwnam("folio-test") != nil else {
            XCTFail("user folio-test is missing; run scripts/install-deps.sh as root", file: file, line: line)
            return nil
        }
        return try SSHServer(user: "folio-test")
    }
}
