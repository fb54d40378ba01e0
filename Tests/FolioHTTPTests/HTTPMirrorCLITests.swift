import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// `folio mirror http://… DEST` end to end, running the built binary against real servers and the stub.
final class HTTPMirrorCLITests: XCTestCase {
    private func mirror(_ url: String, _ scratch: TemporaryDirectory, _ extra: [String] = []) -> FolioBinary.Outcome {
        FolioBinary.run(["mirror", url, scratch.path("dest")] + extra, environment: ["FOLIO_STATE_DIR": scratch.path("state")])
    }

    /// Serves the conformance tree from nginx's `location` and mirrors it once; the mirror must be exact.
    private func mirrorConformanceTree(from location: String, file: StaticString = #filePath, line: UInt = #line) throws -> (NginxServer, TemporaryDirectory) {
        let server = try NginxServer()
        ConformanceTree.create(at: server.servedRoot)
        let scratch = TemporaryDirectory("cli-\(location)")
        let first = mirror(server.url(location), scratch)
        XCTAssertEqual(first.status, 0, first.stderr, file: file, line: line)
        XCTAssertEqual(FixtureTree.listing(scratch.path("dest")), FixtureTree.listing(server.servedRoot), file: file, line: line)
        return (server, scratch)
    }

    /// A first mirror is exact. The re-run downloads nothing and lists the folders of the last run's record
    /// ahead, with `Depth: 1` only (nginx refused infinity the first time, which the run's memo keeps): each folder
    /// is asked once, none with infinity. After folders are renamed, removed, added and turned into files, the
    /// mirror is still exact.
    func testMirrorOverWebDAVThenARerunListsAheadAndStaysExact() throws {
        let (server, scratch) = try mirrorConformanceTree(from: "dav")
        for file in ConformanceTree.expectedListing where !file.hasSuffix("/") {
            XCTAssertEqual(FixtureTree.read(scratch.path("dest/" + file)), FixtureTree.read(server.servedRoot + "/" + file), file)
        }
        XCTAssertFalse(server.requests(containing: "depth=infinity").isEmpty, "the first run did not try infinity")
        let gets = server.requests(containing: "GET /dav/").count
        let before = server.requests(containing: "PROPFIND").count
        let second = mirror(server.url("dav"), scratch)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(server.requests(containing: "GET /dav/").count, gets, "a no-change run downloaded something")
        let propfinds = server.requests(containing: "PROPFIND").dropFirst(before)
        XCTAssertTrue(propfinds.allSatisfy { $0.contains(" 207 ") && $0.contains("depth=1 ") }, "\(propfinds)")
        let folders = ConformanceTree.expectedListing.filter { $0.hasSuffix("/") }.count
        XCTAssertEqual(propfinds.count, folders + 1, "each folder and the root once: \(propfinds)")
        XCTAssertEqual(Set(propfinds.map { $0.split(separator: " ")[1] }).count, folders + 1, "\(propfinds)")

        // Six of the 15 entries go (under max-delete's half).
        let root = server.servedRoot
        XCTAssertEqual(rename(root + "/folder with space", root + "/renamed folder"), 0)
        try FileManager.default.removeItem(atPath: root + "/empty folder")
        try FileManager.default.removeItem(atPath: root + "/deep/a/b/c")
        FixtureTree.write(root, "deep/a/b/c", "now a file\n")
        FixtureTree.write(root, "new/inner/x.txt", "new\n")
        let third = mirror(server.url("dav"), scratch)
        XCTAssertEqual(third.status, 0, third.stderr)
        XCTAssertEqual(FixtureTree.listing(scratch.path("dest")), FixtureTree.listing(root))
        for file in FixtureTree.listing(root) where !file.hasSuffix("/") {
            XCTAssertEqual(FixtureTree.read(scratch.path("dest/" + file)), FixtureTree.read(root + "/" + file), file)
        }
    }

    /// `--bwlimit` holds a WebDAV download to its rate (the wait is inside curl's write callback, which must not
    /// trip the stall check), and the file arrives exact. Why a lower bound on the time only: a busy machine makes
    /// a run slower, never faster, so this cannot fail from noise; without the limit the file takes milliseconds.
    func testABandwidthLimitHoldsAWebDAVDownloadToItsRate() throws {
        let server = try NginxServer()
        let content = FixtureTree.bytes(count: 96 << 10, seed: 11)
        FixtureTree.write(server.servedRoot, "paced/big.bin", content)
        let scratch = TemporaryDirectory("cli-bwlimit")
        let started = ContinuousClock.now
        let outcome = mirror(server.url("dav", "paced"), scratch, ["--bwlimit", "32K", "--timeout", "2"])
        let took = ContinuousClock.now - started
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/big.bin")), content)
        XCTAssertGreaterThanOrEqual(took, .milliseconds(2_500), "96 KiB at 32 KiB/s take 3 s")
    }

