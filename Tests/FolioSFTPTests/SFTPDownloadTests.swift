import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Downloads survive a server crash: the error fails the run, and the partial file resumes from its offset.
final class SFTPDownloadTests: SFTPTestCase {
    /// The listing's session serves the first download worker: two workers after an exec listing cost two
    /// log-ins in total, not three.
    func testListingSessionIsReusedByTheFirstDownloadWorker() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-reuse")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let source = try source(server, served.path, method: .execOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        let entry = try XCTUnwrap(snapshot.entry(at: try RelativePath(validating: "a.txt")))
        let scratch = TemporaryDirectory("sftp-reuse-out")
        let contents = try await Self.onWorker {
            let first = try source.makeConnection()
            let second = try source.makeConnection()
            defer {
                first.close()
                second.close()
            }
            return try [first, second].enumerated().map { index, connection in
                try SourceConformance.download(entry, with: connection, into: scratch.path("out\(index)"), from: 0)
            }
        }
        XCTAssertEqual(contents, [Array("alpha\n".utf8), Array("alpha\n".utf8)])
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Accepted publickey").count - 1, 2, log)
    }

    /// Lists a served `big.bin` of 300 KiB, lets `change` act on the served folder, then copies the file as
    /// listed: the copy's error (nil when it succeeded), and the file's URL.
    private func errorCopyingAfter(_ change: (TemporaryDirectory) throws -> Void) async throws -> (error: SourceError?, url: String) {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-changed")
        FixtureTree.write(served.path, "big.bin", FixtureTree.bytes(count: 300 << 10, seed: 3))
        let source = try source(server, served.path)
        let snapshot = try await source.snapshot(options: ListingOptions())
        let entry = try XCTUnwrap(snapshot.entry(at: try RelativePath(validating: "big.bin")))
        try change(served)
        let scratch = TemporaryDirectory("sftp-changed-out")
        let error = try await Self.onWorker { () -> SourceError? in
            let connection = try source.makeConnection()
            defer { connection.close() }
            do {
                _ = try SourceConformance.download(entry, with: connection, into: scratch.path("out"), from: 0)
                return nil
            } catch let error as SourceError {
                return error
            }
        }
        return (error, server.url(served.path("big.bin")))
    }

    /// A file gone between the listing and its copy says it disappeared since it was listed; it said "does not
    /// exist on the server; check the path", as for a source root mistyped.
    func testAFileGoneSinceTheListingSaysItDisappeared() async throws {
        let (error, url) = try await errorCopyingAfter { served in try FileManager.default.removeItem(atPath: served.path("big.bin")) }
        XCTAssertEqual(error?.message, "\(url) disappeared from the server since it was listed; the next run mirrors what is there then")
    }

    /// A file the server fails to read answers SFTP's catch-all status, FX_FAILURE (OpenSSH's sftp-server sends it
    /// for any error it has no status for: a disk's read error, or here a folder put where the listed file was).
    /// The line says the server failed to read it and where to look, not libssh2's raw text.
    func testAFileTheServerFailsToReadSaysSoInOneLine() async throws {
        let (error, url) = try await errorCopyingAfter { served in
            try FileManager.default.removeItem(atPath: served.path("big.bin"))
            FixtureTree.write(served.path, "big.bin/inside.txt", "a folder now")
        }
        XCTAssertEqual(error?.message, "the server failed while reading \(url) (SFTP's catch-all status FX_FAILURE: a read error on its disk, or the name now a folder or a special file); the next run tries again; if it keeps failing, check the server's log for it")
        XCTAssertEqual(error?.underlying?.contains("SFTP status 4 (LIBSSH2_FX_FAILURE)"), true, "\(String(describing: error?.underlying))")
    }

    /// A run closes its sessions before it returns: after an initial run its download worker's, after a
    /// no-change run the one its listing parked for download workers that never came. Left to
    /// the source's last release, a session could be closed on any thread, even while the process exits and
    /// OpenSSL tears down under it (a crash at exit, one no-change run in eight over a 20 ms link).
    func testARunClosesTheSessionsLeftForDownloadsBeforeItReturns() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-finish")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let destination = TemporaryDirectory("sftp-finish-out")
        let source = try source(server, served.path)
        let target = TargetConfig(name: "t", source: server.url(served.path), destination: destination.path)
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        for expected in [RunReport.Result.synced, .unchanged] {
            let report = await engine.run(target, source: source, options: .init(trigger: .manual))
            XCTAssertEqual(report.result, expected, report.error ?? "")
            XCTAssertEqual(OpenConnections.count(toPort: server.port), 0, "connections still open after a \(expected) run")
        }
        XCTAssertEqual(FixtureTree.read(destination.path("a.txt")), Array("alpha\n".utf8))
        // A listing that fails (the folder is gone) closes its sessions before the run returns too.
        let missing = try self.source(server, served.path + "/gone")
        let failed = await engine.run(target, source: missing, options: .init(trigger: .manual))
        XCTAssertEqual(failed.result, .failed)
        XCTAssertEqual(OpenConnections.count(toPort: server.port), 0, "connections still open after a failed listing")
    }

    /// The source times its turns: through a proxy that adds 10 ms to each round trip, its listing alone
    /// reports at least that (a far link: 8 download workers when `transfers` is unset).
    func testTheListingMeasuresTheLinksRoundTrip() async throws {
        let server = try SSHServer()
        let proxy = try DelayProxy(forwardingTo: server.port, delay: 0.005)
        defer { proxy.stop() }
        let served = TemporaryDirectory("sftp-round-trip")
        FixtureTree.write(served.path, "a.txt", "alpha\n")
        let source = try source(server, served.path, through: proxy)
        XCTAssertNil(source.roundTrip, "nothing timed before the listing")
        _ = try await source.snapshot(options: ListingOptions())
        let turn = try XCTUnwrap(source.roundTrip)
        XCTAssertGreaterThanOrEqual(turn, .milliseconds(10))
        await source.finishRun()
    }

    /// A worker going from file to file sends each file's close with the next file's open, and a small file's
    /// closing check (fstat) with its reads: two round trips a file (the open, the reads), not four. Counted as
    /// turns by a delay proxy in front of sshd; with a close or a check waited for alone, each costs one more.
    func testEachFileAfterTheFirstCostsTwoRoundTrips() async throws {
        let server = try SSHServer()
        let proxy = try DelayProxy(forwardingTo: server.port)
        defer { proxy.stop() }
        let served = TemporaryDirectory("sftp-turns")
        let names = (0..<13).map { String(format: "file-%02d.txt", $0) }
        for (index, name) in names.enumerated() { FixtureTree.write(served.path, name, "file \(index)\n", mtime: (1_600_000_000, 0)) }
        let source = try source(server, served.path, through: proxy)
        let entries = try names.enumerated().map { index, name in
            Entry(path: try RelativePath(validating: name), kind: .file, size: Int64("file \(index)\n".utf8.count), mtime: FileTime(seconds: 1_600_000_000))
        }
        let scratch = TemporaryDirectory("sftp-turns-out")
        let (contents, turns) = try await Self.onWorker { () -> ([String], Int) in
            let connection = try source.makeConnection()
            defer { connection.close() }
            // The first file also pays for the log-in and for starting SFTP; count from the second on.
            var contents = [try SourceConformance.download(entries[0], with: connection, into: scratch.path("0"), from: 0)]
            let before = proxy.turns
            for (index, entry) in entries.enumerated().dropFirst() {
                contents.append(try SourceConformance.download(entry, with: connection, into: scratch.path("\(index)"), from: 0))
            }
            return (contents.map { String(decoding: $0, as: UTF8.self) }, proxy.turns - before)
        }
        XCTAssertEqual(contents, names.indices.map { "file \($0)\n" })
        XCTAssertEqual(turns, 2 * (names.count - 1), "round trips for \(names.count - 1) files")
    }

    func testServerKilledMidTransferThenDownloadResumesFromThePartialFile() throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("sftp-kill")
        let content = FixtureTree.bytes(count: 96 << 20, seed: 11)
        FixtureTree.write(served.path, "big.bin", content, mtime: (1_600_000_000, 0))
        let source = try source(server, served.path)
        let entry = Entry(path: try RelativePath(validating: "big.bin"), kind: .file, size: Int64(content.count), mtime: FileTime(seconds: 1_600_000_000))
        let scratch = TemporaryDirectory("sftp-kill-out")
        let partial = scratch.path("big.bin.partial")

        // Copy on a worker queue, as the engine does; kill sshd (listener and session processes) a few MiB in.
        let outcome = Outcome()
        DispatchQueue(label: "test.worker").async {
            do {
                let connection = try source.makeConnection()
                defer { connection.close() }
                _ = try SourceConformance.download(entry, with: connection, into: partial, from: 0)
                outcome.finish(nil)
            } catch {
                outcome.finish(error)
            }
        }
        while FixtureTree.size(partial) < 4 << 20, !outcome.isFinished { usleep(1_000) }
        server.stop(signal: SIGKILL)
        let error = outcome.wait()
        let sourceError = try XCTUnwrap(error as? SourceError, "the copy finished although the server was killed: \(String(describing: error))")
        XCTAssertEqual(sourceError.code, .unreachable, sourceError.message)
        XCTAssertTrue(sourceError.failsRun)
        XCTAssertFalse(sourceError.message.contains("\n"))
        let kept = FixtureTree.size(partial)
        XCTAssertGreaterThan(kept, 0)
        XCTAssertLessThan(kept, entry.size)
        XCTAssertEqual(FixtureTree.read(partial), Array(content[..<Int(kept)]), "the partial file holds a clean prefix")

        // Next run: the server is back; resume from the partial file's length.
        try server.start()
        let connection = try source.makeConnection()
        defer { connection.close() }
        let fd = open(partial, O_WRONLY | O_APPEND)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        let sink = DownloadSink.forTesting(fileDescriptor: fd, offset: kept, path: entry.path)
        try connection.download(entry, into: sink, from: kept)
        XCTAssertEqual(sink.bytesTransferred, entry.size - kept, "only the missing bytes were transferred")
        XCTAssertEqual(FixtureTree.read(partial), content)
    }
}

/// The result of work on another thread, awaited by a synchronous test.
final class Outcome: @unchecked Sendable {
    // Why @unchecked: `error` and `finished` are only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var finished = false
    private var error: (any Error)?

    func finish(_ error: (any Error)?) {
        condition.withLock {
            self.error = error
            finished = true
            condition.broadcast()
        }
    }

    var isFinished: Bool { condition.withLock { finished } }

    func wait() -> (any Error)? {
        condition.withLock {
            while !finished { condition.wait() }
            return error
        }
    }
}

extension FixtureTree {
    /// A file's size, 0 when it does not exist yet.
    static func size(_ path: String) -> Int64 {
        var info = stat()
        return lstat(path, &info) == 0 ? Int64(info.st_size) : 0
    }
}
