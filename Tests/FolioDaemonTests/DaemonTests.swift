import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// `folio daemon` as systemd runs it: the built binary, a temp state directory, a temp config with 1 s intervals,
/// local sources. Outcomes only (files, exit codes, log lines, notify datagrams, hook input), with generous
/// deadlines and no timing assertions.
final class DaemonTests: XCTestCase {
    private var scratch: TemporaryDirectory!
    private var children: [DaemonProcess] = []

    override func setUp() {
        scratch = TemporaryDirectory("folio-daemon")
        FixtureTree.makeFolder(scratch.path, "state")
    }

    override func tearDown() {
        for child in children { child.stop() }
        children = []
        scratch = nil
    }

    private var stateDirectory: String { scratch.path("state") }
    private var configPath: String { scratch.path("folio.toml") }
    private var environment: [String: String] { ["FOLIO_STATE_DIR": stateDirectory] }

    /// An automatic `[[target]]` table from `src-NAME` (a local folder unless `source` says otherwise) into `dst-NAME`.
    private func target(_ name: String, source: String? = nil, interval: String = "1s", extra: String = "") -> String {
        """
        [[target]]
        name = "\(name)"
        source = "\(source ?? scratch.path("src-" + name))"
        destination = "\(scratch.path("dst-" + name))"
        mode = "automatic"
        interval = "\(interval)"
        \(extra)

        """
    }

    /// An automatic target mirrored from `server` over SFTP (`src-NAME` into `dst-NAME`), with the server's key and,
    /// unless given, its known_hosts.
    private func sftpTarget(_ name: String, from server: SSHServer, interval: String = "1s", knownHosts: String? = nil, extra: String = "") -> String {
        target(name, source: server.url(scratch.path("src-" + name)), interval: interval,
               extra: "identity = \"\(server.userKeyPath)\"\nknown-hosts = \"\(knownHosts ?? server.knownHostsPath)\"\n\(extra)")
    }

    private func writeConfig(_ text: String) {
        _ = FileManager.default.createFile(atPath: configPath, contents: Data(("log-level = \"info\"\n" + text).utf8))
    }

    private func startDaemon(log: String = "daemon.log", environment extra: [String: String] = [:]) throws -> DaemonProcess {
        let daemon = try DaemonProcess(["daemon", "--config", configPath], environment: environment.merging(extra) { $1 }, logPath: scratch.path(log))
        children.append(daemon)
        return daemon
    }

    private func folio(_ arguments: [String], log: String) throws -> (status: Int32, output: String) {
        try DaemonProcess.runToEnd(arguments + ["--config", configPath], environment: environment, logPath: scratch.path(log))
    }

    private func text(_ path: String) -> String? { FixtureTree.read(path).map { String(decoding: $0, as: UTF8.self) } }

    private func lines(_ log: String, containing needle: String) -> [String] {
        log.split(separator: "\n").map(String.init).filter { $0.contains(needle) }
    }

    /// SIGTERM, then the daemon must be gone within 10 s with exit status 0.
    private func terminate(_ daemon: DaemonProcess, file: StaticString = #filePath, line: UInt = #line) {
        daemon.signal(SIGTERM)
        let status = daemon.waitForExit(seconds: 10)
        XCTAssertEqual(status, 0, "exit status after SIGTERM (nil: still running after 10 s); log:\n\(daemon.log)", file: file, line: line)
    }

    // MARK: tests

    func testSyncsOnScheduleSkipsUnchangedRunsAndFollowsSourceChanges() throws {
        let src = scratch.path("src-docs"), dst = scratch.path("dst-docs")
        FixtureTree.write(src, "a.txt", "first")
        FixtureTree.write(src, "sub/b.txt", "second")
        // A lock file left by a process that died (no flock held): the daemon takes it over.
        FixtureTree.write(dst, ".folio/lock", "999999 1700000000 docs\n")
        writeConfig(target("docs"))
        let daemon = try startDaemon()

        eventually(20, "first sync") { text(dst + "/a.txt") == "first" && text(dst + "/sub/b.txt") == "second" }
        eventually(20, "two unchanged runs logged") { lines(daemon.log, containing: "docs: unchanged, checked in").count >= 2 }
        // An unchanged run is one line; only the run with work logged a start.
        XCTAssertEqual(lines(daemon.log, containing: "docs: run started (trigger: automatic)").count, 1, daemon.log)
        for line in lines(daemon.log, containing: "docs:") {
            XCTAssertTrue(line.contains("run started") || line.contains("unchanged, checked in") || line.contains("2 added"), "unexpected line: \(line)")
        }

        // `folio status` sees the daemon's schedule.
        let status = try folio(["status"], log: "status.log")
        XCTAssertEqual(status.status, 0, status.output)
        XCTAssertTrue(status.output.contains("docs: "), status.output)
        XCTAssertTrue(status.output.contains("  next run: "), status.output)
        let json = try folio(["status", "--json"], log: "status-json.log")
        XCTAssertTrue(json.output.contains("\"next_run_at\":\""), json.output)

        // A change on the source appears within an interval or so (generous deadline).
        FixtureTree.write(src, "a.txt", "first, edited")
        FixtureTree.write(src, "c.txt", "third")
        try FileManager.default.removeItem(atPath: src + "/sub/b.txt")
        eventually(20, "the change mirrored") {
            text(dst + "/a.txt") == "first, edited" && text(dst + "/c.txt") == "third" && !FileManager.default.fileExists(atPath: dst + "/sub/b.txt")
        }
        XCTAssertEqual(FixtureTree.listing(dst), ["a.txt", "c.txt", "sub/"])
        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("folio daemon stopped"), daemon.log)