    /// `webdav = "auto"` against a plain server: the first run's PROPFIND finds no WebDAV and the run reads the
    /// index pages; the run's memo keeps that, so the re-run reads them at once, with no PROPFIND, and downloads
    /// nothing.
    func testARerunOfAPlainServerReadsItsIndexPagesWithoutAskingForWebDAV() throws {
        let (server, scratch) = try mirrorConformanceTree(from: "json")
        let probes = server.requests(containing: "PROPFIND /json/").count
        XCTAssertGreaterThan(probes, 0, "the first run did not probe")
        let gets = server.requests(containing: "GET /json/").count
        let second = mirror(server.url("json"), scratch)
        XCTAssertEqual(second.status, 0, second.stderr)
        XCTAssertEqual(server.requests(containing: "PROPFIND /json/").count, probes, "the re-run asked for WebDAV again")
        let folders = ConformanceTree.expectedListing.filter { $0.hasSuffix("/") }.count
        XCTAssertEqual(server.requests(containing: "GET /json/").count - gets, folders + 1, "one index page per folder, no download")
    }

    /// Mirrors `movie.bin` from nginx's slow copy into `scratch`, and kills nginx once at least 300 KB of it
    /// are in the partial file: the run fails that file, and nothing is under its final name. Restarts nginx.
    private func killServerMidDownload(_ server: NginxServer, _ scratch: TemporaryDirectory) throws {
        let running = FolioBinary.start(["mirror", server.url("slow"), scratch.path("dest")], environment: ["FOLIO_STATE_DIR": scratch.path("state")])
        let partialFolder = scratch.path("dest/.folio/partial")
        var partialSize = 0
        while running.process.isRunning, partialSize < 300_000 {
            usleep(5_000)
            // Partial files live in sixteen shard folders, `partial/<0-f>/`.
            let shards = (try? FileManager.default.contentsOfDirectory(atPath: partialFolder)) ?? []
            let files = shards.flatMap { shard in
                ((try? FileManager.default.contentsOfDirectory(atPath: partialFolder + "/" + shard)) ?? []).map { partialFolder + "/" + shard + "/" + $0 }
            }
            partialSize = files.compactMap { path -> Int? in
                var info = stat()
                return stat(path, &info) == 0 ? Int(info.st_size) : nil
            }.max() ?? 0
        }
        server.stop(signal: SIGKILL)
        _ = running.standardErrorPipe.fileHandleForReading.readDataToEndOfFile()
        running.process.waitUntilExit()
        XCTAssertNotEqual(running.process.terminationStatus, 0)
        XCTAssertNil(FixtureTree.read(scratch.path("dest/movie.bin")), "a half file was installed")
        try server.start()
    }

    /// nginx killed mid-download: the run fails that file (nothing under its final name); the next run resumes
    /// the partial file with Range, so only the missing bytes cross the wire.
    func testKilledServerThenRerunResumesWithRange() throws {
        let server = try NginxServer()
        let content = FixtureTree.bytes(count: 2 << 20, seed: 11)
        FixtureTree.write(server.servedRoot, "movie.bin", content, mtime: (1_700_000_000, 0))
        let scratch = TemporaryDirectory("cli-killed")
        try killServerMidDownload(server, scratch)
        let rerun = mirror(server.url("slow"), scratch)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/movie.bin")), content)
        let last = server.requests(containing: "GET /slow/movie.bin").last ?? ""
        // Log format: method, URI, status, body bytes sent, range=…, if_range=… (an HTTP date, which has spaces).
        let fields = last.split(separator: " ")
        let sent = fields.count > 4 ? Int(fields[3]) ?? -1 : -1
        XCTAssertTrue(last.hasPrefix("GET /slow/movie.bin 206 \(sent) range=bytes=\(content.count - sent)- if_range="), last)
        // Besides the missing part, the 64 KiB before it, which the re-run compares with the partial file's.
        XCTAssertGreaterThanOrEqual(content.count - sent, 300_000 - 65_536, "the re-run fetched more than the missing part: \(last)")
    }

    /// nginx's validators are whole seconds and the size (its ETag is the two in hex): a file rewritten within
    /// the second, same size, after a run stopped mid-file, has the same ones. The next run asks again for the
    /// 64 KiB before its partial file's end, sees they differ, and fetches the file whole; resumed blindly, the
    /// old version's first part was joined to the new one's rest and installed, exit 0.
    func testAFileRewrittenWithinTheSecondAfterAKilledRunIsNotJoinedToItsPartialFile() throws {
        let server = try NginxServer()
        FixtureTree.write(server.servedRoot, "movie.bin", FixtureTree.bytes(count: 2 << 20, seed: 11), mtime: (1_700_000_000, 0))
        let scratch = TemporaryDirectory("cli-rewritten")
        try killServerMidDownload(server, scratch)
        let rewritten = FixtureTree.bytes(count: 2 << 20, seed: 12)
        FixtureTree.write(server.servedRoot, "movie.bin", rewritten, mtime: (1_700_000_000, 500_000_000))
        let rerun = mirror(server.url("slow"), scratch)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertTrue(FixtureTree.read(scratch.path("dest/movie.bin")) == rewritten, "the old version's first part was kept")
        let gets = server.requests(containing: "GET /slow/movie.bin")
        XCTAssertTrue(gets.last?.hasPrefix("GET /slow/movie.bin 200 \(rewritten.count) ") == true, "not fetched whole after the comparison: \(gets)")
    }

    func testHostileServerWritesNothingOutsideTheDestination() throws {
        let stub = try StubServer()
        for scenario in ["hostile-dotdot", "hostile-encoded", "hostile-foreign", "hostile-entity", "redirect"] {
            let scratch = TemporaryDirectory("cli-hostile")
            let outcome = mirror(stub.url(scenario), scratch)
            XCTAssertEqual(outcome.status, 1, "\(scenario): \(outcome.stderr)")
            XCTAssertTrue(outcome.stderr.contains(stub.url(scenario)), "\(scenario): \(outcome.stderr)")
            let everything = FixtureTree.listing(scratch.path, skipping: [])
            XCTAssertFalse(everything.contains { $0.contains("escape") || $0.contains("x.txt") || $0.hasPrefix("elsewhere") }, "\(scenario): \(everything)")
            XCTAssertEqual(FixtureTree.listing(scratch.path("dest")), [], "\(scenario) wrote into the destination")
        }
    }