        // With the daemon gone, status shows no schedule.
        let after = try folio(["status"], log: "status-after.log")
        XCTAssertFalse(after.output.contains("next run:"), after.output)
    }

    /// The same schedule against a real sshd: the daemon mirrors an SFTP target, skips it while unchanged and
    /// follows a change on the server.
    func testSyncsAnSFTPTargetOnSchedule() throws {
        let server = try SSHServer()
        let src = scratch.path("src-remote"), dst = scratch.path("dst-remote")
        FixtureTree.write(src, "photos/one.jpg", "jpeg one")
        FixtureTree.write(src, "two.txt", "two")
        writeConfig(sftpTarget("remote", from: server))
        let daemon = try startDaemon()
        eventually(30, "first sync over SFTP") { text(dst + "/photos/one.jpg") == "jpeg one" && text(dst + "/two.txt") == "two" }
        eventually(30, "an unchanged run") { lines(daemon.log, containing: "remote: unchanged, checked in").count >= 1 }
        FixtureTree.write(src, "two.txt", "two, edited on the server", mtime: (1_800_000_000, 0))
        eventually(30, "the change mirrored") { text(dst + "/two.txt") == "two, edited on the server" }
        XCTAssertEqual(FixtureTree.listing(dst), ["photos/", "photos/one.jpg", "two.txt"])
        terminate(daemon)
    }

    func testNotifyMessagesArriveOnARealSocket() throws {
        let src = scratch.path("src-docs")
        FixtureTree.write(src, "a.txt", "first")
        writeConfig(target("docs"))
        let socket = NotifySocket(path: scratch.path("notify.sock"))
        defer { socket.close() }
        let daemon = try startDaemon(environment: ["NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "400000"])

        eventually(20, "READY=1, STATUS= and two WATCHDOG=1") {
            socket.lines.contains("READY=1") && socket.lines.filter { $0 == "WATCHDOG=1" }.count >= 2
        }
        let statuses = socket.lines.filter { $0.hasPrefix("STATUS=") }
        XCTAssertFalse(statuses.isEmpty, "\(socket.messages)")
        for status in statuses {
            XCTAssertTrue(status.hasPrefix("STATUS=idle") || status.hasPrefix("STATUS=syncing docs"), status)
        }
        XCTAssertTrue(statuses.contains { $0.contains("next: docs ") }, "\(statuses)")
        XCTAssertEqual(socket.lines.first, "READY=1", "READY=1 comes first: after the configuration is loaded")
        terminate(daemon)
        eventually(5, "STOPPING=1") { socket.lines.contains("STOPPING=1") }
    }

    func testTheDaemonGrowsItsDescriptorTableBeforeItStartsThreads() throws {
        // A child starts with a table sized by its parent's highest open descriptor, rounded up to a power of
        // two: below 256 here, the daemon would reach 1,024 slots only by opening 512 descriptors itself.
        let highest = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { Int($0) }.max() ?? 0
        XCTAssertLessThan(highest, 256, "this test process holds a descriptor too high for the check to mean anything")
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        writeConfig(target("docs"))
        let daemon = try startDaemon()
        eventually(20, "the first run") { text(scratch.path("dst-docs/a.txt")) == "first" }
        let status = FileHandle(forReadingAtPath: "/proc/\(daemon.pid)/status").map { String(decoding: $0.readDataToEndOfFile(), as: UTF8.self) } ?? ""
        let slots = status.split(separator: "\n").first { $0.hasPrefix("FDSize:") }.flatMap { Int($0.dropFirst(7).trimmingCharacters(in: .whitespaces)) }
        XCTAssertGreaterThanOrEqual(slots ?? 0, 1024, "descriptor slots of the daemon (FDSize in /proc/PID/status)")
        terminate(daemon)
    }

    func testNotifyWorksOnAnAbstractSocket() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        writeConfig(target("docs"))
        let socket = NotifySocket(path: "folio-test-\(getpid())-\(UUID().uuidString.prefix(8))", abstract: true)
        defer { socket.close() }
        let daemon = try startDaemon(environment: ["NOTIFY_SOCKET": socket.address])
        eventually(20, "READY=1 on the abstract socket") { socket.lines.contains("READY=1") }
        // No WATCHDOG_USEC: no watchdog messages.
        terminate(daemon)
        eventually(5, "STOPPING=1") { socket.lines.contains("STOPPING=1") }
        XCTAssertFalse(socket.lines.contains("WATCHDOG=1"), "\(socket.messages)")
    }

    /// A source with a sparse 1 GiB file: long enough to copy that a run is mid-download when the test acts.
    private func makeBigSource() -> Int64 {
        let src = scratch.path("src-docs")
        FixtureTree.write(src, "small.txt", "small")
        let size: Int64 = 1 << 30
        let fd = open(src + "/big.bin", O_WRONLY | O_CREAT, 0o644)
        XCTAssertEqual(ftruncate(fd, off_t(size)), 0)
        close(fd)
        return size
    }

    /// Bytes in the destination's partial files (in `.folio/partial/<shard>/`).
    private func partialBytes() -> Int64 {
        let partials = scratch.path("dst-docs/.folio/partial")
        let shards = (try? FileManager.default.contentsOfDirectory(atPath: partials)) ?? []
        return shards.reduce(0) { total, shard in
            let names = (try? FileManager.default.contentsOfDirectory(atPath: partials + "/" + shard)) ?? []
            return total + names.reduce(0) { sum, name in
                var info = stat()
                return sum + (stat(partials + "/" + shard + "/" + name, &info) == 0 ? Int64(info.st_size) : 0)
            }
        }
    }

    private func fileSize(_ path: String) -> Int64? {
        var info = stat()
        return stat(path, &info) == 0 ? Int64(info.st_size) : nil
    }

    func testManualRunDuringADaemonRunRespectsTheLockAndStatusShowsTheRun() throws {
        let size = makeBigSource()
        let dst = scratch.path("dst-docs")
        writeConfig(target("docs"))
        let socket = NotifySocket(path: scratch.path("notify.sock"))
        defer { socket.close() }
        // A short watchdog makes the heartbeat (and so STATUS=) tick every 100 ms.
        let daemon = try startDaemon(environment: ["NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "400000"])
        eventually(30, "the daemon mid-download, saying so in STATUS=") {
            partialBytes() > 0 && socket.lines.contains { $0.hasPrefix("STATUS=syncing docs: ") && $0.contains("/2 files, ") }
        }
        // Freeze it while it holds the target's lock: what follows cannot race with the end of its run.
        daemon.signal(SIGSTOP)
        defer { daemon.signal(SIGCONT) }

        let status = try folio(["status"], log: "status.log")
        XCTAssertTrue(status.output.contains("docs: running since "), status.output)
        XCTAssertTrue(status.output.contains("  running now (pid \(daemon.pid))"), status.output)
        let json = try folio(["status", "--json"], log: "status-json.log")
        XCTAssertTrue(json.output.contains("\"running\":true"), json.output)

        // --no-wait: exit 1 at once, naming the daemon.
        let manual = try folio(["sync", "--now", "--no-wait", "docs"], log: "manual.log")
        XCTAssertEqual(manual.status, 1, manual.output)
        XCTAssertTrue(manual.output.contains("target docs is being synced by pid \(daemon.pid) (started "), manual.output)
        XCTAssertTrue(manual.output.contains(" into \(dst); try again once it ends, or leave out --no-wait to wait for it"), manual.output)
        // Giving up on a busy folder is not a run: status still shows the daemon's.
        let after = try folio(["status"], log: "status-after.log")
        XCTAssertTrue(after.output.contains("docs: running since "), after.output)

        // Without --no-wait: it waits for the daemon's run, then runs, resuming the partial file.
        let waiting = try DaemonProcess(["sync", "--now", "docs", "--config", configPath], environment: environment, logPath: scratch.path("waiting.log"))
        children.append(waiting)
        eventually(20, "the manual run waiting") { waiting.log.contains("target docs is being synced by pid \(daemon.pid)") && waiting.log.contains("waiting") }
        XCTAssertNil(waiting.waitForExit(seconds: 1), "it waits while the daemon holds the lock")

        // The same folder by another name (`folio mirror` into it, spelt with a trailing slash), from a process
        // with a state directory of its own (mirror reads no config), shares the lock.
        let other = try DaemonProcess.runToEnd(["mirror", "--no-wait", scratch.path("src-docs"), dst + "/"],
                                               environment: ["FOLIO_STATE_DIR": scratch.path("other-state")], logPath: scratch.path("other.log"))
        XCTAssertEqual(other.status, 1, other.output)
        XCTAssertTrue(other.output.contains("target docs is being synced by pid \(daemon.pid) (started "), other.output)
        XCTAssertTrue(other.output.contains(" into \(dst)"), other.output)

        // With --json, the wait is a notice about this target, as docs/json-events.md says.
        let jsonWaiting = try DaemonProcess(["sync", "--now", "docs", "--json", "--config", configPath], environment: environment, logPath: scratch.path("json-waiting.log"))
        children.append(jsonWaiting)
        eventually(20, "a JSON run waiting") { jsonWaiting.log.contains("waiting") }
        let notice = jsonWaiting.log.split(separator: "\n").first { $0.contains("waiting") }.map(String.init) ?? ""
        XCTAssertTrue(notice.hasPrefix(#"{"event":"notice","message":"target docs is being synced by pid \#(daemon.pid) (started "#), notice)
        XCTAssertTrue(notice.hasSuffix(#"; waiting (use --no-wait to give up instead)","target":"docs"}"#), notice)
        jsonWaiting.signal(SIGTERM)
        XCTAssertEqual(jsonWaiting.waitForExit(seconds: 10), 1, jsonWaiting.log)
        // Stopped while it waited, it never started: a target-done alone, whose seconds count the wait.
        let lines = jsonWaiting.log.split(separator: "\n")
        XCTAssertFalse(lines.contains { $0.contains(#""event":"target-start""#) }, jsonWaiting.log)
        let done = lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] } ?? [:]
        XCTAssertEqual(done["event"] as? String, "target-done", jsonWaiting.log)
        XCTAssertEqual(done["result"] as? String, "interrupted", jsonWaiting.log)
        XCTAssertEqual(done["error"] as? String, "stopped while waiting for the other run", jsonWaiting.log)
        XCTAssertGreaterThan(done["seconds"] as? Double ?? 0, 0, jsonWaiting.log)

        // SIGTERM ends a wait for the lock (a systemd stop must not hang until the other run ends).
        let stopping = try DaemonProcess(["sync", "--now", "docs", "--config", configPath], environment: environment, logPath: scratch.path("stopping.log"))
        children.append(stopping)
        eventually(20, "a second manual run waiting") { stopping.log.contains("waiting") }
        stopping.signal(SIGTERM)
        XCTAssertEqual(stopping.waitForExit(seconds: 10), 1, stopping.log)
        XCTAssertTrue(stopping.log.contains("docs: stopped while waiting for the other run; nothing was started"), stopping.log)

        daemon.signal(SIGCONT)
        terminate(daemon)
        XCTAssertEqual(waiting.waitForExit(seconds: 120), 0, waiting.log)
        XCTAssertEqual(fileSize(dst + "/big.bin"), size)
        XCTAssertTrue(waiting.log.contains("docs: 2 added, ") || waiting.log.contains("docs: 1 added, "), waiting.log)
        XCTAssertFalse(waiting.log.contains(" 1.0 GiB in "), "the manual run resumed the daemon's partial file: \(waiting.log)")
    }

    func testSIGTERMMidDownloadExitsCleanlyAndTheNextDaemonRunResumes() throws {
        let size = makeBigSource()
        let dst = scratch.path("dst-docs")
        writeConfig(target("docs"))
        let daemon = try startDaemon()
        // Why a quarter of the file: stopped earlier, the rest would still print as "1.0 GiB" below.
        eventually(30, "the download under way") { partialBytes() > size / 4 }

        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("docs: interrupted after "), daemon.log)
        XCTAssertGreaterThan(partialBytes(), 0, "the partial file stays for resume")
        XCTAssertNil(fileSize(dst + "/big.bin"), "never half a file under its final name")
        let interrupted = try folio(["status", "--json"], log: "status.log")
        XCTAssertTrue(interrupted.output.contains("\"result\":\"interrupted\""), interrupted.output)
        XCTAssertTrue(interrupted.output.contains("\"running\":false"), interrupted.output)
        // A file cut off by the stop is not done yet, not failed: neither the summary nor status says "failed".
        XCTAssertFalse(daemon.log.contains("failed, retried next run"), daemon.log)
        XCTAssertTrue(interrupted.output.contains("\"failed\":0"), interrupted.output)

        // The next daemon resumes: the file completes, and its run copied less than the whole file.
        let next = try startDaemon(log: "daemon2.log")
        eventually(120, "the big file complete") { fileSize(dst + "/big.bin") == size }
        eventually(20, "the run's summary") { lines(next.log, containing: "docs: ").contains { $0.contains(" added, ") } }
        terminate(next)
        let resumed = lines(next.log, containing: "docs: ").first { $0.contains(" added, ") }
        XCTAssertFalse(resumed?.contains(" 1.0 GiB in ") ?? true, "the resumed run copied only the rest: \(resumed ?? "")")
    }

    /// SIGTERM while the SFTP server has stopped answering in the middle of a file (its sessions frozen with
    /// SIGSTOP, as a NAS gone from the network) ends the run cleanly, "interrupted", with the partial file kept:
    /// the stalled transfer is cut after a short grace. It used to wait in libssh2's read for `timeout`, so the
    /// daemon's stop limit ended the process instead, and the run was left for the next start to close.
    func testSIGTERMWhileTheServerStallsADownloadEndsTheRunCleanly() throws {
        let server = try SSHServer()
        defer {
            server.signalSessions(SIGCONT)
            server.stop()
        }
        _ = makeBigSource()
        writeConfig(sftpTarget("docs", from: server, extra: "timeout = 60\ntransfers = 1"))
        let daemon = try startDaemon()
        eventually(60, "the download under way") { partialBytes() > 8 << 20 }
        server.signalSessions(SIGSTOP)
        // Past what the socket buffers still held: the read now waits on the frozen server.
        usleep(500_000)

        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("docs: interrupted after "), daemon.log)
        XCTAssertFalse(daemon.log.contains("did not end within"), daemon.log)
        XCTAssertFalse(daemon.log.contains("failed, retried next run"), daemon.log)
        XCTAssertGreaterThan(partialBytes(), 8 << 20, "the partial file stays for resume")
        XCTAssertNil(fileSize(scratch.path("dst-docs/big.bin")), "never half a file under its final name")
    }

    func testSIGTERMBeforeTheDownloadsRecordsTheRunAsInterruptedNotFailed() throws {
        // 20,000 small files: listing and creating them takes long enough to stop the run midway.
        let src = scratch.path("src-docs")
        for folder in 0..<100 {
            FixtureTree.makeFolder(src, "d\(folder)")
            for file in 0..<200 { FixtureTree.write(src, "d\(folder)/f\(file)", "x") }
        }
        _ = FileManager.default.createFile(atPath: configPath, contents: Data(("log-level = \"debug\"\n" + target("docs")).utf8))
        let daemon = try startDaemon()
        eventually(30, "the run listing its source") { daemon.log.contains("docs: listing") }
        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("docs: interrupted after "), daemon.log)
        XCTAssertFalse(daemon.log.contains("docs: failed"), daemon.log)
        let status = try folio(["status", "--json"], log: "status.log")
        XCTAssertTrue(status.output.contains("\"result\":\"interrupted\""), status.output)
    }

    func testAStopHeldUpByALockedStateDatabaseStillExitsWithin10Seconds() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        _ = FileManager.default.createFile(atPath: configPath, contents: Data(("log-level = \"debug\"\n" + target("docs")).utf8))
        let daemon = try startDaemon()
        eventually(20, "first sync") { text(scratch.path("dst-docs/a.txt")) == "first" }

        // Another process holds the state database's write lock (for 30 s at most): the next run waits on it.
        let marker = scratch.path("locked")
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = ["python3", "-c", """
            import sqlite3, sys, time
            db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
            db.execute('BEGIN EXCLUSIVE')
            open(sys.argv[2], 'w').close()
            time.sleep(30)
            """, stateDirectory + "/state.sqlite", marker]
        try holder.run()
        defer { if holder.isRunning { kill(holder.processIdentifier, SIGKILL); holder.waitUntilExit() } }
        eventually(20, "the database locked") { FileManager.default.fileExists(atPath: marker) }
        let checks = lines(daemon.log, containing: "docs: checking ").count
        eventually(20, "a run waiting on the lock") { lines(daemon.log, containing: "docs: checking ").count > checks }
        usleep(300_000)

        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("stopping: the runs in flight did not end within 9 s; exiting now"), daemon.log)
    }

    /// A setting the target's source does not use is logged as a warning, at start and at each reload, and the
    /// target runs.
    /// A run the server refuses (here its host key is in no known_hosts) gets no quick retries, as a dropped
    /// connection does: the same refusal would come back, and a server counting failed log-ins (fail2ban) would
    /// ban this machine. The next try is at the target's interval, and the log says so and what to do; a reload
    /// after the fix runs it at once.
    func testARefusedRunIsNotRetriedBeforeItsIntervalButAReloadRunsItAgain() throws {
        let server = try SSHServer()
        defer { server.stop() }
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "a")
        FixtureTree.write(scratch.path(""), "known_hosts", "")
        writeConfig(sftpTarget("docs", from: server, interval: "1h", knownHosts: scratch.path("known_hosts")))
        let daemon = try startDaemon()
        eventually(30, "the refused run rescheduled") { lines(daemon.log, containing: "docs: not trying again").count == 1 }
        // The fix (the host key trusted), then a reload: the target runs again at once, not in an hour.
        try FileManager.default.removeItem(atPath: scratch.path("known_hosts"))
        try FileManager.default.copyItem(atPath: server.knownHostsPath, toPath: scratch.path("known_hosts"))
        daemon.signal(SIGHUP)
        eventually(30, "the fixed target synced after the reload") { text(scratch.path("dst-docs/a.txt")) == "a" }
        terminate(daemon)
        XCTAssertEqual(lines(daemon.log, containing: "docs: failed: ").count, 1, daemon.log)
        XCTAssertTrue(daemon.log.contains(" is not a known host ("), daemon.log)
        let next = try XCTUnwrap(lines(daemon.log, containing: "docs: not trying again").first)
        XCTAssertTrue(next.contains("docs: not trying again before its next run, in 1h"), next)
        XCTAssertTrue(next.hasSuffix(": the same refusal would come back; fix it, then reload the daemon or run folio sync --now docs to try at once"), next)
        XCTAssertFalse(daemon.log.contains("docs: trying again in"), daemon.log)
    }

    /// A drive that is not mounted (its mountpoint left an empty folder) is refused at every interval, and the
    /// mountpoint stays empty: the `.folio` each run's lock made there goes again. It stayed, with its lock file,
    /// on the disk beneath the drive, while the log said nothing was changed.
    func testADestinationOnADriveThatIsNotMountedIsRefusedAndLeftEmpty() throws {
        FixtureTree.write(scratch.path("src-usb"), "a.txt", "a")
        writeConfig(target("usb"))
        let daemon = try startDaemon()
        eventually(30, "the first sync") { text(scratch.path("dst-usb/a.txt")) == "a" }
        XCTAssertEqual(rename(scratch.path("dst-usb"), scratch.path("usb-away")), 0)
        FixtureTree.makeFolder(scratch.path(""), "dst-usb")
        eventually(30, "two refused runs") { lines(daemon.log, containing: "usb: refused: destination \(scratch.path("dst-usb")) holds nothing of folio's earlier runs").count >= 2 }
        terminate(daemon)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.path("dst-usb")), [], daemon.log)
        XCTAssertEqual(text(scratch.path("usb-away/a.txt")), "a")
    }

    func testASettingTheSourceDoesNotUseIsLoggedAsAWarning() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        writeConfig(target("docs", extra: "webdav = false"))
        let daemon = try startDaemon()
        eventually(20, "first sync") { text(scratch.path("dst-docs/a.txt")) == "first" }
        let warning = "warning: \(configPath):8: target \"docs\": webdav is not used with a local folder, this target's source; remove it, or check that it is in the right target"
        XCTAssertEqual(lines(daemon.log, containing: warning).count, 1, daemon.log)
        daemon.signal(SIGHUP)
        eventually(20, "the reload") { lines(daemon.log, containing: "reloaded ").count == 1 }
        XCTAssertEqual(lines(daemon.log, containing: warning).count, 2, daemon.log)
        terminate(daemon)
    }

    func testSIGHUPWithABrokenConfigKeepsTheOldOneAndAGoodOneIsApplied() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        FixtureTree.write(scratch.path("src-more"), "m.txt", "more")
        writeConfig(target("docs"))
        let daemon = try startDaemon()
        eventually(20, "first sync") { text(scratch.path("dst-docs/a.txt")) == "first" }

        _ = FileManager.default.createFile(atPath: configPath, contents: Data("[[target]]\nname = 1\n".utf8))
        daemon.signal(SIGHUP)
        eventually(20, "the reload refused") { daemon.log.contains("reload failed, keeping the previous configuration") }
        // Still running, still syncing with the old configuration.
        FixtureTree.write(scratch.path("src-docs"), "b.txt", "after the broken reload")
        eventually(20, "the old target still synced") { text(scratch.path("dst-docs/b.txt")) == "after the broken reload" }

        // With a state-dir too, which the daemon's FOLIO_STATE_DIR overrides: a restart would not apply it either.
        writeConfig("state-dir = \"\(scratch.path("elsewhere"))\"\n" + target("docs") + target("more"))
        daemon.signal(SIGHUP)
        eventually(20, "the new target synced") { text(scratch.path("dst-more/m.txt")) == "more" }
        XCTAssertTrue(daemon.log.contains("reloaded \(configPath): 2 automatic targets"), daemon.log)
        XCTAssertTrue(daemon.log.contains("state-dir changed in \(configPath); FOLIO_STATE_DIR in the daemon's environment sets the state directory, so state-dir has no effect"), daemon.log)
        terminate(daemon)
    }

    /// A reload that points a target at another source runs it within seconds, not after its interval: until
    /// then its destination is not what the configuration says.
    func testAReloadThatChangesATargetsSourceRunsItSoon() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        FixtureTree.write(scratch.path("src-new"), "a.txt", "first")
        FixtureTree.write(scratch.path("src-new"), "m.txt", "from the new source")
        writeConfig(target("docs", interval: "1h"))
        let daemon = try startDaemon()
        eventually(20, "first sync") { text(scratch.path("dst-docs/a.txt")) == "first" }
        writeConfig(target("docs", source: scratch.path("src-new"), interval: "1h"))
        daemon.signal(SIGHUP)
        eventually(20, "the new source synced") { text(scratch.path("dst-docs/m.txt")) == "from the new source" }
        terminate(daemon)
    }

    func testHookGetsTheChangedPathsOnceAndItsFailureIsNotRetried() throws {
        let src = scratch.path("src-docs")
        FixtureTree.write(src, "a.txt", "first")
        FixtureTree.write(src, "sub/b.txt", "second")
        let hook = scratch.path("hook.sh")
        let out = scratch.path("hook-out")
        FixtureTree.makeFolder(scratch.path(""), "hook-out")
        FixtureTree.write(scratch.path(""), "hook.sh", "#!/bin/sh\ncat > \"$1/paths-$(date +%s%N)\"\necho \"$2\" >> \"$1/calls\"\nexit 3\n")
        chmod(hook, 0o755)
        writeConfig(target("docs", extra: "on-change = [\"\(hook)\", \"\(out)\", \"{target}\"]"))
        let daemon = try startDaemon()

        eventually(20, "the hook ran") { text(out + "/calls") == "docs\n" }
        let firstPaths = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasPrefix("paths-") }
        XCTAssertEqual(firstPaths.count, 1)
        XCTAssertEqual(text(out + "/" + firstPaths[0])?.split(separator: "\n").sorted(), ["a.txt", "sub/b.txt"])
        eventually(20, "its failure logged") { daemon.log.contains("docs: on-change hook \(hook) exited with status 3; it is not retried") }

        // Unchanged runs do not run it again.
        let unchangedBefore = lines(daemon.log, containing: "docs: unchanged").count
        eventually(20, "two more unchanged runs") { lines(daemon.log, containing: "docs: unchanged").count >= unchangedBefore + 2 }
        XCTAssertEqual(text(out + "/calls"), "docs\n", "a failed hook is not retried")

        // The next change runs it once more, with only that change.
        FixtureTree.write(src, "c.txt", "third")
        eventually(20, "the hook ran again") { text(out + "/calls") == "docs\ndocs\n" }
        let allPaths = try FileManager.default.contentsOfDirectory(atPath: out).filter { $0.hasPrefix("paths-") }.sorted()
        XCTAssertEqual(allPaths.count, 2)
        XCTAssertEqual(text(out + "/" + allPaths[1]), "c.txt\n")
        terminate(daemon)
    }

    /// A stop skips the hook of the run under way; what that run installed reaches the next daemon's hook, once.
    func testPathsOfARunStoppedBeforeItsHookReachTheNextDaemonsHook() throws {
        let server = try NginxServer()
        let (daemon, out) = try hookedDaemonMidRun(from: server)
        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("docs: interrupted after "), daemon.log)
        XCTAssertNil(text(out + "/calls"), "a stop skips the hook")
        try assertTheNextDaemonsHookGetsTheStoppedRunsPaths(out: out)
    }

    /// `kill -9` mid-run (or a power cut) ends the run before its end is recorded, and before the record of
    /// small.txt is written (a batch waits for more files or a second): the next run adopts small.txt as
    /// already there, yet its hook still gets it, as the run kept it for the hook before installing it.
    func testPathsOfARunKilledMidRunReachTheNextDaemonsHook() throws {
        let server = try NginxServer()
        let (daemon, out) = try hookedDaemonMidRun(from: server)
        daemon.signal(SIGKILL)
        XCTAssertEqual(daemon.waitForExit(seconds: 10), 128 + SIGKILL)
        XCTAssertNil(text(out + "/calls"))
        try assertTheNextDaemonsHookGetsTheStoppedRunsPaths(out: out)
    }

    /// A daemon syncing small.txt and a 1 MiB big.bin from `server`'s `/slow/` (256 KiB/s a connection, so that
    /// the run is under way for seconds, not the moment a local 1 GiB copy can take) into dst-docs, with a hook
    /// that appends its input to `hook-out/paths` and its target to `hook-out/calls`; returned once small.txt is
    /// in place and big.bin under way, with `hook-out`'s path.
    private func hookedDaemonMidRun(from server: NginxServer) throws -> (DaemonProcess, out: String) {
        FixtureTree.write(server.servedRoot, "small.txt", "small")
        FixtureTree.write(server.servedRoot, "big.bin", FixtureTree.bytes(count: 1 << 20, seed: 3))
        let dst = scratch.path("dst-docs")
        let hook = scratch.path("hook.sh"), out = scratch.path("hook-out")
        FixtureTree.makeFolder(scratch.path(""), "hook-out")
        FixtureTree.write(scratch.path(""), "hook.sh", "#!/bin/sh\ncat >> \"$1/paths\"\necho \"$2\" >> \"$1/calls\"\n")
        chmod(hook, 0o755)
        writeConfig("""
            [[target]]
            name = "docs"
            source = "\(server.url("slow"))"
            destination = "\(dst)"
            mode = "automatic"
            interval = "1s"
            on-change = ["\(hook)", "\(out)", "{target}"]
            """)
        let daemon = try startDaemon()
        eventually(30, "small.txt in place and the big file under way") { fileSize(dst + "/small.txt") == 5 && partialBytes() > 1 << 18 }
        return (daemon, out)
    }

    /// Starts the daemon again: the hook after its run gets the stopped run's small.txt with its own big.bin, and
    /// no hook runs after the unchanged runs that follow.
    private func assertTheNextDaemonsHookGetsTheStoppedRunsPaths(out: String) throws {
        let next = try startDaemon(log: "daemon2.log")
        eventually(120, "the hook after the next run") { text(out + "/calls") == "docs\n" }
        XCTAssertEqual(text(out + "/paths")?.split(separator: "\n").sorted(), ["big.bin", "small.txt"], "the stopped run's path too")
        // Forgotten once the hook has had them: unchanged runs run no hook.
        let unchangedBefore = lines(next.log, containing: "docs: unchanged").count
        eventually(20, "two unchanged runs") { lines(next.log, containing: "docs: unchanged").count >= unchangedBefore + 2 }
        XCTAssertEqual(text(out + "/calls"), "docs\n")
        terminate(next)
    }

    /// Starts a daemon whose one target, docs, runs `/bin/sh -c "SIGNALS; echo $$ > PIDFILE; while :; do sleep 0.1; done"`
    /// as its hook after its first run, and returns it once the hook runs, with the hook's pid.
    private func startDaemonWithLingeringHook(signals: String) throws -> (DaemonProcess, pid_t) {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        let pidFile = scratch.path("hook.pid")
        let hook = "\(signals); echo $$ > \(pidFile); while :; do sleep 0.1; done"
        writeConfig(target("docs", extra: "on-change = [\"/bin/sh\", \"-c\", \"\(hook)\"]"))
        let daemon = try startDaemon()
        eventually(20, "the hook running") { (text(pidFile).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) != nil }
        return (daemon, Int32(text(pidFile)!.trimmingCharacters(in: .whitespacesAndNewlines))!)
    }

    func testStopEndsAHookThatIgnoresSIGTERMAndStillExitsWithin10Seconds() throws {
        let (daemon, hookPID) = try startDaemonWithLingeringHook(signals: "trap '' TERM")
        XCTAssertEqual(kill(hookPID, 0), 0, "the hook runs")

        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("docs: on-change hook /bin/sh was stopped (it was killed by signal 9); the next run's hook gets its paths again"), daemon.log)
        XCTAssertEqual(kill(hookPID, 0), -1, "no hook left behind")
    }

    /// A hook that is a shell script exits 143 on the stop's SIGTERM rather than dying of it: still a stop, and
    /// the log says its paths go to the next run's hook (they do), not that it is not retried.
    func testAHookThatExitsOnTheStopsSIGTERMIsLoggedAsStopped() throws {
        let (daemon, _) = try startDaemonWithLingeringHook(signals: "trap 'exit 143' TERM")
        terminate(daemon)
        XCTAssertTrue(daemon.log.contains("docs: on-change hook /bin/sh was stopped (it exited with status 143); the next run's hook gets its paths again"), daemon.log)
        XCTAssertFalse(daemon.log.contains("not retried"), daemon.log)
    }

    /// A hook that hangs is stopped at `on-change-timeout`, with what it started (it went on running once the
    /// hook was killed), and the target's schedule goes on: the next change is synced (and runs the hook again).
    func testAHookPastItsTimeoutIsStoppedAndTheScheduleGoesOn() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        let starts = scratch.path("hook-starts"), child = scratch.path("hook-child")
        let hook = "echo started >> \(starts); trap '' TERM; sleep 300 & echo $! > \(child); while :; do sleep 0.1; done"
        writeConfig(target("docs", extra: "on-change = [\"/bin/sh\", \"-c\", \"\(hook)\"]\non-change-timeout = \"1s\""))
        let daemon = try startDaemon()
        eventually(20, "the hung hook stopped") {
            daemon.log.contains("docs: on-change hook /bin/sh still running after 1s (on-change-timeout); stopping it")
                && daemon.log.contains("docs: on-change hook /bin/sh was killed by signal 9")
        }
        let childPID = try XCTUnwrap(Int32(text(child)?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""))
        eventually(10, "the hook's own child stopped with it") { kill(childPID, 0) != 0 }
        FixtureTree.write(scratch.path("src-docs"), "b.txt", "second")
        eventually(30, "the next change synced and the hook started again") {
            text(scratch.path("dst-docs/b.txt")) == "second" && text(starts) == "started\nstarted\n"
        }
        terminate(daemon)
    }

    /// A hook that does not ignore SIGTERM ends on it: it starts with default signal handling and nothing
    /// blocked. (It inherited the daemon's thread's mask, SIGTERM blocked, so every stop took the SIGKILL; a
    /// hook run through /bin/sh hid that, as dash clears the mask.)
    func testAHookPastItsTimeoutEndsOnSIGTERM() throws {
        FixtureTree.write(scratch.path("src-docs"), "a.txt", "first")
        writeConfig(target("docs", extra: "on-change = [\"/bin/sleep\", \"30\"]\non-change-timeout = \"1s\""))
        let daemon = try startDaemon()
        eventually(20, "the hook stopped") { daemon.log.contains("docs: on-change hook /bin/sleep was killed by signal") }
        XCTAssertTrue(daemon.log.contains("docs: on-change hook /bin/sleep was killed by signal 15"), daemon.log)
        terminate(daemon)
    }

    func testParallelTargetsCapsHowManyRunAtOnce() throws {
        let names = ["alpha", "beta", "gamma"]
        let size: Int64 = 256 << 20
        for name in names {
            FixtureTree.makeFolder(scratch.path(""), "src-" + name)
            let fd = open(scratch.path("src-\(name)/big.bin"), O_WRONLY | O_CREAT, 0o644)
            XCTAssertEqual(ftruncate(fd, off_t(size)), 0)
            close(fd)
        }
        writeConfig("parallel-targets = 1\n" + names.map { target($0) }.joined())
        let socket = NotifySocket(path: scratch.path("notify.sock"))
        defer { socket.close() }
        let daemon = try startDaemon(environment: ["NOTIFY_SOCKET": socket.address, "WATCHDOG_USEC": "400000"])
        eventually(120, "every target mirrored") { names.allSatisfy { fileSize(scratch.path("dst-\($0)/big.bin")) == size } }
        terminate(daemon)

        // Every STATUS= names at most one running target ("syncing alpha: 0/1 files, 90.0 MiB/s; next: beta now").
        let running = socket.lines.filter { $0.hasPrefix("STATUS=syncing ") }.map { line in
            let syncing = line.components(separatedBy: "; next:")[0]
            return names.filter { syncing.contains($0 + ": ") }
        }
        XCTAssertFalse(running.isEmpty, "the status line showed the runs: \(socket.lines)")
        for targets in running { XCTAssertEqual(targets.count, 1, "\(targets) ran at once with parallel-targets = 1") }
        XCTAssertEqual(Set(running.flatMap { $0 }).count, 3, "each target ran: \(running)")
    }

    /// A target taken out of the configuration by SIGHUP while it runs still holds its place in
    /// `parallel-targets` until its run ends: the target that replaces it waits.
    func testATargetRemovedByAReloadWhileItRunsStillCountsTowardParallelTargets() throws {
        let size = makeBigSource()
        FixtureTree.write(scratch.path("src-more"), "m.txt", "more")
        writeConfig("parallel-targets = 1\n" + target("docs"))
        let daemon = try startDaemon()
        eventually(30, "the big file under way") { partialBytes() > 0 }
        writeConfig("parallel-targets = 1\n" + target("more"))
        daemon.signal(SIGHUP)
        eventually(60, "the new target synced") { text(scratch.path("dst-more/m.txt")) == "more" }
        XCTAssertEqual(fileSize(scratch.path("dst-docs/big.bin")), size, "the removed target's run had ended before the new one started")
        XCTAssertTrue(daemon.log.contains("reloaded \(configPath): 1 automatic target"), daemon.log)
        terminate(daemon)
    }

    func testAnInvalidConfigurationStopsTheDaemonAtOnceWithStatus2() throws {
        _ = FileManager.default.createFile(atPath: configPath, contents: Data("[[target]]\nname = 1\n".utf8))
        let result = try folio(["daemon"], log: "invalid.log")
        XCTAssertEqual(result.status, 2, result.output)
        XCTAssertTrue(result.output.contains(configPath), result.output)
    }
}