    /// Apache's autoindex links a name with a `:` before any `/` as `./12:30 notes.txt`. That file is mirrored, and
    /// the copy already in the destination is adopted, not moved to the trash as one the source no longer has.
    func testApacheDotSlashLinkIsMirroredAndItsLocalCopyKept() throws {
        let server = try ApacheServer()
        let scratch = TemporaryDirectory("cli-colon")
        let names = ["12:30 notes.txt", "a.txt", "b.txt", "c.txt"]
        for name in names {
            FixtureTree.write(server.servedRoot, name, "\(name)\n", mtime: (1_700_000_000, 0))
            FixtureTree.write(scratch.path("dest"), name, "\(name)\n", mtime: (1_700_000_000, 0))
        }
        let outcome = mirror(server.url("index"), scratch)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.listing(scratch.path("dest")), names)
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/12:30 notes.txt")), Array("12:30 notes.txt\n".utf8))
        XCTAssertEqual(FixtureTree.listing(scratch.path("dest/.folio/trash")), [], "a listed file went to the trash")
        XCTAssertEqual(server.requests(containing: "HEAD /index/12:30 notes.txt 200").count, 1, "\(server.requests(containing: "HEAD"))")
    }

    /// A script that fails (HTTP 500 after retries) fails its own file, and a folder that fails is a listing
    /// issue: the rest is mirrored and the run ends with exit 3 ("some files failed"), not as a failed run. One
    /// worker, so a file failure taken for a lost connection (a reconnect, then the run failed once the last
    /// worker gave up) would show.
    func testAServerErrorOnOneFileOrFolderFailsOnlyThat() throws {
        let server = try NginxServer()
        for name in ["a.txt", "sub/b.txt", "error-500.php", "error-500-dir/c.txt"] {
            FixtureTree.write(server.servedRoot, name, "\(name)\n", mtime: (1_700_000_000, 0))
        }
        let scratch = TemporaryDirectory("cli-500")
        let outcome = mirror(server.url("dav"), scratch, ["--transfers", "1"])
        XCTAssertEqual(outcome.status, 3, outcome.stderr)
        let gets = server.requests(containing: "GET /dav/error-500.php 500 ")
        XCTAssertEqual(gets.count, 5, "the batch's request, then four alone, without a reconnect and four more: \(gets)")
        let dest = scratch.path("dest")
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(dest): \(server.url("dav", "error-500.php")) failed with a server error (HTTP 500) after 4 attempts; check the server"])
        XCTAssertTrue(outcome.stdoutLines.contains("mirror:\(dest): cannot list error-500-dir: \(server.url("dav", "error-500-dir/")) failed with a server error (HTTP 500) after 4 attempts; check the server"), outcome.stdout)
        XCTAssertEqual(FixtureTree.listing(scratch.path("dest")), ["a.txt", "error-500-dir/", "sub/", "sub/b.txt"])
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/sub/b.txt")), Array("sub/b.txt\n".utf8))
    }

    func testTruncatedBodyIsNeverInstalled() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-truncated")
        let outcome = mirror(stub.url("truncated"), scratch)
        XCTAssertEqual(outcome.status, 3, outcome.stderr)
        XCTAssertTrue(outcome.stderr.contains("big.bin"), outcome.stderr)
        XCTAssertNil(FixtureTree.read(scratch.path("dest/big.bin")))
    }

    /// Small files come as parallel GETs from one worker (a batch), each exactly once, with exact contents and
    /// times: one worker's requests arrive on several connections, as many as the server's cap.
    func testSmallFilesComeAsParallelGETsAndTheMirrorIsExact() throws {
        let server = try NginxServer()
        var expected: [String: [UInt8]] = [:]
        for index in 0..<60 {
            let name = "batch/folder \(index % 3)/file #\(index) 100% é.txt"
            let content = FixtureTree.bytes(count: 100 + index * 97, seed: UInt64(index))
            FixtureTree.write(server.servedRoot, name, content, mtime: (1_700_000_000 + index, 0))
            expected[name] = content
        }
        let scratch = TemporaryDirectory("cli-batch")
        let outcome = mirror(server.url("dav", "batch/"), scratch, ["--transfers", "1"])
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        for (name, content) in expected {
            let local = scratch.path("dest/" + name.dropFirst("batch/".count))
            XCTAssertEqual(FixtureTree.read(local), content, name)
            XCTAssertEqual(FixtureTree.mtime(local), FixtureTree.mtime(server.servedRoot + "/" + name), name)
        }
        let gets = server.requests(containing: "GET /dav/batch/")
        XCTAssertEqual(gets.count, expected.count, "some file was fetched twice or not at all: \(gets)")
        XCTAssertTrue(gets.allSatisfy { $0.contains(" 200 ") }, "\(gets)")
        let connections = Set(gets.compactMap { $0.split(separator: " ").last })
        XCTAssertGreaterThan(connections.count, 1, "one worker's batch used one connection: \(gets)")

        // `--connections 1` holds the same batches to one request at a time, on one connection.
        let capped = TemporaryDirectory("cli-batch-capped")
        let before = gets.count
        let second = mirror(server.url("dav", "batch/"), capped, ["--transfers", "1", "--connections", "1"])
        XCTAssertEqual(second.status, 0, second.stderr)
        let cappedGets = server.requests(containing: "GET /dav/batch/").dropFirst(before)
        XCTAssertEqual(cappedGets.count, expected.count)
        XCTAssertEqual(Set(cappedGets.compactMap { $0.split(separator: " ").last }).count, 1, "\(cappedGets)")

        // Four workers on this near server each take batches with a quarter of the GETs the server takes (16) in
        // flight: never more connections than the server's cap, however the batches move between workers.
        let plain = TemporaryDirectory("cli-batch-default")
        let third = mirror(server.url("dav", "batch/"), plain, ["--transfers", "4"])
        XCTAssertEqual(third.status, 0, third.stderr)
        let plainGets = server.requests(containing: "GET /dav/batch/").dropFirst(before + cappedGets.count)
        XCTAssertEqual(plainGets.count, expected.count)
        XCTAssertLessThanOrEqual(Set(plainGets.compactMap { $0.split(separator: " ").last }).count, 16, "\(plainGets)")
    }

    /// Files fetched one at a time go over the connections the listing opened, not new ones: with one download
    /// worker, every GET arrives on a connection a PROPFIND came on, and the mirror is exact.
    func testDownloadsGoOverTheListingsConnections() throws {
        let server = try NginxServer()
        var expected: [String: [UInt8]] = [:]
        for index in 0..<3 {
            let name = "reuse/folder \(index)/big \(index).bin"
            let content = FixtureTree.bytes(count: (300 << 10) + index, seed: UInt64(index))
            FixtureTree.write(server.servedRoot, name, content)
            expected[name] = content
        }
        let scratch = TemporaryDirectory("cli-reuse")
        let outcome = mirror(server.url("dav", "reuse/"), scratch, ["--transfers", "1"])
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        for (name, content) in expected {
            XCTAssertEqual(FixtureTree.read(scratch.path("dest/" + name.dropFirst("reuse/".count))), content, name)
        }
        let connection = { (line: String) in line.split(separator: " ").last.map(String.init) }
        let listing = Set(server.requests(containing: "PROPFIND /dav/reuse/").compactMap(connection))
        let gets = server.requests(containing: "GET /dav/reuse/")
        XCTAssertEqual(gets.count, expected.count, "\(gets)")
        XCTAssertTrue(Set(gets.compactMap(connection)).isSubset(of: listing), "a download opened a connection of its own: \(gets), listing on \(listing)")
    }

    /// One entity tag, however the server writes it: bare in the listing and quoted in the header (wsgidav), or
    /// weak while the file is new and strong after (Apache). The bare one failed every file on every run; the
    /// weak one fetched the same version again at the next run.
    func testAnEntityTagIsOneTagBareOrQuotedWeakOrStrong() throws {
        let stub = try StubServer()
        let bare = TemporaryDirectory("cli-bare-etag")
        let outcome = mirror(stub.url("bare-etag"), bare)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.read(bare.path("dest/f.txt")), Array("hello".utf8))

        let weak = TemporaryDirectory("cli-weak-etag")
        XCTAssertEqual(mirror(stub.url("weak-etag"), weak).status, 0)
        let again = mirror(stub.url("weak-etag"), weak)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(again.stdoutLines.count, 1, again.stdout)
        XCTAssertTrue(again.stdout.hasPrefix("mirror:\(weak.path("dest")): unchanged, checked in "), again.stdout)
        XCTAssertEqual(stub.requests.filter { ($0["method"] as? String) == "GET" && ($0["path"] as? String) == "/weak-etag/f.txt" }.count, 1)
    }

    /// A server that gives files no time and no ETag is mirrored, with a warning every run: only a change of size
    /// can be seen there, and the mirror stayed stale without a word.
    func testAServerGivingNoTimeOrETagIsWarnedAbout() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-unversioned")
        let warning = "mirror:\(scratch.path("dest")): \(stub.url("unversioned")): the server gives no time (Last-Modified) and no ETag for 1 file, so Folio sees only a change of size there; have the server send them (lighttpd: mimetype.assign, as Debian's configuration does)"
        for _ in 0..<2 {
            let outcome = mirror(stub.url("unversioned"), scratch)
            XCTAssertEqual(outcome.status, 0, outcome.stderr)
            XCTAssertEqual(outcome.stdoutLines.first, warning, outcome.stdout)
        }
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/doc.txt")), Array("version-1\n".utf8))
    }

    /// A second Ctrl-C quits at once, exit 130, and the JSON stream still ends with the run's `target-done`
    /// (interrupted): it ended mid-stream. Here the first stop waits on a server that sends a byte every two
    /// seconds, so the second always comes while the run is still stopping.
    func testASecondCtrlCQuitsAtOnceAndStillEndsTheJSONStream() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-quit")
        let running = FolioBinary.start(["mirror", "--json", stub.url("trickle"), scratch.path("dest")], environment: ["FOLIO_STATE_DIR": scratch.path("state")])
        var seen = Data()
        let output = running.standardOutputPipe.fileHandleForReading
        output.read(into: &seen, until: "\"event\":\"plan\"")
        usleep(300_000)
        kill(running.process.processIdentifier, SIGINT)
        output.read(into: &seen, until: "stopping")
        kill(running.process.processIdentifier, SIGINT)
        seen.append(output.readDataToEndOfFile())
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationStatus, 130, String(decoding: seen, as: UTF8.self))
        let last = try XCTUnwrap(String(decoding: seen, as: UTF8.self).split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        XCTAssertEqual(last["event"] as? String, "target-done", "\(last)")
        XCTAssertEqual(last["result"] as? String, "interrupted", "\(last)")
        XCTAssertEqual(last["error"] as? String, "quit at once: the files in flight keep their partial files for the next run")
    }

    /// A file rewritten in place while its body streams (nginx reads a file as it sends it) is not installed: a
    /// HEAD after a transfer of a second or more finds the new version. Its old and new bytes were installed
    /// mixed, exit 0, where the local and SFTP sources caught it. Its bytes are not kept to resume from either: the
    /// listing still names the version they started as, and the next run took the whole torn file as complete.
    func testAFileRewrittenWhileItStreamsIsNotInstalled() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-torn")
        let outcome = mirror(stub.url("torn"), scratch, ["--json"])
        XCTAssertEqual(outcome.status, 3, outcome.stderr)
        let failed = outcome.events.filter { $0["event"] as? String == "file-failed" }
        XCTAssertEqual(failed.map { $0["message"] as? String }, ["\(stub.url("torn"))f.bin changed on the server while it was being copied; it will be fetched next run"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.path("dest/f.bin")))
        XCTAssertEqual(FixtureTree.listing(scratch.path("dest/.folio/partial"), skipping: []).filter { $0.hasSuffix(".part") }, [])
    }

    /// A file dated past 2262 (more than `FileTime` holds) is mirrored, with the latest time it holds: its
    /// Last-Modified was compared with the listing's kept time and it "changed since it was listed" every run.
    func testAFileDatedPast2262IsMirrored() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-far-future")
        let outcome = mirror(stub.url("far-future"), scratch)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/far.txt")), Array("hello".utf8))
    }

    /// A server that asks for seconds of quiet (429 with `Retry-After`) gets them, and the run says so as it
    /// happens: a pause of minutes without a word looked like a hang.
    func testALongRetryAfterIsSaidAsItHappens() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-wait-long")
        let outcome = mirror(stub.url("wait-long"), scratch)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.read(scratch.path("dest/f.txt")), Array("hello".utf8))
        XCTAssertEqual(outcome.stdoutLines.filter { $0.contains("asks Folio to wait") }, [
            "mirror:\(scratch.path("dest")): \(stub.url("wait-long"))f.txt asks Folio to wait 6 s (HTTP 429 with Retry-After); every request to the server waits until then",
        ], outcome.stdout)
        let gets = stub.requests.filter { ($0["method"] as? String) == "GET" }.compactMap { $0["time"] as? Double }
        XCTAssertEqual(gets.count, 2)
        if gets.count == 2 { XCTAssertGreaterThanOrEqual(gets[1] - gets[0], 5.9, "Retry-After: 6 was not honoured") }
    }

    /// What a batch cannot take — a 429, a redirect, a dropped connection — is fetched alone afterwards, and the
    /// 429's Retry-After holds that next request back.
    func testWhatABatchCannotTakeIsFetchedAloneAndRetryAfterIsHonoured() throws {
        let stub = try StubServer()
        let scratch = TemporaryDirectory("cli-batch-stub")
        let outcome = mirror(stub.url("batch"), scratch, ["--transfers", "1"])
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        for name in "abcdef" {
            XCTAssertEqual(FixtureTree.read(scratch.path("dest/\(name).txt")), Array((String(repeating: String(name), count: 5) + "\n").utf8), String(name))
        }
        let gets = stub.requests.filter { ($0["method"] as? String) == "GET" }
        func times(_ path: String) -> [Double] { gets.filter { ($0["path"] as? String) == path }.compactMap { $0["time"] as? Double } }
        XCTAssertEqual(times("/batch/a.txt").count, 1)
        XCTAssertEqual(times("/batch/b.txt").count, 2, "the refused file was not fetched again")
        XCTAssertEqual(times("/batch/d.txt").count, 2, "the cut file was not fetched again")
        XCTAssertEqual(times("/batch/moved/c.txt").count, 1, "the redirect was not followed")
        let refused = times("/batch/b.txt")
        if refused.count == 2 { XCTAssertGreaterThanOrEqual(refused[1] - refused[0], 0.9, "Retry-After: 1 was not honoured") }
    }
}
