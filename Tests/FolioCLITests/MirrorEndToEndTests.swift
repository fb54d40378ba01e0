import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// The built `folio` binary on local trees, as a user runs it.
final class MirrorEndToEndTests: XCTestCase {
    var work: TemporaryDirectory!
    var environment: [String: String] = [:]

    override func setUp() {
        work = TemporaryDirectory("cli")
        FixtureTree.makeFolder(work.path, "state")
        environment = ["FOLIO_STATE_DIR": work.path("state")]
    }

    // See `TemporaryDirectory`: the folder goes now, not at the process's end.
    override func tearDown() { work = nil }

    func testOddNamesArrivedExactlyWithTheirTimes() throws {
        let names = ["with space.txt", "#hash.txt", "100%.txt", "what?.txt", "this&that.txt", "caf\u{E9}.txt", "cafe\u{301}.txt", "sub dir/#%?&.bin", "say \"hi\" \\ back.txt"]
        for (index, name) in names.enumerated() {
            FixtureTree.write(work.path("src"), name, "content \(index)", mtime: (1_600_000_000 + index, 100 + index))
        }
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--json"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")))
        for (index, name) in names.enumerated() {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + name)), Array("content \(index)".utf8), name)
            XCTAssertEqual(FixtureTree.mtime(work.path("dst/" + name)), Int64(1_600_000_000 + index) * 1_000_000_000 + Int64(100 + index), name)
        }
        // Per-file lines have their own encoder: exact text, JSON escapes included.
        let target = "mirror:\(work.path("dst"))"
        XCTAssertTrue(outcome.stdoutLines.contains(##"{"event":"file-done","bytes":9,"path":"#hash.txt","target":"\##(target)"}"##), outcome.stdout)
        XCTAssertTrue(outcome.stdoutLines.contains(#"{"event":"file-done","bytes":9,"path":"say \"hi\" \\ back.txt","target":"\#(target)"}"#), outcome.stdout)
        let done = try XCTUnwrap(outcome.events.last)
        XCTAssertEqual(done["event"] as? String, "target-done")
        XCTAssertEqual(done["result"] as? String, "synced")
        XCTAssertEqual(done["downloaded"] as? Int, names.count)
        XCTAssertEqual(done["created_dirs"] as? Int, 1)
        XCTAssertEqual(done["failed"] as? Int, 0)
        for key in ["updated", "removed", "trashed", "bytes", "seconds", "target"] { XCTAssertNotNil(done[key], key) }

        let again = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(again.status, 0)
        XCTAssertEqual(again.stdoutLines.count, 2, again.stdout)
        XCTAssertEqual(again.stdoutLines.first, "mirror:\(work.path("dst")): caf\u{E9}.txt and cafe\u{301}.txt differ only in Unicode normalisation; both kept")
        XCTAssertTrue(again.stdoutLines.last?.hasPrefix("mirror:\(work.path("dst")): unchanged, checked in ") == true, again.stdout)
    }

    /// Entries skipped for one reason share one line once there are more than three (a library with hundreds of
    /// links printed hundreds of lines every run); three or fewer keep a line each, as does every other reason.
    func testManySkippedLinksShareOneLine() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.makeFolder(work.path("src"), "sub")
        for name in ["l1", "l2", "l3", "sub/l4", "sub/l5"] {
            XCTAssertEqual(symlink("a.txt", work.path("src/" + name)), 0, name)
        }
        for name in ["p1", "p2"] { XCTAssertEqual(mkfifo(work.path("src/" + name), 0o644), 0, name) }
        let target = "mirror:\(work.path("dst"))"
        let first = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(Array(first.stdoutLines.dropLast()), [
            "\(target): skipped l1, l2, l3 and 2 more: symbolic link (symlinks = \"skip\")",
            "\(target): skipped p1: not a regular file, folder or link (FIFO, socket or device)",
            "\(target): skipped p2: not a regular file, folder or link (FIFO, socket or device)",
        ], first.stdout)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), ["a.txt", "sub/"])
        XCTAssertEqual(unlink(work.path("src/sub/l5")), 0)
        XCTAssertEqual(unlink(work.path("src/sub/l4")), 0)
        let again = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(Array(again.stdoutLines.prefix(3)), ["l1", "l2", "l3"].map { "\(target): skipped \($0): symbolic link (symlinks = \"skip\")" },
                       again.stdout)
    }

    func testAPlantedSymlinkIsNeverWrittenThrough() throws {
        FixtureTree.write(work.path("src"), "sub/a.txt", "from the source")
        FixtureTree.write(work.path("src"), "file.txt", "source file")
        FixtureTree.write(work.path("outside"), "victim.txt", "must stay")
        FixtureTree.makeFolder(work.path("dst"), "")
        XCTAssertEqual(symlink(work.path("outside"), work.path("dst/sub")), 0)
        XCTAssertEqual(symlink(work.path("outside/victim.txt"), work.path("dst/file.txt")), 0)
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--force"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr + outcome.stdout)
        XCTAssertEqual(FixtureTree.listing(work.path("outside")), ["victim.txt"], "nothing written outside")
        XCTAssertEqual(FixtureTree.read(work.path("outside/victim.txt")), Array("must stay".utf8))
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), ["file.txt", "sub/", "sub/a.txt"])
        XCTAssertEqual(FixtureTree.read(work.path("dst/file.txt")), Array("source file".utf8))
        XCTAssertTrue(outcome.stdout.contains("2 local files that folio did not write or that changed here were moved to the trash"), outcome.stdout)
        XCTAssertTrue(outcome.stdout.contains(": 2 added, 2 removed (in trash), 1 folder created, "), outcome.stdout)
    }

    /// One of a kind is said in the singular: a user reads these lines, not a program.
    func testTheSummarySaysOneInTheSingular() throws {
        FixtureTree.write(work.path("src"), "sub/report.txt", "from the source")
        FixtureTree.write(work.path("dst"), "sub/report.txt", "edited here")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr + outcome.stdout)
        XCTAssertEqual(FixtureTree.read(work.path("dst/sub/report.txt")), Array("from the source".utf8))
        let target = "mirror:\(work.path("dst"))"
        XCTAssertTrue(outcome.stdoutLines.contains { $0.hasPrefix("\(target): 1 updated, 15 B in ") }, outcome.stdout)
        XCTAssertTrue(outcome.stdoutLines.contains { $0.hasPrefix("\(target): 1 local file that folio did not write or that changed here was moved to the trash: sub/report.txt (kept in ") },
                      outcome.stdout)
    }

    /// A folder made here by hand goes to the trash whole: the summary names it with its slash, as an entry, not
    /// as "a local file" (a user then looked for a file of that name).
    func testAFolderMadeHereByHandIsNamedAsAFolder() throws {
        for name in ["a", "b", "c", "d"] { FixtureTree.write(work.path("src"), name + ".txt", name) }
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        FixtureTree.write(work.path("dst"), "handmade/notes.txt", "mine")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        let target = "mirror:\(work.path("dst"))"
        XCTAssertTrue(outcome.stdoutLines.contains { $0.hasPrefix("\(target): 1 local entry that folio did not write or that changed here was moved to the trash: handmade/ (kept in ") },
                      outcome.stdout)
        let trash = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: work.path("dst/.folio/trash")).first)
        XCTAssertEqual(FixtureTree.read(work.path("dst/.folio/trash/\(trash)/handmade/notes.txt")), Array("mine".utf8))
    }

    /// docs/json-events.md is what scripts read: `target-done` carries exactly the fields it lists (the optional
    /// ones when they apply), and `status` rounds `seconds` to the millisecond as `target-done` does.
    func testTheJSONFieldsAreTheDocumentedOnes() throws {
        let documentation = try String(contentsOfFile: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/json-events.md").standardizedFileURL.path, encoding: .utf8)
        let section = try XCTUnwrap(documentation.components(separatedBy: "## `target-done`").dropFirst().first?
            .components(separatedBy: "\n## ").first)
        let documented = Set(section.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `"), let end = line.dropFirst(3).firstIndex(of: "`") else { return nil }
            return String(line.dropFirst(3)[..<end])
        })
        XCTAssertTrue(documented.isSuperset(of: ["result", "downloaded", "updated", "trashed", "local_changes"]), "\(documented)")

        FixtureTree.write(work.path("src"), "sub/report.txt", "from the source")
        FixtureTree.write(work.path("dst"), "sub/report.txt", "edited here")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--json"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        let done = try XCTUnwrap(outcome.events.last)
        XCTAssertEqual(done["event"] as? String, "target-done")
        XCTAssertEqual(Set(done.keys).subtracting(["event"]), documented.subtracting(["error", "dry_run"]))
        XCTAssertEqual(done["updated"] as? Int, 1)
        XCTAssertEqual(done["trashed"] as? Int, 1)
        XCTAssertEqual(done["local_changes"] as? [String], ["sub/report.txt"])

        let status = FolioBinary.run(["status", "--json"], environment: environment)
        XCTAssertEqual(status.status, 0, status.stderr)
        let seconds = try XCTUnwrap(status.events.first?["seconds"] as? Double, status.stdout)
        XCTAssertEqual(seconds, (seconds * 1000).rounded() / 1000, status.stdout)
    }

    /// kill -9 in the middle of downloads: nothing half-written under a final name, and the next run fetches
    /// only what was not complete.
    func testKillNineMidDownloadThenResume() throws {
        // More files than one install batch holds, so that the kill lands between batches.
        let count = 5_000
        for i in 0..<count {
            FixtureTree.write(work.path("src"), "d\(i % 12)/file-\(i).bin", FixtureTree.bytes(count: 4_096 + i, seed: UInt64(i)))
        }
        let running = FolioBinary.start(["mirror", work.path("src"), work.path("dst"), "--json", "--transfers", "4"], environment: environment)
        let reader = running.standardOutputPipe.fileHandleForReading
        var buffer = Data()
        var doneLines = 0
        while doneLines < 20 {
            let chunk = reader.availableData
            if chunk.isEmpty { break }
            buffer.append(chunk)
            doneLines = String(decoding: buffer, as: UTF8.self).components(separatedBy: "\"event\":\"file-done\"").count - 1
        }
        kill(running.process.processIdentifier, SIGKILL)
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationReason, .uncaughtSignal, "folio finished before it could be killed; the test needs more files")

        var present: [String: UInt64] = [:]
        for path in FixtureTree.listing(work.path("dst")) where !path.hasSuffix("/") {
            XCTAssertEqual(FixtureTree.read(work.path("dst/" + path)), FixtureTree.read(work.path("src/" + path)), "\(path) is complete or absent")
            var info = stat()
            stat(work.path("dst/" + path), &info)
            present[path] = UInt64(info.st_ino)
        }
        XCTAssertLessThan(present.count, count)
        // The killed run never recorded its end: status says it was interrupted, not that it still runs.
        let status = FolioBinary.run(["status"], environment: environment)
        let pid = running.process.processIdentifier
        XCTAssertTrue(status.stdout.contains("mirror:\(work.path("dst")): interrupted at "), status.stdout)
        XCTAssertTrue(status.stdout.contains(" — its process (pid \(pid)) ended before the run did; the next run resumes"), status.stdout)
        XCTAssertFalse(status.stdout.contains("0 added"), "counts are recorded at a run's end, so a killed run has none to show: \(status.stdout)")
        XCTAssertFalse(status.stdout.contains("running"), status.stdout)

        let rerun = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--json"], environment: environment)
        XCTAssertEqual(rerun.status, 0, rerun.stderr)
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), FixtureTree.listing(work.path("src")))
        let done = try XCTUnwrap(rerun.events.last)
        XCTAssertEqual(done["downloaded"] as? Int, count - present.count, "only the missing files are fetched")
        for (path, inode) in present {
            var info = stat()
            stat(work.path("dst/" + path), &info)
            XCTAssertEqual(UInt64(info.st_ino), inode, "\(path) was not fetched again")
        }
        XCTAssertEqual(FixtureTree.listing(work.path("dst/.folio/partial")).filter { !$0.hasSuffix("/") }, [], "no partial file left")
    }

    /// A large local file resumed from a partial file that ends on a 4 KiB boundary: the 64 KiB before that end are
    /// read and compared, then the rest is copied kernel-side. The comparison's read once went on to write past
    /// it, starting direct I/O with bytes staged, and the kernel copy then wrote behind them: folio crashed.
    func testAResumedLargeLocalFileIsComparedThenCopiedKernelSide() throws {
        let content = FixtureTree.bytes(count: 3 << 20, seed: 21)
        FixtureTree.write(work.path("src"), "big.bin", content, mtime: (1_700_000_000, 123_456_789))
        let entry = Entry(path: try RelativePath(validating: "big.bin"), kind: .file, size: Int64(content.count),
                          mtime: FileTime(seconds: 1_700_000_000, nanoseconds: 123_456_789))
        let name = Destination.partialName(for: entry)
        FixtureTree.write(work.path("dst/.folio/partial/\(name.prefix(1))"), name, Array(content[..<(1 << 20)]))
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--json"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertTrue(FixtureTree.read(work.path("dst/big.bin")) == content, "not the source's bytes")
        let done = try XCTUnwrap(outcome.events.last)
        XCTAssertEqual(done["bytes"] as? Int, 2 << 20, "only the bytes after the partial file's were fetched")
    }

    /// A machine whose wall clock is behind until NTP sets it (a Raspberry Pi without a battery, a kiosk back
    /// from storage) names its trash folder in the past. The next run, with the clock set, keeps that folder its
    /// full trash-days (the time since boot tells its age) rather than purging it at once.
    func testTrashMadeWhileTheClockWasBehindOutlivesTheNextRun() throws {
        let faketime = "/usr/bin/faketime"
        guard FileManager.default.isExecutableFile(atPath: faketime) else {
            throw XCTSkip("needs faketime, which scripts/install-deps.sh installs")
        }
        let source = work.path("src"), destination = work.path("dst")
        FixtureTree.write(source, "a.txt", "first", mtime: (1_600_000_000, 0))
        XCTAssertEqual(FolioBinary.run(["mirror", source, destination], environment: environment).status, 0)
        FixtureTree.write(source, "a.txt", "second", mtime: (1_600_000_100, 0))
        // Only the wall clock is 40 days behind: files' times and the time since boot are as they are.
        var behindClock = environment
        behindClock["NO_FAKE_STAT"] = "1"
        behindClock["DONT_FAKE_MONOTONIC"] = "1"
        let behind = FolioBinary.run(["mirror", source, destination], environment: behindClock, launcher: [faketime, "-f", "-40d"])
        XCTAssertEqual(behind.status, 0, behind.stderr)
        let runs = try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash")
        XCTAssertEqual(runs.count, 1, "\(runs)")
        let run = try XCTUnwrap(runs.first)
        let day = DateFormatter()
        day.timeZone = TimeZone(identifier: "UTC")
        day.dateFormat = "yyyyMMdd"
        let fortyDaysAgo = Date().addingTimeInterval(-40 * 86_400)
        XCTAssertTrue([fortyDaysAgo, fortyDaysAgo.addingTimeInterval(-60)].map(day.string(from:)).contains(String(run.prefix(8))), run)

        let setClock = FolioBinary.run(["mirror", source, destination], environment: environment)
        XCTAssertEqual(setClock.status, 0, setClock.stderr)
        XCTAssertTrue(setClock.stdout.contains("unchanged"), setClock.stdout)
        XCTAssertEqual(FixtureTree.read(destination + "/.folio/trash/\(run)/a.txt"), Array("first".utf8), "the trash kept the replaced file")
        XCTAssertEqual(FixtureTree.read(destination + "/a.txt"), Array("second".utf8))
        // The corrected time is written down, so that a reboot (a new time since boot) does not undo it.
        let reading = String(decoding: FixtureTree.read(destination + "/.folio/trash-clock/\(run)") ?? [], as: UTF8.self)
        let made = try XCTUnwrap(Int64(reading.split(separator: " ").last?.trimmingCharacters(in: .newlines) ?? ""), reading)
        XCTAssertLessThan(abs(made - Int64(Date().timeIntervalSince1970)), 3_600, reading)
    }

    func testAReadOnlyDestinationFailsInOneLine() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.makeFolder(work.path("dst"), "")
        chmod(work.path("state"), 0o777)
        chmod(work.path("dst"), 0o555)
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(outcome.status, 1)
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(work.path("dst")): failed: cannot create \(work.path("dst"))/.folio: Permission denied; make the destination writable by the user running folio"])
        XCTAssertEqual(FixtureTree.listing(work.path("dst")), [])
    }

    func testADestinationThatIsAFileFailsInOneLineAndIsLeftAlone() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path(""), "dst", "mine")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(outcome.status, 1)
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(work.path("dst")): failed: destination \(work.path("dst")) is a file, not a folder; move the file aside or point the target at a folder"])
        XCTAssertEqual(try String(contentsOfFile: work.path("dst"), encoding: .utf8), "mine")
    }

    /// Excluded entries are neither copied nor removed, also when the folder holding them goes from the source
    /// (it was moved whole, taking them along unreported: with `trash-days 0`, deleted) and when a source file
    /// has the name of an excluded folder (that folder went to the trash to make room). So do names Folio cannot
    /// mirror (a newline in one), which its scan of the destination leaves out too.
    func testExcludedEntriesStayWhenTheirFolderGoesOrAFileWantsTheirPlace() throws {
        FixtureTree.write(work.path("src"), "proj/main.c", "code")
        FixtureTree.write(work.path("src"), "old/x.txt", "x")
        for index in 1...6 { FixtureTree.write(work.path("src"), "keep\(index).txt", "k") }  // max-delete lets 2 of 11 go
        let options = ["--trash-days", "0", "--exclude", "node_modules/", "--exclude", "cache/"]
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")] + options, environment: environment).status, 0)
        FixtureTree.write(work.path("dst"), "proj/node_modules/dep.js", "mine")
        FixtureTree.write(work.path("dst"), "cache/user-data", "precious")
        FixtureTree.write(work.path("dst"), "old/line\nbreak.txt", "mine too")
        try FileManager.default.removeItem(atPath: work.path("src/proj"))
        try FileManager.default.removeItem(atPath: work.path("src/old"))
        FixtureTree.write(work.path("src"), "cache", "a file named cache")

        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")] + options, environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        let target = "mirror:\(work.path("dst"))"
        XCTAssertEqual(outcome.stdoutLines.dropLast(), [
            "\(target): skipped cache: the destination has a folder here that exclude leaves alone; rename one of them, or change exclude",
            "\(target): kept old: gone from the source, but it holds entries Folio leaves alone (excluded, unreadable, or names it cannot mirror); remove it by hand if they are not needed",
            "\(target): kept proj: gone from the source, but it holds entries Folio leaves alone (excluded, unreadable, or names it cannot mirror); remove it by hand if they are not needed",
        ])
        XCTAssertEqual(FixtureTree.read(work.path("dst/proj/node_modules/dep.js")), Array("mine".utf8))
        XCTAssertEqual(FixtureTree.read(work.path("dst/cache/user-data")), Array("precious".utf8))
        XCTAssertEqual(FixtureTree.read(work.path("dst/old/line\nbreak.txt")), Array("mine too".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/proj/main.c")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/old/x.txt")))
        XCTAssertTrue(outcome.stdoutLines.last?.hasPrefix("\(target): 2 removed, ") == true, outcome.stdout)
    }

    /// A file Folio wrote stays its own while excluded: when the exclude goes, a change at the source meanwhile
    /// updates it as any other, rather than setting it aside as a file changed here. Adding the exclude changes
    /// nothing at the destination.
    func testAFileExcludedForAWhileIsStillFoliosWhenTheExcludeGoes() throws {
        FixtureTree.write(work.path("src"), "a.txt", "one")
        FixtureTree.write(work.path("src"), "b.txt", "b")
        let target = "mirror:\(work.path("dst"))"
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        let excluding = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--exclude", "a.txt"], environment: environment)
        XCTAssertEqual(excluding.status, 0, excluding.stderr)
        XCTAssertEqual(excluding.stdoutLines.count, 1, excluding.stdout)
        XCTAssertTrue(excluding.stdoutLines.first?.hasPrefix("\(target): unchanged, checked in ") == true, excluding.stdout)
        FixtureTree.write(work.path("src"), "a.txt", "two, longer")
        XCTAssertEqual(utimensat(AT_FDCWD, work.path("src/a.txt"), [timespec(tv_sec: 1_600_000_000, tv_nsec: 0), timespec(tv_sec: 1_600_000_000, tv_nsec: 0)], 0), 0)

        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(outcome.stdoutLines.count, 1, outcome.stdout)
        XCTAssertTrue(outcome.stdoutLines.first?.hasPrefix("\(target): 1 updated, ") == true, outcome.stdout)
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("two, longer".utf8))
    }

    /// A mistyped command line gets one line, as every other error does, naming the help to read, exit 2; the
    /// help itself still goes to standard output, exit 0. (argument-parser's own message took three or four
    /// lines: the argument's help and the command's whole usage.)
    func testAMistypedCommandLineGetsOneLine() throws {
        let cases: [([String], String)] = [
            (["mirror", work.path("src")], "folio: Missing expected argument '<destination>'; see folio mirror --help"),
            (["mirror", "--nosuch", "a", "b"], "folio: Unknown option '--nosuch'; see folio mirror --help"),
            (["mirror", "a", "b", "--transfers", "x"], "folio: The value 'x' is invalid for '--transfers <transfers>'; see folio mirror --help"),
            (["sync", "--now", "--bogus"], "folio: Unknown option '--bogus'; see folio sync --help"),
            (["nosuch"], "folio: Unexpected argument 'nosuch'; see folio --help"),
            (["help", "nosuch"], "folio: there is no command \"nosuch\"; the commands are sync, mirror, status, trust and daemon (folio help COMMAND)"),
        ]
        for (arguments, line) in cases {
            let outcome = FolioBinary.run(arguments, environment: environment)
            XCTAssertEqual(outcome.status, 2, arguments.joined(separator: " "))
            XCTAssertEqual(outcome.stderrLines, [line])
            XCTAssertEqual(outcome.stdout, "", arguments.joined(separator: " "))
        }
        let help = FolioBinary.run(["mirror", "--help"], environment: environment)
        XCTAssertEqual(help.status, 0, help.stderr)
        XCTAssertEqual(help.stdoutLines.first, "OVERVIEW: Mirror SOURCE into DEST once, without a configuration file.", help.stdout)
        XCTAssertEqual(help.stderr, "")
        let helpCommand = FolioBinary.run(["help", "mirror"], environment: environment)
        XCTAssertEqual(helpCommand.status, 0, helpCommand.stderr)
        XCTAssertEqual(helpCommand.stdoutLines.first, "OVERVIEW: Mirror SOURCE into DEST once, without a configuration file.", helpCommand.stdout)
        let helpOfHelp = FolioBinary.run(["help", "help"], environment: environment)
        XCTAssertEqual(helpOfHelp.status, 0, helpOfHelp.stderr)
        XCTAssertEqual(helpOfHelp.stderr, "")
    }

    /// Half an HTTP log-in (a user without a password, a token beside them) is a usage error naming the flags,
    /// before anything is made or contacted.
    /// A URL with a slash missing is a relative path to the shell, which was then "missing" in the working folder
    /// with a hint about mounts; and a destination that is its source said it was "inside" it. Both are usage
    /// errors (2) with a line that says what was meant, a password never shown.
    func testAURLWithASlashMissingAndASourceAsItsOwnDestinationSayWhatWasMeant() throws {
        let rows: [([String], String)] = [
            (["http:/127.0.0.1:9/share/"], "folio: SOURCE is not a URL (\"://\" is missing) nor a folder here; did you mean http://127.0.0.1:9/share/?"),
            (["sftp:ann:secret@127.0.0.1/x"], "folio: SOURCE is not a URL (\"://\" is missing) nor a folder here; did you mean sftp://…@127.0.0.1/x?"),
            ([work.path("dst")], "folio: destination \(work.path("dst")) is its source; choose a destination outside it"),
        ]
        for (source, line) in rows {
            let outcome = FolioBinary.run(["mirror"] + source + [work.path("dst")], environment: environment, currentDirectory: work.path)
            XCTAssertEqual(outcome.status, 2, outcome.stderr)
            XCTAssertEqual(outcome.stderrLines, [line])
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")))
    }

    func testHalfAnHTTPLogInIsAUsageErrorNamingTheFlags() throws {
        let rows: [([String], String)] = [
            (["--username", "ann"], "folio: --username is set but --password-file is not; add --password-file, the path of a file holding the password"),
            (["--password-file", "/etc/folio/pw"], "folio: --password-file is set but --username is not; add --username"),
            (["--token-file", "/t", "--username", "ann", "--password-file", "/p"],
             "folio: --token-file is set together with --username or --password-file; use one: a bearer token, or a user name and its password"),
        ]
        for (flags, line) in rows {
            let outcome = FolioBinary.run(["mirror", "http://127.0.0.1:9/share/", work.path("dst")] + flags, environment: environment)
            XCTAssertEqual(outcome.status, 2, outcome.stderr)
            XCTAssertEqual(outcome.stderrLines, [line])
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")))
    }

    /// A source flag the source does not use is a warning, as a configuration's unused key is; the run goes on.
    func testASourceFlagTheSourceDoesNotUseIsWarnedAbout() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--identity", "/root/.ssh/id_ed25519", "--webdav", "false"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, [
            "folio: warning: --identity is not used with a local folder, this run's source; remove it, or check the source",
            "folio: warning: --webdav is not used with a local folder, this run's source; remove it, or check the source",
        ])
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("a".utf8))
    }

    /// A destination below a file fails in one line that names the fix, and makes nothing.
    func testADestinationBelowAFileSaysWhatToDo() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path(""), "afile", "not a folder")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("afile/dst")], environment: environment)
        XCTAssertEqual(outcome.status, 1, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(work.path("afile/dst")): failed: cannot create destination \(work.path("afile/dst")): Not a directory; a file or a link stands where a folder should be: move it aside"])
        XCTAssertEqual(FixtureTree.read(work.path("afile")), Array("not a folder".utf8))
    }

    /// A destination bind-mounted inside its source passes every check of the paths' text; walked as a folder of
    /// the source, each run copied the mirror into itself one level deeper. It is skipped, with a line that says
    /// why, and the mirror holds the rest.
    func testADestinationMountedInsideItsSourceIsSkippedThere() throws {
        guard getuid() == 0 else { throw XCTSkip("a bind mount needs root") }
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "inner/keep.txt", "under the mount point")
        try FileManager.default.createDirectory(atPath: work.path("dst"), withIntermediateDirectories: true)
        do { try LoopbackServer.run("mount", ["--bind", work.path("dst"), work.path("src/inner")]) } catch {
            throw XCTSkip("cannot bind-mount here: \(error)")
        }
        defer { _ = try? LoopbackServer.run("umount", ["--lazy", work.path("src/inner")]) }
        let target = "mirror:\(work.path("dst"))"
        let skipped = "\(target): skipped inner: it is this target's destination, mounted or linked into the source; Folio would copy the mirror into itself: exclude it, or mount the destination elsewhere"
        for run in 1...2 {
            let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
            XCTAssertEqual(outcome.status, 0, outcome.stderr)
            XCTAssertEqual(outcome.stdoutLines.first, skipped, "run \(run): \(outcome.stdout)")
            XCTAssertEqual(FixtureTree.listing(work.path("dst")), ["a.txt"], "run \(run)")
        }
    }

    /// A destination that is its source, or inside it, through a bind mount (which no path check sees) is refused
    /// before anything is written: the source keeps its link and FIFO, and gets no `.folio`. Run into itself, the
    /// run moved them to the trash as local files folio did not write.
    func testADestinationThatIsItsSourceThroughABindMountIsRefused() throws {
        guard getuid() == 0 else { throw XCTSkip("a bind mount needs root") }
        FixtureTree.write(work.path("src"), "sub/a.txt", "a")
        XCTAssertEqual(symlink("sub/a.txt", work.path("src/link")), 0)
        XCTAssertEqual(mkfifo(work.path("src/pipe"), 0o644), 0)
        FixtureTree.makeFolder(work.path(""), "alias")
        do { try LoopbackServer.run("mount", ["--bind", work.path("src"), work.path("alias")]) } catch {
            throw XCTSkip("cannot bind-mount here: \(error)")
        }
        defer { _ = try? LoopbackServer.run("umount", ["--lazy", work.path("alias")]) }
        let same = FolioBinary.run(["mirror", work.path("src"), work.path("alias")], environment: environment)
        XCTAssertEqual(same.status, 2, same.stdout)
        XCTAssertEqual(same.stderrLines, ["folio: destination \(work.path("alias")) is its source \(work.path("src")), the same folder reached another way (a bind mount?); choose a destination outside it"])
        let inside = FolioBinary.run(["mirror", work.path("src"), work.path("alias/sub/deeper")], environment: environment)
        XCTAssertEqual(inside.status, 2, inside.stdout)
        XCTAssertEqual(inside.stderrLines, ["folio: destination \(work.path("alias/sub/deeper")) is inside its source \(work.path("src")) on disk (through a bind mount?); choose a destination outside it"])
        let around = FolioBinary.run(["mirror", work.path("alias/sub"), work.path("src")], environment: environment)
        XCTAssertEqual(around.status, 2, around.stdout)
        XCTAssertEqual(around.stderrLines, ["folio: source \(work.path("alias/sub")) is inside its destination \(work.path("src")) on disk (through a bind mount?); choose a destination outside it"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path("src")).sorted(), ["link", "pipe", "sub"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path("src/sub")), ["a.txt"])
    }

    /// On exFAT through FUSE, `Music` and `music` are one folder with two inode numbers: no path or inode check
    /// can tell, but the lock's note, read back through the source's spelling, does. The run is refused and the
    /// source keeps no `.folio`.
    func testADestinationThatIsItsSourceUnderAnotherCaseIsRefused() throws {
        let image = try MountedImage(in: work, megabytes: 32, mkfs: ["mkfs.exfat"], mounting: .fuse(helper: "mount.exfat-fuse"))
        defer { try? image.unmount() }
        let mount = image.mountPoint
        FixtureTree.write(mount, "Music/a.txt", "a")
        let outcome = FolioBinary.run(["mirror", mount + "/Music", mount + "/music"], environment: environment)
        XCTAssertEqual(outcome.status, 1, outcome.stdout)
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(mount)/music: failed: destination \(mount)/music is its source \(mount)/Music, the same folder under another name (a filesystem that ignores case, a second mount?); choose a destination outside it"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mount + "/Music"), ["a.txt"])
    }

    /// A dry run counts the local files the run would set aside, as the run then does: the same `trashed` and
    /// `local_changes` in JSON, and a line in the future tense.
    func testADryRunCountsTheLocalFilesTheRunWouldSetAside() throws {
        for name in ["f1", "f2", "f5"] { FixtureTree.write(work.path("src"), name, "from the source") }
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        FixtureTree.write(work.path("dst"), "f5", "edited here")
        FixtureTree.write(work.path("dst"), "stray", "made here")
        let target = "mirror:\(work.path("dst"))"

        let preview = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--dry-run"], environment: environment)
        XCTAssertEqual(preview.status, 0, preview.stderr)
        XCTAssertEqual(Array(preview.stdoutLines.suffix(2)), [
            "\(target) (dry run): 1 would be updated, 1 would be removed (in trash), 15 B to copy",
            "\(target) (dry run): 2 local files that folio did not write or that changed here would be moved to the trash in \(work.path("dst"))/.folio/trash: stray, f5",
        ])
        let json = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--dry-run", "--json"], environment: environment)
        XCTAssertEqual(json.events.last?["trashed"] as? Int, 2, json.stdout)
        XCTAssertEqual(json.events.last?["local_changes"] as? [String], ["stray", "f5"], json.stdout)
        XCTAssertEqual(FixtureTree.read(work.path("dst/f5")), Array("edited here".utf8), "a dry run changes nothing")

        let real = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--json"], environment: environment)
        XCTAssertEqual(real.events.last?["trashed"] as? Int, 2, real.stdout)
        XCTAssertEqual(real.events.last?["local_changes"] as? [String], ["stray", "f5"], real.stdout)
    }

    /// A run whose every file failed says it copied nothing, not that it brought times and records up to date,
    /// and names ten failures one line each, then one line for the rest, which the summary counts.
    func testARunWhoseEveryFileFailedSaysItCopiedNothingInFewLines() throws {
        let names = (10...23).map { "f\($0).txt" }
        for name in names { FixtureTree.write(work.path("src"), name, "a") }
        FixtureTree.makeFolder(work.path("dst"), "")
        chmod(work.path("state"), 0o777)
        _ = try? LoopbackServer.run("chmod", ["-R", "a+rwX", work.path("dst")])
        for name in names { chmod(work.path("src/\(name)"), 0o000) }
        defer { for name in names { chmod(work.path("src/\(name)"), 0o644) } }
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(outcome.status, 3, "\(outcome.stderrLines)")
        let target = "mirror:\(work.path("dst"))"
        XCTAssertEqual(outcome.stderrLines.count, 11, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines.filter { $0.hasPrefix("\(target): cannot read ") }.count, 10, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines.last, "\(target): more files failed; the summary counts them all")
        XCTAssertTrue(outcome.stdoutLines.first?.hasPrefix("\(target): nothing copied, 0 B in ") == true, outcome.stdout)
        XCTAssertTrue(outcome.stdoutLines.contains { $0.hasPrefix("\(target): 14 failed, retried next run; first: ") }, outcome.stdout)
    }

    /// A folder whose time cannot be set (it belongs to another user) is a failure with a line of its own, as a
    /// file's is: it was counted in the summary with no line naming it, and no `file-failed` event.
    func testAFolderTimeThatCannotBeSetHasALineOfItsOwn() throws {
        guard getuid() == 0 else { throw XCTSkip("handing a folder to root needs root") }
        FixtureTree.write(work.path("src"), "d/f.txt", "f")
        FixtureTree.makeFolder(work.path("dst"), "")
        chmod(work.path("state"), 0o777)
        _ = try? LoopbackServer.run("chmod", ["-R", "a+rwX", work.path("dst")])
        let first = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(chown(work.path("dst/d"), 0, 0), 0)
        FixtureTree.setMtime(work.path("src/d"), (1_000_000_000, 0))
        let outcome = FolioBinary.run(["mirror", "--json", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(outcome.status, 3, outcome.stderr)
        let failed = outcome.events.filter { $0["event"] as? String == "file-failed" }
        XCTAssertEqual(failed.map { $0["path"] as? String }, ["d"], outcome.stdout)
        XCTAssertEqual(outcome.events.last?["failed"] as? Int, 1, outcome.stdout)
        XCTAssertEqual(failed.first?["message"] as? String, "cannot set the time of \(work.path("dst"))/d: Operation not permitted; it belongs to another user or is immutable: give it to the user running folio (chown), or see lsattr")
    }

    /// A destination folder the user running folio may not read (another user's, mode 700) fails alone, as
    /// rsync's does: the rest of the mirror goes on, nothing in it or above it is removed or written, and the run
    /// exits 3 with one line saying where and what to do. It failed the whole run before.
    func testADestinationFolderThatCannotBeReadFailsAloneAndTheRestIsMirrored() throws {
        guard getuid() == 0 else { throw XCTSkip("handing a folder to root needs root") }
        FixtureTree.write(work.path("src"), "a/x.txt", "x")
        FixtureTree.write(work.path("src"), "b/y.txt", "y")
        FixtureTree.write(work.path("src"), "gone/kept.txt", "k")
        FixtureTree.write(work.path("src"), "shared/in.txt", "from the source")
        FixtureTree.makeFolder(work.path("dst"), "")
        chmod(work.path("state"), 0o777)
        _ = try? LoopbackServer.run("chmod", ["-R", "a+rwX", work.path("dst")])
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment, unprivileged: true).status, 0)
        // Root's private folders: one only at the destination, one inside a folder the source drops, and one the
        // source also has, with a file the destination's copy lacks.
        for folder in ["a/private", "gone/private", "shared"] {
            FixtureTree.write(work.path("dst"), "\(folder)/mine.txt", "root's")
            XCTAssertEqual(chown(work.path("dst/\(folder)"), 0, 0), 0)
            XCTAssertEqual(chmod(work.path("dst/\(folder)"), 0o700), 0)
        }
        FixtureTree.write(work.path("src"), "b/z.txt", "new")
        FixtureTree.write(work.path("src"), "shared/more.txt", "more")
        _ = try LoopbackServer.run("rm", ["-r", work.path("src/gone")])

        let outcome = FolioBinary.run(["mirror", "--json", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(outcome.status, 3, outcome.stderr)
        let failed = outcome.events.filter { $0["event"] as? String == "file-failed" }
        XCTAssertEqual(failed.map { $0["path"] as? String }, ["a/private", "gone/private", "shared"], outcome.stdout)
        XCTAssertEqual(failed.first?["message"] as? String, "cannot read \(work.path("dst"))/a/private in the destination (Permission denied): nothing there was copied or removed; make it readable by the user running folio (chown or chmod), or move it out of the destination")
        XCTAssertEqual(FixtureTree.read(work.path("dst/b/z.txt")), Array("new".utf8), "the rest of the mirror went on")
        for folder in ["a/private", "gone/private", "shared"] {
            XCTAssertEqual(FixtureTree.read(work.path("dst/\(folder)/mine.txt")), Array("root's".utf8), folder)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/gone/kept.txt")), "what could be read of a dropped folder went")
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/shared/more.txt")))
        XCTAssertEqual(outcome.events.last?["failed"] as? Int, 3, outcome.stdout)

        // Readable again, the next run finishes the work: the dropped folder goes to the trash whole.
        for folder in ["a/private", "gone/private", "shared"] { XCTAssertEqual(chown(work.path("dst/\(folder)"), 65534, 65534), 0) }
        let next = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(next.status, 0, next.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/shared/more.txt")), Array("more".utf8))
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/gone")))
    }

    /// A path on the command line that is not UTF-8 is refused, exit 2: decoded with U+FFFD in place of its
    /// byte, it mirrored into a new folder beside the one named.
    func testAPathArgumentThatIsNotUTF8IsRefused() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        let outcome = FolioBinary.run(["mirror", "src"], environment: environment,
                                      launcher: ["/bin/sh", "-c", #"exec "$0" "$@" "$(printf 'd\377x')""#], currentDirectory: work.path(""))
        XCTAssertEqual(outcome.status, 2, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, [#"folio: the argument "d\xffx" is not UTF-8 text; Folio takes paths as UTF-8: rename the folder or file, or reach it through a symbolic link whose name is UTF-8"#])
        XCTAssertEqual(FixtureTree.listing(work.path("")).filter { $0.hasPrefix("d") }, [])
    }

    /// The live progress on a 40-column terminal with Japanese names: no progress line is wider than the
    /// terminal, measured in columns (a CJK character takes two). Counted in characters, the lines wrapped, the
    /// redraw moved up too few rows, and stale lines piled up on the screen.
    func testTheLiveProgressFitsATerminalInColumnsNotCharacters() throws {
        for index in 0..<8 { FixtureTree.write(work.path("src"), "ファイル名の長い写真_\(index).jpg", FixtureTree.bytes(count: 200_000, seed: UInt64(index))) }
        // Runs folio on a pseudo-terminal of 40 columns, and prints the widest progress line it drew, in columns.
        let terminal = #"""
            import os, pty, sys, fcntl, termios, struct, select, re, unicodedata
            pid, fd = pty.fork()
            if pid == 0:
                os.execv(sys.argv[1], sys.argv[1:])
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 40, 0, 0))
            out = b""
            while True:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
            _, status = os.waitpid(pid, 0)
            text = re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "\n", out.decode("utf-8", "replace"))
            def columns(line):
                return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)
            drawn = [l for l in re.split(r"[\r\n]", text) if "downloading" in l or "\u21b3" in l]
            print("drew %d progress lines, the widest %d columns" % (len(drawn), max(map(columns, drawn), default=0)))
            sys.exit(os.waitstatus_to_exitcode(status))
            """#
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("写真のバックアップ先フォルダ"), "--bwlimit", "1M"],
                                      environment: environment.merging(["TERM": "xterm"]) { $1 }, launcher: ["/usr/bin/python3", "-c", terminal])
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        let drawn = outcome.stdoutLines.last ?? ""
        XCTAssertTrue(drawn.hasPrefix("drew "), outcome.stdout)
        XCTAssertFalse(drawn.hasPrefix("drew 0 "), "no progress was drawn, so this tested nothing: \(outcome.stdout)")
        let widest = Int(drawn.split(separator: " ").dropLast().last ?? "") ?? .max
        XCTAssertLessThanOrEqual(widest, 40, drawn)
    }

    /// `folio status` with `$FOLIO_CONFIG` naming a file that is not there says so, exit 2, as `--config` does:
    /// it said "no targets yet", exit 0.
    /// Another user's state database (the service's, run as root), read by a user's `folio status`: the line
    /// names the user and the ways out. It said "cannot write" to a command that only reads.
    func testStatusOfAnotherUsersStateDatabaseSaysWhoseItIs() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        chmod(work.path("state"), 0o700)  // as folio makes a state folder (this one the test made)
        let outcome = FolioBinary.run(["status"], environment: environment, unprivileged: true)
        XCTAssertEqual(outcome.status, 1, outcome.stdout)
        XCTAssertEqual(outcome.stderrLines, ["folio: cannot open the state database \(work.path("state"))/state.sqlite as nobody (SQLite 14); run folio as the user it belongs to (sudo, for the service's), make it and its folder writable by nobody, or set FOLIO_STATE_DIR"])
    }

    func testStatusWithAConfigurationNamedButMissingSaysSo() {
        let missing = work.path("nonexist.toml")
        let outcome = FolioBinary.run(["status"], environment: environment.merging(["FOLIO_CONFIG": missing]) { $1 })
        XCTAssertEqual(outcome.status, 2, outcome.stdout)
        XCTAssertEqual(outcome.stderrLines, ["folio: \(missing): no configuration file here; copy config/folio.example.toml there, or pass --config FILE"])
    }

    /// With `trash-days = 0`, a local file Folio did not write is said to be deleted, not "moved to the trash".
    func testALocalFileDeletedWithoutATrashIsSaidToBeDeleted() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "b.txt", "b")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        FixtureTree.write(work.path("dst"), "mine.txt", "mine")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--trash-days", "0"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertTrue(outcome.stdoutLines.contains("mirror:\(work.path("dst")): 1 local file that folio did not write or that changed here was deleted (trash-days = 0): mine.txt"), outcome.stdout)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/mine.txt")))
    }

    /// A dry run into an existing copy says it would adopt its files, and ends as the run then does ("synced");
    /// it said "nothing to do".
    func testADryRunIntoAnExistingCopySaysItWouldAdoptIt() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a", mtime: (1_600_000_000, 0))
        FixtureTree.write(work.path("dst"), "a.txt", "a", mtime: (1_600_000_000, 0))
        let dry = FolioBinary.run(["mirror", "--dry-run", "--json", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(dry.status, 0, dry.stderr)
        XCTAssertTrue(dry.events.contains { $0["message"] as? String == "would adopt 1 file already here, the same size and time as the source's, without fetching it" }, dry.stdout)
        let real = FolioBinary.run(["mirror", "--json", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(dry.events.last?["result"] as? String, "synced", dry.stdout)
        XCTAssertEqual(real.events.last?["result"] as? String, "synced", real.stdout)
    }

    /// A target renamed in the configuration keeps what Folio knows of its folder: a file then changed at the
    /// source is updated, not set aside as a local change, and `status` shows one target with its history, not
    /// the old name "no longer in the configuration". The same for a `folio mirror` of the two folders made a target.
    func testARenamedTargetKeepsItsRecord() throws {
        FixtureTree.write(work.path("src"), "a.txt", "one", mtime: (1_600_000_000, 0))
        FixtureTree.write(work.path("src"), "b.txt", "b", mtime: (1_600_000_000, 0))
        func configure(_ name: String) {
            FixtureTree.write(work.path(""), "folio.toml", "[[target]]\nname = \"\(name)\"\nsource = \"\(work.path("src"))\"\ndestination = \"\(work.path("dst"))\"\n")
        }
        let config = ["--config", work.path("folio.toml")]
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        for (name, content) in [("photos", "two"), ("pictures", "three")] {
            configure(name)
            FixtureTree.write(work.path("src"), "a.txt", content, mtime: (1_600_000_100 + content.count, 0))
            let outcome = FolioBinary.run(["sync", "--now"] + config, environment: environment)
            XCTAssertEqual(outcome.status, 0, outcome.stderr)
            XCTAssertTrue(outcome.stdout.hasPrefix("\(name): 1 updated, "), outcome.stdout)
            XCTAssertFalse(outcome.stdout.contains("local file"), outcome.stdout)
            XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array(content.utf8))
        }
        let status = FolioBinary.run(["status"] + config, environment: environment)
        XCTAssertEqual(status.stdoutLines.filter { !$0.hasPrefix("  ") }.count, 1, status.stdout)
        XCTAssertTrue(status.stdout.hasPrefix("pictures: synced at "), status.stdout)
    }

    /// Emptying earlier runs' trash is said, not done without a word: here by lowering trash-days to 0.
    func testEmptyingTheTrashIsSaid() throws {
        FixtureTree.write(work.path("src"), "a.txt", "one")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        FixtureTree.write(work.path("src"), "a.txt", "two, longer")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        XCTAssertEqual(FixtureTree.listing(work.path("dst/.folio/trash")).filter { $0.hasSuffix("a.txt") }.count, 1, "the old a.txt is in the trash")

        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--trash-days", "0"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        let target = "mirror:\(work.path("dst"))"
        XCTAssertEqual(outcome.stdoutLines.first, "\(target): emptied the trash of 1 earlier run from \(work.path("dst"))/.folio/trash (trash-days = 0)")
        XCTAssertEqual(FixtureTree.listing(work.path("dst/.folio/trash")), [])
    }

    /// `--exclude` with a `[` that no `]` closes is refused before anything is made: exit 2, one line with the fix.
    func testAnExcludeWithAnUnclosedSetIsRefused() throws {
        FixtureTree.write(work.path("src"), "a.jpg", "a")
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst"), "--exclude", "*.[jJ]pg", "--exclude", "*.[jJpg"], environment: environment)
        XCTAssertEqual(outcome.status, 2)
        XCTAssertEqual(outcome.stderrLines, [#"folio: --exclude "*.[jJpg" has a "[" that no "]" closes, so it would match a "[" in names; close the set, or write \[ for a literal "[""#])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")))
    }

    /// Through a symlink, a destination inside its source passes the configuration's check of the paths' text; it
    /// would copy itself one level deeper on every run. It is refused before anything is written, as the same
    /// mistake spelt without the link is: a usage or configuration error, exit 2.
    func testADestinationInsideItsSourceThroughASymlinkIsRefusedInOneLine() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        symlink(work.path("src"), work.path("link"))
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("link/mirror")], environment: environment)
        XCTAssertEqual(outcome.status, 2)
        let real = PathText.real(work.path("src"))
        XCTAssertEqual(outcome.stderrLines, ["folio: destination \(work.path("link/mirror")) is inside its source \(work.path("src")) (both are in \(real)); choose a destination outside it"])
        XCTAssertEqual(FixtureTree.listing(work.path("src")), ["a.txt"])

        symlink(work.path(""), work.path("up"))
        let reverse = FolioBinary.run(["mirror", work.path("src"), work.path("up")], environment: environment)
        XCTAssertEqual(reverse.status, 2)
        XCTAssertEqual(reverse.stderrLines, ["folio: source \(work.path("src")) is inside its destination \(work.path("up")) (both are in \(PathText.real(work.path("")))); choose a destination outside it"])

        FixtureTree.write(work.path(""), "folio.toml", """
            [[target]]
            name = "loop"
            source = "\(work.path("src"))"
            destination = "\(work.path("link/mirror"))"
            """)
        let configured = FolioBinary.run(["sync", "--now", "--config", work.path("folio.toml")], environment: environment)
        XCTAssertEqual(configured.status, 2)
        XCTAssertEqual(configured.stderrLines, ["folio: \(work.path("folio.toml")):4: target \"loop\": destination \(work.path("link/mirror")) is inside its source \(work.path("src")) (both are in \(real)); choose a destination outside it"])
        XCTAssertEqual(FixtureTree.listing(work.path("src")), ["a.txt"])

        // The other way round, the line is the source's, as without a link.
        FixtureTree.write(work.path(""), "folio.toml", """
            [[target]]
            name = "loop"
            destination = "\(work.path("up"))"
            source = "\(work.path("src"))"
            """)
        let around = FolioBinary.run(["sync", "--now", "--config", work.path("folio.toml")], environment: environment)
        XCTAssertEqual(around.status, 2)
        XCTAssertEqual(around.stderrLines, ["folio: \(work.path("folio.toml")):4: target \"loop\": source \(work.path("src")) is inside its destination \(work.path("up")) (both are in \(PathText.real(work.path("")))); choose a destination outside it"])
    }

    /// `sync --now` says which settings its targets' sources do not use, on standard error, and runs anyway.
    func testSyncWarnsAboutASettingTheSourceDoesNotUse() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        let config = oneTargetConfig("photos", extra: "identity = \"/etc/folio/id_ed25519\"")
        let outcome = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, ["folio: warning: \(work.path("folio.toml")):5: target \"photos\": identity is not used with a local folder, this target's source; remove it, or check that it is in the right target"])
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("a".utf8))
    }

    /// A folder of the destination that is another filesystem's mount point cannot take files renamed from
    /// `.folio/partial`: its files fail with a line that says why and what to do; the rest is mirrored.
    func testAMountPointInsideTheDestinationFailsItsFilesWithAHint() throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a tmpfs needs root") }
        FixtureTree.write(work.path("src"), "b.txt", "b")
        FixtureTree.write(work.path("src"), "sub/a.txt", "a")
        FixtureTree.makeFolder(work.path("dst"), "sub")
        try LoopbackServer.run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", work.path("dst/sub")])
        defer { _ = try? LoopbackServer.run("umount", ["--lazy", work.path("dst/sub")]) }
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(outcome.status, 3, "\(outcome.stderrLines)")
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(work.path("dst")): cannot move sub/a.txt into place: Invalid cross-device link; a folder on the way is another filesystem mounted inside the destination: make that folder a target of its own, or exclude it"])
        XCTAssertEqual(try String(contentsOfFile: work.path("dst/b.txt"), encoding: .utf8), "b")
    }

    /// libcurl and libssh2 are loaded only when a target needs them: with broken copies first on the library path,
    /// a local mirror still works, and an HTTP or SFTP one fails in one line naming the library and the package
    /// (not with the connection error port 9 would give).
    func testNetworkLibrariesLoadOnlyWhenNeededAndAMissingOneFailsInOneLine() throws {
        let notALibrary = String(repeating: "not a library\n", count: 20)
        FixtureTree.write(work.path("libs"), "libcurl.so.4", notALibrary)
        FixtureTree.write(work.path("libs"), "libssh2.so.1", notALibrary)
        var broken = environment
        broken["LD_LIBRARY_PATH"] = work.path("libs")
        FixtureTree.write(work.path("src"), "a.txt", "a")

        let local = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: broken)
        XCTAssertEqual(local.status, 0, local.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/a.txt")), Array("a".utf8))

        let http = FolioBinary.run(["mirror", "http://127.0.0.1:9/files/", work.path("http")], environment: broken)
        XCTAssertEqual(http.status, 1)
        XCTAssertEqual(http.stderrLines, ["mirror:\(work.path("http")): failed: cannot load libcurl, which HTTP and WebDAV need (\(work.path("libs"))/libcurl.so.4: invalid ELF header); install the libcurl4 package"])

        let sftp = FolioBinary.run(["mirror", "sftp://127.0.0.1:9/files", work.path("sftp")], environment: broken)
        XCTAssertEqual(sftp.status, 1)
        XCTAssertEqual(sftp.stderrLines, ["mirror:\(work.path("sftp")): failed: cannot load libssh2, which SFTP needs (\(work.path("libs"))/libssh2.so.1: invalid ELF header); install the libssh2-1 package"])
    }

    /// A source folder that cannot be read is named, nothing is removed, and the exit code says the mirror is
    /// not in step (3), not that all went well.
    func testAnUnreadableSourceFolderExitsThreeAndRemovesNothing() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "locked/b.txt", "b")
        FixtureTree.write(work.path("dst"), "gone.txt", "kept while the listing is incomplete")
        chmod(work.path("state"), 0o777)
        _ = try? LoopbackServer.run("chmod", ["-R", "a+rwX", work.path("dst")])
        chmod(work.path("src/locked"), 0o000)
        defer { chmod(work.path("src/locked"), 0o755) }
        let outcome = FolioBinary.run(["mirror", "--force", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(outcome.status, 3, "\(outcome.stderrLines)")
        XCTAssertTrue(outcome.stdoutLines.contains("mirror:\(work.path("dst")): cannot list locked: Permission denied; make it readable by nobody"), "\(outcome.stdoutLines)")
        XCTAssertEqual(try String(contentsOfFile: work.path("dst/a.txt"), encoding: .utf8), "a")
        XCTAssertTrue(FileManager.default.fileExists(atPath: work.path("dst/gone.txt")), "nothing removed on an incomplete listing")
        let target = "mirror:\(work.path("dst"))"
        XCTAssertTrue(outcome.stdoutLines.contains("\(target): a part of the source could not be listed (cannot list locked: Permission denied; make it readable by nobody); nothing there was copied or removed, and 1 removal held back; fix it at the source as said above, or exclude it; the next run tries again"),
                      "\(outcome.stdoutLines)")

        // The next run has nothing else to do: it still says so, and scripts and status count it as failed.
        let again = FolioBinary.run(["mirror", "--json", work.path("src"), work.path("dst")], environment: environment, unprivileged: true)
        XCTAssertEqual(again.status, 3, "\(again.stderrLines)")
        XCTAssertEqual(again.events.last?["failed"] as? Int, 1, again.stdout)
        let status = FolioBinary.run(["status"], environment: environment)
        XCTAssertTrue(status.stdout.contains(", 1 failed"), status.stdout)
    }

    /// A first run that fails (here a mistyped source) takes away the folder it made for the destination, with
    /// its `.folio`; a folder that was there before keeps all it held.
    func testAFailedFirstRunLeavesNoNewFolderBehind() throws {
        let typo = FolioBinary.run(["mirror", work.path("no-such-source"), work.path("fresh")], environment: environment)
        XCTAssertEqual(typo.status, 1, typo.stdout)
        XCTAssertEqual(typo.stderrLines, ["mirror:\(work.path("fresh")): failed: source folder \(work.path("no-such-source")) does not exist; check the path (is the share mounted?)"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("fresh")), "the new destination is gone")

        FixtureTree.write(work.path("kept"), "mine.txt", "the user's")
        let existing = FolioBinary.run(["mirror", work.path("no-such-source"), work.path("kept")], environment: environment)
        XCTAssertEqual(existing.status, 1, existing.stdout)
        XCTAssertEqual(FixtureTree.read(work.path("kept/mine.txt")), Array("the user's".utf8))
        XCTAssertTrue(FileManager.default.fileExists(atPath: work.path("kept/.folio/lock")), "a folder folio did not make is left as it was")

        // A destination that is a link to an empty folder (a mountpoint reached through a link) is left as empty
        // as it was found, the link kept. The `.folio` the run made there stayed.
        FixtureTree.makeFolder(work.path(""), "mountpoint")
        XCTAssertEqual(symlink(work.path("mountpoint"), work.path("linked")), 0)
        let linked = FolioBinary.run(["mirror", work.path("no-such-source"), work.path("linked")], environment: environment)
        XCTAssertEqual(linked.status, 1, linked.stdout)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path("mountpoint")), [])
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: work.path("linked")), work.path("mountpoint"))
    }

    /// `--bwlimit` holds a local copy to its rate (a NAS share mounted here is a network link too), the file
    /// arrives exact, and a limit that is not one is a usage error. A lower bound on the time only: noise cannot
    /// make it fail, and without the limit the copy takes milliseconds.
    func testABandwidthLimitHoldsALocalCopyToItsRate() throws {
        let content = FixtureTree.bytes(count: 96 << 10, seed: 3)
        FixtureTree.write(work.path("src"), "big.bin", content)
        let started = ContinuousClock.now
        let paced = FolioBinary.run(["mirror", "--bwlimit", "32K", work.path("src"), work.path("dst")], environment: environment)
        let took = ContinuousClock.now - started
        XCTAssertEqual(paced.status, 0, paced.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/big.bin")), content)
        XCTAssertGreaterThanOrEqual(took, .milliseconds(2_500), "96 KiB at 32 KiB/s take 3 s")

        let wrong = FolioBinary.run(["mirror", "--bwlimit", "fast", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(wrong.status, 2)
        XCTAssertEqual(wrong.stderrLines, ["folio: --bwlimit \"fast\" is not a rate of at least 1 KiB/s; write a number in KiB/s (500) or one with a unit (500K, 2M, 1.5MiB/s)"])
    }

    /// Text a server sends that reaches a line of output (here a WebDAV status with a newline and an escape
    /// sequence in it) is shown escaped: it forged a whole line of its own, and could drive the terminal.
    func testAServersTextCannotForgeALineOrDriveTheTerminal() throws {
        let port = try LoopbackServer.freePort()
        let script = #"""
        import http.server, sys
        class H(http.server.BaseHTTPRequestHandler):
            def log_message(self, *a): pass
            def do_PROPFIND(self):
                if not self.path.rstrip("/").endswith("/src"):
                    self.send_response(403); self.send_header("Content-Length", "0"); self.end_headers(); return
                status = "HTTP/1.1 403 x\nmirror:forged: 0 failed\x1b[2J"
                body = ('<?xml version="1.0"?><D:multistatus xmlns:D="DAV:">'
                    '<D:response><D:href>/src/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>'
                    '<D:response><D:href>/src/sub/</D:href><D:propstat><D:prop><D:resourcetype/></D:prop><D:status>' + status + '</D:status></D:propstat></D:response>'
                    '</D:multistatus>').encode()
                self.send_response(207); self.send_header("Content-Type", "application/xml"); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
        http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
        """#
        let pid = try LoopbackServer.spawn("/usr/bin/python3", ["-c", script, String(port)], output: work.path("server.log"))
        defer { LoopbackServer.stop(pid: pid) }
        try LoopbackServer.waitForPort(port, name: "WebDAV stub", log: work.path("server.log"))
        let outcome = FolioBinary.run(["mirror", "http://127.0.0.1:\(port)/src/", work.path("dst")], environment: environment)
        let lines = outcome.stdoutLines + outcome.stderrLines
        XCTAssertFalse(lines.contains { $0.hasPrefix("mirror:forged") }, outcome.stdout + outcome.stderr)
        XCTAssertFalse((outcome.stdout + outcome.stderr).contains("\u{1B}"), outcome.stdout + outcome.stderr)
        XCTAssertTrue(lines.contains { $0.contains("403 x\\x0amirror:forged: 0 failed\\x1b[2J") }, outcome.stdout + outcome.stderr)
    }

    /// A run from another source that fails (a mistyped path) or is refused (an empty folder) leaves the target's
    /// record as it was: the guard against a drive not mounted still holds for its usual source. (Each used to
    /// start the record over at once, and the usual source then filled the empty mountpoint again.) A run from
    /// another source that goes on starts it over, and plans as a first run: the files already there adopted.
    func testARunFromAnotherSourceThatFailsOrIsRefusedKeepsTheRecordAndItsGuard() throws {
        for root in ["src", "other"] {
            FixtureTree.write(work.path(root), "a.txt", "a", mtime: (1_600_000_000, 0))
            FixtureTree.write(work.path(root), "b.txt", "b", mtime: (1_600_000_000, 0))
        }
        FixtureTree.write(work.path("other"), "c.txt", "c")
        FixtureTree.makeFolder(work.path(""), "empty")
        let path = work.path("usb")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), path], environment: environment).status, 0)
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("nosuch"), path], environment: environment).status, 1)
        let empty = FolioBinary.run(["mirror", work.path("empty"), path], environment: environment)
        XCTAssertEqual(empty.status, 4, empty.stdout)

        XCTAssertEqual(rename(path, work.path("usb-away")), 0)
        FixtureTree.makeFolder(work.path(""), "usb")
        let refused = FolioBinary.run(["mirror", work.path("src"), path], environment: environment)
        XCTAssertEqual(refused.status, 4, refused.stdout)
        XCTAssertEqual(refused.stderrLines.first?.hasPrefix("mirror:\(path): refused: destination \(path) holds nothing of folio's earlier runs (they left 2 entries"), true, refused.stderr)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: path), [])

        XCTAssertEqual(rmdir(path), 0)
        XCTAssertEqual(rename(work.path("usb-away"), path), 0)
        let other = FolioBinary.run(["mirror", work.path("other"), path], environment: environment)
        XCTAssertEqual(other.status, 0, other.stderr)
        XCTAssertEqual(other.stdoutLines.last?.hasPrefix("mirror:\(path): 1 added"), true, other.stdout)
        XCTAssertEqual(FixtureTree.read(work.path("usb/c.txt")), Array("c".utf8))
        XCTAssertEqual(FixtureTree.listing(work.path("usb/.folio/trash")), [], "the files already there were adopted")
    }

    /// A target pointed at another source replaces and removes the files Folio wrote there as its own: to the
    /// trash, as always, but not as "local files that folio did not write" (it said so of each, as its record had
    /// started over). A file edited here is still one, and a file the other source holds alike is adopted.
    func testARunFromAnotherSourceKnowsTheFilesFolioWroteThere() throws {
        for (name, content) in [("same.txt", "same"), ("changed.txt", "one"), ("gone.txt", "gone"), ("edited.txt", "theirs")] {
            FixtureTree.write(work.path("src"), name, content, mtime: (1_600_000_000, 0))
        }
        FixtureTree.write(work.path("other"), "same.txt", "same", mtime: (1_600_000_000, 0))
        FixtureTree.write(work.path("other"), "changed.txt", "two!", mtime: (1_600_000_100, 0))
        FixtureTree.write(work.path("other"), "edited.txt", "new one", mtime: (1_600_000_100, 0))
        let path = work.path("dst")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), path], environment: environment).status, 0)
        FixtureTree.write(path, "edited.txt", "edited here")

        let other = FolioBinary.run(["mirror", work.path("other"), path], environment: environment)
        XCTAssertEqual(other.status, 0, other.stderr)
        let target = "mirror:\(path)"
        XCTAssertEqual(other.stdoutLines.filter { $0.hasPrefix("\(target): ") }.map { $0.replacingOccurrences(of: #" in [0-9.]+ m?s"#, with: "", options: .regularExpression) }
                           .map { $0.replacingOccurrences(of: #"trash/[^)]*"#, with: "trash/RUN", options: .regularExpression) },
                       ["\(target): 2 updated, 1 removed (in trash), 11 B",
                        "\(target): 1 local file that folio did not write or that changed here was moved to the trash: edited.txt (kept in \(path)/.folio/trash/RUN)"],
                       other.stdout)
        XCTAssertEqual(FixtureTree.listing(path), ["changed.txt", "edited.txt", "same.txt"])
        XCTAssertEqual(FixtureTree.read(work.path("dst/changed.txt")), Array("two!".utf8))
        let trash = try XCTUnwrap(try FileManager.default.contentsOfDirectory(atPath: work.path("dst/.folio/trash")).first)
        XCTAssertEqual(FixtureTree.listing(work.path("dst/.folio/trash/\(trash)")), ["changed.txt", "edited.txt", "gone.txt"])
        XCTAssertEqual(FixtureTree.read(work.path("dst/.folio/trash/\(trash)/edited.txt")), Array("edited here".utf8))
        XCTAssertEqual(FixtureTree.read(work.path("dst/.folio/trash/\(trash)/changed.txt")), Array("one".utf8))

        // The record is the new source's now: a second run from it has nothing to do.
        let again = FolioBinary.run(["mirror", work.path("other"), path], environment: environment)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(again.stdoutLines.last?.hasPrefix("\(target): unchanged"), true, again.stdout)
    }

    /// A first run from another source stopped midway (here in a large file, the smaller ones still queued behind
    /// it) leaves the record started over: the next run still knows the files Folio wrote from the old source, and
    /// replaces them as such. It reported every one as "a local file that folio did not write".
    func testARunFromAnotherSourceStoppedMidwayStillKnowsTheFilesFolioWrote() throws {
        for index in 1...5 {
            FixtureTree.write(work.path("src"), "f\(index).txt", "from the first source \(index)", mtime: (1_600_000_000, 0))
            FixtureTree.write(work.path("other"), "f\(index).txt", "from the other one \(index)", mtime: (1_600_000_100, 0))
        }
        FixtureTree.write(work.path("other"), "big.bin", FixtureTree.bytes(count: 8 << 20, seed: 3))
        let path = work.path("dst")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), path], environment: environment).status, 0)

        let stopped = stopOnceAMebibyteIsInPartialFiles(["mirror", "--bwlimit", "1MB", "--transfers", "1", work.path("other"), path])
        XCTAssertEqual(stopped.status, 1, stopped.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/f1.txt")), Array("from the first source 1".utf8), "still queued behind the large file")

        let again = FolioBinary.run(["mirror", work.path("other"), path], environment: environment)
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertFalse(again.stdout.contains("did not write"), again.stdout)
        XCTAssertEqual(again.stdoutLines.last?.hasPrefix("mirror:\(path): 1 added, 5 updated, "), true, again.stdout)
        XCTAssertEqual(FixtureTree.read(work.path("dst/f1.txt")), Array("from the other one 1".utf8))
    }

    /// A run that changes no file says what it did: records alone for a mirror moved elsewhere and mirrored
    /// there (its files taken as they are), times and records once a folder's time is set back. Both said "times
    /// and records brought up to date".
    func testARunThatOnlyBringsRecordsUpToDateSaysSo() throws {
        FixtureTree.write(work.path("src"), "sub/a.txt", "a", mtime: (1_600_000_000, 0))
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment).status, 0)
        XCTAssertEqual(rename(work.path("dst"), work.path("moved")), 0)
        let moved = FolioBinary.run(["mirror", work.path("src"), work.path("moved")], environment: environment)
        XCTAssertEqual(moved.status, 0, moved.stderr)
        XCTAssertEqual(moved.stdoutLines.last?.hasPrefix("mirror:\(work.path("moved")): records brought up to date, 0 B in "), true, moved.stdout)
        XCTAssertEqual(FixtureTree.listing(work.path("moved/.folio/trash")), [])

        FixtureTree.write(work.path("moved"), "sub/b.txt", "b")
        XCTAssertEqual(unlink(work.path("moved/sub/b.txt")), 0)
        let retimed = FolioBinary.run(["mirror", work.path("src"), work.path("moved")], environment: environment)
        XCTAssertEqual(retimed.status, 0, retimed.stderr)
        XCTAssertEqual(retimed.stdoutLines.last?.hasPrefix("mirror:\(work.path("moved")): times and records brought up to date, 0 B in "), true, retimed.stdout)
    }

    /// A mirror whose `.folio` was deleted still holds its files: the refusal says so rather than asking whether
    /// the drive is mounted, and `--force` takes the files there as they are (adopted, nothing fetched again).
    func testAMirrorWhoseFolioFolderWasDeletedIsRefusedWithItsOwnLine() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "b.txt", "b")
        FixtureTree.write(work.path("src"), "sub/c.txt", "c")
        let path = work.path("dst")
        XCTAssertEqual(FolioBinary.run(["mirror", work.path("src"), path], environment: environment).status, 0)
        try FileManager.default.removeItem(atPath: work.path("dst/.folio"))
        let refused = FolioBinary.run(["mirror", work.path("src"), path], environment: environment)
        XCTAssertEqual(refused.status, 4, refused.stdout)
        XCTAssertEqual(refused.stderrLines, ["mirror:\(path): refused: destination \(path) lacks .folio/partial, which folio's earlier runs left there with 4 entries in all (its top level holds 3 now): is it the folder folio mirrored into, with its .folio removed, or another drive mounted there? nothing was changed; if it is the mirror, run with --force to mirror into it again"])
        let forced = FolioBinary.run(["mirror", work.path("src"), path, "--force"], environment: environment)
        XCTAssertEqual(forced.status, 0, forced.stderr)
        XCTAssertEqual(forced.stdoutLines.last?.contains("added"), false, forced.stdout)
        XCTAssertEqual(FixtureTree.listing(work.path("dst/.folio/trash")), [])
    }

    /// A destination that holds nothing of the runs the state database remembers is a drive that is not mounted:
    /// whether the destination is the drive's mountpoint (left an empty folder) or a folder on it (then missing,
    /// with the folders above it), the run is refused, exit 4, leaves nothing behind on the disk beneath (not
    /// even the folders above, where an automounter would make the mountpoint), and mirrors again once the drive
    /// is back; `--force` mirrors into the folder anew.
    func testADestinationHoldingNothingOfEarlierRunsIsRefusedAsNotMounted() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "sub/b.txt", "b")
        for destination in ["usb", "usb/media", "usb/deep/media"] {
            let path = work.path(destination)
            let first = FolioBinary.run(["mirror", work.path("src"), path], environment: environment)
            XCTAssertEqual(first.status, 0, first.stderr)
            // Unmounted: the drive's files are elsewhere, its mountpoint an empty folder.
            XCTAssertEqual(rename(work.path("usb"), work.path("usb-away")), 0)
            FixtureTree.makeFolder(work.path(""), "usb")

            for dryRun in [false, true] {
                let refused = FolioBinary.run(["mirror", work.path("src"), path] + (dryRun ? ["--dry-run"] : []), environment: environment)
                XCTAssertEqual(refused.status, 4, refused.stdout)
                XCTAssertEqual(refused.stderrLines, [destination == "usb"
                    ? "mirror:\(path): refused: destination \(path) holds nothing of folio's earlier runs (they left 3 entries and .folio/partial there): is its drive mounted? nothing was changed; if the folder was emptied on purpose, run with --force to mirror into it anew"
                    : "mirror:\(path): refused: destination \(path) does not exist, though folio's earlier runs left 3 entries there: is its drive mounted? nothing was made; if it was removed on purpose, run with --force to mirror into it anew"])
                XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path("usb")), [], "nothing is left in the mountpoint")
            }

            // Mounted again, the run finds its files where it left them.
            XCTAssertEqual(rmdir(work.path("usb")), 0)
            XCTAssertEqual(rename(work.path("usb-away"), work.path("usb")), 0)
            let back = FolioBinary.run(["mirror", work.path("src"), path], environment: environment)
            XCTAssertEqual(back.status, 0, back.stderr)
            XCTAssertEqual(back.stdoutLines.last?.hasPrefix("mirror:\(path): unchanged"), true, back.stdout)

            // Emptied on purpose (the whole folder, .folio too): --force mirrors it anew.
            try FileManager.default.removeItem(atPath: path)
            FixtureTree.makeFolder(path, "")
            let forced = FolioBinary.run(["mirror", "--force", work.path("src"), path], environment: environment)
            XCTAssertEqual(forced.status, 0, forced.stderr)
            XCTAssertEqual(FixtureTree.listing(path), ["a.txt", "sub/", "sub/b.txt"])
            try FileManager.default.removeItem(atPath: work.path("usb"))
        }
    }

    /// Ctrl-C while the source is still being listed (here, an HTTP server that never answers) stops the run at
    /// once, as "interrupted", rather than after the server's timeout and retries as "failed".
    func testCtrlCWhileTheSourceIsListedStopsTheRun() throws {
        let (listener, port) = try LoopbackServer.listeningSocket()
        defer { close(listener) }
        assertCtrlCDuringTheListingInterrupts("http://127.0.0.1:\(port)/x/")
    }

    /// Ctrl-C while an SSH server holds the log-in (it takes the connection and never answers) stops the run at
    /// once: the handshake's socket is shut down, and the run ends "interrupted", not "failed" after `--timeout`.
    func testCtrlCWhileAnSSHServerHoldsTheLogInStopsTheRun() throws {
        let (listener, port) = try LoopbackServer.listeningSocket()
        defer { close(listener) }
        // The listing's first session is connecting by then, or soon: the stop must cut it either way.
        assertCtrlCDuringTheListingInterrupts("sftp://127.0.0.1:\(port)/x", pause: 300_000)
    }

    /// A run that fails before it lists (its destination's `.folio/trash` is a file) gives up the SSH log-in it
    /// started ahead of the listing (`Source.prepare`): it ends at once with the destination's error, rather than
    /// waiting out `--timeout` on a server that holds the log-in (it takes the connection and never answers).
    func testARunThatFailsBeforeListingDoesNotWaitForTheLogInItStartedAhead() throws {
        let (listener, port) = try LoopbackServer.listeningSocket()
        defer { close(listener) }
        FixtureTree.write(work.path("dst"), ".folio/trash", "a file where the trash folder goes")
        let running = FolioBinary.start(["mirror", "sftp://127.0.0.1:\(port)/x", work.path("dst"), "--timeout", "600"], environment: environment)
        // Not a timing: the run ends at once or after the 600 s, and 60 s tells the two apart on any machine.
        let deadline = Date().addingTimeInterval(60)
        while running.process.isRunning, Date() < deadline { usleep(20_000) }
        if running.process.isRunning {
            kill(running.process.processIdentifier, SIGKILL)
            XCTFail("the run still waited on its log-in after 60 s")
        }
        running.process.waitUntilExit()
        let stderr = String(decoding: running.standardErrorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertEqual(running.process.terminationStatus, 1, stderr)
        XCTAssertEqual(stderr, "mirror:\(work.path("dst")): failed: cannot open \(work.path("dst"))/.folio/trash: Not a directory; a file or a link stands where a folder should be: move it aside\n")
    }

    /// A run stopped in the middle of a large file says how much its partial file holds: "0 files, 0 B" alone
    /// read as if the megabytes so far were lost.
    func testAnInterruptedRunSaysWhatItsPartialFilesHold() throws {
        FixtureTree.write(work.path("src"), "big.bin", FixtureTree.bytes(count: 8 << 20, seed: 9))
        let stopped = stopOnceAMebibyteIsInPartialFiles(["mirror", "--bwlimit", "1MB", work.path("src"), work.path("dst")])
        // The lines of a stop go to standard error, as a failure's do (a run that did not end as asked).
        XCTAssertEqual(stopped.status, 1, stopped.stderr)
        let line = stopped.stderr.split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(line.hasPrefix("mirror:\(work.path("dst")): interrupted after 0 files, 0 B, and "), line)
        XCTAssertTrue(line.hasSuffix(" MiB in partial files; the next run resumes"), line)
        XCTAssertGreaterThanOrEqual(bytesInPartialFiles(of: work.path("dst")), 1 << 20, "the partial file was kept")
    }

    /// What the partial files of the destination `path` hold, in bytes.
    private func bytesInPartialFiles(of path: String) -> Int {
        let partials = path + "/.folio/partial"
        return FixtureTree.listing(partials).filter { $0.hasSuffix(".part") }.compactMap { name -> Int? in
            var info = stat()
            return stat(partials + "/" + name, &info) == 0 ? Int(info.st_size) : nil
        }.reduce(0, +)
    }

    /// Runs folio with `arguments` (a mirror into `work.path("dst")`, held back by `--bwlimit`), stops it with
    /// SIGINT once a mebibyte has arrived in its partial files, and returns its exit status and standard error.
    private func stopOnceAMebibyteIsInPartialFiles(_ arguments: [String]) -> (status: Int32, stderr: String) {
        let running = FolioBinary.start(arguments, environment: environment)
        while running.process.isRunning, bytesInPartialFiles(of: work.path("dst")) < 1 << 20 { usleep(20_000) }
        kill(running.process.processIdentifier, SIGINT)
        let stderr = String(decoding: running.standardErrorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        running.process.waitUntilExit()
        return (running.process.terminationStatus, stderr)
    }

    /// A hang-up (the terminal closed, the SSH connection dropped) stops a run by hand as SIGTERM does: the files
    /// done are kept and counted, the run is recorded as interrupted, exit 1. It ended the process at once.
    func testAHangUpStopsARunCleanly() throws {
        var current = sigaction()
        sigaction(SIGHUP, nil, &current)
        if unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == 1 {
            throw XCTSkip("the tests run with SIGHUP ignored (nohup), which folio keeps, as it should")
        }
        for index in 0..<8 { FixtureTree.write(work.path("src"), "f\(index).bin", FixtureTree.bytes(count: 200_000, seed: UInt64(index))) }
        let running = FolioBinary.start(["mirror", "--json", "--bwlimit", "400K", work.path("src"), work.path("dst")], environment: environment)
        var seen = Data()
        let output = running.standardOutputPipe.fileHandleForReading
        output.read(into: &seen, until: "\"event\":\"file-done\"")
        kill(running.process.processIdentifier, SIGHUP)
        seen.append(output.readDataToEndOfFile())
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationStatus, 1)
        let done = try XCTUnwrap(String(decoding: seen, as: UTF8.self).split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
        XCTAssertEqual(done["result"] as? String, "interrupted", "\(done)")
        let kept = FixtureTree.listing(work.path("dst")).filter { $0.hasSuffix(".bin") }.count
        XCTAssertGreaterThan(kept, 0)
        XCTAssertEqual(done["downloaded"] as? Int, kept, "\(done)")
        // A signal that is not a Ctrl-C is not answered with what a second Ctrl-C would do.
        XCTAssertTrue(String(decoding: seen, as: UTF8.self).contains(#""message":"stopping: the files in flight keep their partial files for the next run""#),
                      String(decoding: seen, as: UTF8.self))
    }

    /// Mirrors `source` with a 60 s timeout, sends SIGINT `pause` µs after the listing began (its event is out,
    /// so the stop handler is in place), and checks that the run ends interrupted (exit 1) and leaves no folder.
    private func assertCtrlCDuringTheListingInterrupts(_ source: String, pause: useconds_t = 0, file: StaticString = #filePath, line: UInt = #line) {
        let running = FolioBinary.start(["mirror", "--json", "--timeout", "60", source, work.path("dst")], environment: environment)
        var seen = Data()
        let output = running.standardOutputPipe.fileHandleForReading
        output.read(into: &seen, until: "\"stage\":\"listing\"")
        if pause > 0 { usleep(pause) }
        kill(running.process.processIdentifier, SIGINT)
        seen.append(output.readDataToEndOfFile())
        running.process.waitUntilExit()
        XCTAssertEqual(running.process.terminationStatus, 1, file: file, line: line)
        let done = String(decoding: seen, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        XCTAssertTrue(done.contains("\"event\":\"target-done\"") && done.contains("\"result\":\"interrupted\""), done, file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")), "nothing left behind", file: file, line: line)
    }

    /// Where /proc is not mounted (a chroot, a bare container), Swift's `CommandLine` is empty (every command line
    /// crashed on it) and libdispatch's thread pool stops the process when it looks there, at a random moment of a
    /// run. Folio says so in one line, exit 1, before it does anything.
    func testWhereProcIsNotMountedFolioSaysSoInOneLine() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
            throw XCTSkip("hiding /proc needs root and unshare")
        }
        FixtureTree.write(work.path("src"), "a.txt", "alpha\n")
        let withoutProc = ["/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", "umount -l /proc && exec \"$@\"", "sh"]
        for arguments in [["--version"], ["mirror", work.path("src"), work.path("dst")]] {
            let outcome = FolioBinary.run(arguments, environment: environment, launcher: withoutProc)
            XCTAssertEqual(outcome.status, 1, "\(arguments): \(outcome.stderr)")
            XCTAssertEqual(outcome.stderrLines, ["folio: /proc is not mounted here, and folio needs it (Swift reads the command line there, and its thread pool watches itself there); mount it (mount -t proc proc /proc) or run folio where it is"], "\(arguments)")
            XCTAssertEqual(outcome.stdout, "")
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")), "nothing made")
    }

    /// A run waiting for the lock of a folder whose holder then takes it away (a failed first run) does not keep
    /// a lock on the unlinked file, which would exclude no one: it takes the new lock file, and mirrors.
    func testARunWaitingForAFolderThatItsMakerTakesAwayLocksTheNewOne() throws {
        // An SSH server that never answers: the first run holds the new folder's lock until its handshake times out.
        let (listener, port) = try LoopbackServer.listeningSocket()
        defer { close(listener) }
        FixtureTree.write(work.path("src"), "a.txt", "a")

        let maker = FolioBinary.start(["mirror", "sftp://127.0.0.1:\(port)/x", work.path("shared"), "--timeout", "3"], environment: environment)
        let deadline = Date().addingTimeInterval(20)
        while !FileManager.default.fileExists(atPath: work.path("shared/.folio/lock")), Date() < deadline { usleep(20_000) }
        let waiter = FolioBinary.run(["mirror", work.path("src"), work.path("shared")], environment: environment)
        maker.process.waitUntilExit()
        XCTAssertEqual(maker.process.terminationStatus, 1)
        XCTAssertEqual(waiter.status, 0, waiter.stderr)
        XCTAssertTrue(waiter.stderr.contains("waiting"), "it waited for the first run: \(waiter.stderr)")
        XCTAssertEqual(FixtureTree.read(work.path("shared/a.txt")), Array("a".utf8))
        XCTAssertTrue(FileManager.default.fileExists(atPath: work.path("shared/.folio/lock")), "the lock it held is the file at that name")
    }

    /// The lock's note (who holds it) is written over the last one in place: whatever the last note's length, the
    /// file then holds this run's note and nothing of the old one.
    func testTheLockNoteReplacesALongerOrShorterOldOne() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        let target = "mirror:\(work.path("dst"))"
        for old in ["4194304 1700000000 an old target with a much longer name than this one has\n", "1 2 x\n"] {
            FixtureTree.write(work.path("dst"), ".folio/lock", old)
            let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
            XCTAssertEqual(outcome.status, 0, outcome.stderr)
            let note = String(decoding: FixtureTree.read(work.path("dst/.folio/lock")) ?? [], as: UTF8.self)
            let fields = note.split(separator: " ", maxSplits: 2)
            XCTAssertEqual(fields.count, 3, note)
            XCTAssertNotNil(Int32(fields[0]), "a process id: \(note)")
            XCTAssertLessThan(abs((Int(fields[1]) ?? 0) - Int(Date().timeIntervalSince1970)), 600, "the time it was taken: \(note)")
            XCTAssertEqual(fields.count == 3 ? String(fields[2]) : "", target + "\n", "the target's name, then nothing of the old note")
        }
    }

    /// A full disk fails the run in one line that says what to do, and leaves no file half-written under its name.
    func testAFullDiskFailsTheRunInOneLine() throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a tmpfs needs root") }
        FixtureTree.write(work.path("src"), "big.bin", FixtureTree.bytes(count: 3 << 20, seed: 5))
        FixtureTree.makeFolder(work.path("dst"), "")
        try LoopbackServer.run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", work.path("dst")])
        defer { _ = try? LoopbackServer.run("umount", ["--lazy", work.path("dst")]) }
        let outcome = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(outcome.status, 1)
        XCTAssertEqual(outcome.stderrLines, ["mirror:\(work.path("dst")): failed: cannot write the partial file for big.bin: No space left on device; free some space on the destination's disk (df -h shows the space, df -i the room for files)"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst/big.bin")))

        // The file that could not fit leaves the source: its partial, which filled the disk, goes before the run
        // writes anything, so the other files have the room (it went only after the downloads, which then failed).
        unlink(work.path("src/big.bin"))
        FixtureTree.write(work.path("src"), "mid.bin", FixtureTree.bytes(count: 600 << 10, seed: 6))
        let after = FolioBinary.run(["mirror", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(after.status, 0, after.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/mid.bin")), FixtureTree.read(work.path("src/mid.bin")))

        // Replaced by another file of its size, mid.bin goes to the trash and the new one does not fit beside it.
        // Lowering trash-days empties the trash before the downloads, so the new file then has the room.
        unlink(work.path("src/mid.bin"))
        FixtureTree.write(work.path("src"), "new.bin", FixtureTree.bytes(count: 600 << 10, seed: 7))
        let full = FolioBinary.run(["mirror", "--max-delete", "100%", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(full.status, 1, full.stdout)
        let emptied = FolioBinary.run(["mirror", "--trash-days", "0", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(emptied.status, 0, emptied.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("dst/new.bin")), FixtureTree.read(work.path("src/new.bin")))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path("dst/.folio/trash")), [])
    }

    /// A destination whose filesystem goes away under the run (a USB drive pulled: here exFAT's FUSE process is
    /// killed, while `--bwlimit` keeps the run going) ends the run at the first error, exit 1, with one line that
    /// says so; it was one line per file left, and exit 3.
    func testADestinationThatGoesAwayMidRunEndsTheRunInOneLine() throws {
        let image = try MountedImage(in: work, megabytes: 32, mkfs: ["mkfs.exfat"], mounting: .fuse(helper: "mount.exfat-fuse"))
        defer { try? image.unmount() }
        for i in 0..<20 { FixtureTree.write(work.path("src"), "f\(i).bin", FixtureTree.bytes(count: 32 << 10, seed: UInt64(i))) }
        let mountPoint = image.mountPoint
        Thread.detachNewThread {
            usleep(1_500_000)
            // Only this test's own FUSE process: its command line ends with this test's mount point.
            _ = try? LoopbackServer.run("pkill", ["-KILL", "-f", "exfat-fuse .* \(mountPoint)$"])
        }
        let outcome = FolioBinary.run(["mirror", "--bwlimit", "64", work.path("src"), mountPoint + "/m"], environment: environment)
        XCTAssertEqual(outcome.status, 1, outcome.stdout + outcome.stderr)
        XCTAssertEqual(outcome.stderrLines.count, 1, outcome.stderr)
        XCTAssertTrue(outcome.stderrLines.first?.hasSuffix("the destination's filesystem is gone (a drive unplugged, a FUSE mount ended, a network share dropped): mount it again, and the next run finishes the work") == true,
                      outcome.stderr)
    }

    /// A negative number for a numeric flag is the flag's value, answered in one line (exit 2), not taken for an
    /// unknown option with usage text.
    func testANegativeNumberForAFlagGetsOneLine() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        for (flag, line) in [("--trash-days", "folio: --trash-days must be a whole number from 0 to 36500"),
                             ("--transfers", "folio: --transfers must be a whole number from 1 to 64"),
                             ("--timeout", "folio: --timeout must be a whole number from 1 to 3600")] {
            let outcome = FolioBinary.run(["mirror", flag, "-1", work.path("src"), work.path("dst")], environment: environment)
            XCTAssertEqual(outcome.status, 2, flag)
            XCTAssertEqual(outcome.stderrLines, [line])
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")))
    }

    /// An empty argument, as a script's unset "$DEST" gives, is not the working folder (whose entries the run
    /// would remove): exit 2 and one line, and nothing is written.
    func testAnEmptySourceOrDestinationIsAUsageError() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("here"), "mine.txt", "mine")
        for (arguments, line) in [(["mirror", work.path("src"), ""], "folio: DEST is empty (an unset variable in a script?); give the folder or URL"),
                                  (["mirror", "", work.path("dst")], "folio: SOURCE is empty (an unset variable in a script?); give the folder or URL")] {
            let outcome = FolioBinary.run(arguments, environment: environment, currentDirectory: work.path("here"))
            XCTAssertEqual(outcome.status, 2, outcome.stderr)
            XCTAssertEqual(outcome.stderrLines, [line])
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: work.path("here")), ["mine.txt"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")))
    }

    /// Standard error a pipe whose reader has gone (`folio … 2>&1 | head -0`): the documented exit code, not
    /// SIGPIPE's 141 (before Folio ignored SIGPIPE) nor SIGILL's 132 (Foundation's write traps on EPIPE).
    func testAClosedStandardErrorChangesNoExitCode() throws {
        let script = """
            import os, subprocess, sys
            reader, writer = os.pipe()
            os.close(reader)
            for arguments in (["mirror", "", sys.argv[2]], ["sync", "--now", "--config", sys.argv[3]], ["bogus"]):
                print(subprocess.run([sys.argv[1]] + arguments, stdout=subprocess.DEVNULL, stderr=writer).returncode)
            """
        let outcome = try LoopbackServer.run("/usr/bin/python3", ["-c", script, FolioBinary.path, work.path("dst"), work.path("missing.toml")])
        XCTAssertEqual(outcome.split(separator: "\n"), ["2", "2", "2"])
    }

    /// Two values that got a misleading line: a --webdav value other than auto, true or false ("strings need
    /// quotes"), and a --config that is a folder ("check its permissions").
    func testAWrongWebDAVValueOrAFolderForConfigGetsALineThatSaysSo() throws {
        let webdav = FolioBinary.run(["mirror", "--webdav", "maybe", "http://127.0.0.1:1/", work.path("dst")], environment: environment)
        XCTAssertEqual(webdav.status, 2)
        XCTAssertEqual(webdav.stderrLines, ["folio: --webdav is auto, true or false, not \"maybe\""])
        // A flag's mistake names the flag as it is typed, not the configuration key behind it.
        let maxDelete = FolioBinary.run(["mirror", "--max-delete", "abc", work.path("src"), work.path("dst")], environment: environment)
        XCTAssertEqual(maxDelete.status, 2)
        XCTAssertEqual(maxDelete.stderrLines, ["folio: --max-delete is a count (--max-delete 100) or a percentage from 0% to 100% (--max-delete 50%), not \"abc\""])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("dst")))
        FixtureTree.makeFolder(work.path(""), "conf.d")
        let folder = FolioBinary.run(["sync", "--now", "--config", work.path("conf.d")], environment: environment)
        XCTAssertEqual(folder.status, 2)
        XCTAssertEqual(folder.stderrLines, ["folio: \(work.path("conf.d")): this is a folder, not a configuration file; pass --config FILE with the file's path"])
    }

    func testABadConfigNamesFileAndLine() throws {
        FixtureTree.write(work.path(""), "folio.toml", "[[target]]\nname = \"a\"\nsorce = \"/x\"\n")
        let outcome = FolioBinary.run(["sync", "--now", "--config", work.path("folio.toml")], environment: environment)
        XCTAssertEqual(outcome.status, 2)
        XCTAssertEqual(outcome.stderrLines, ["folio: \(work.path("folio.toml")):3: unknown key \"sorce\"; did you mean \"source\"?"])
    }

    /// A run that fails before it starts (here its folder cannot be locked: `.folio` is a file) is recorded like
    /// any failed run: `folio status` showed the last success instead.
    func testARunThatFailsBeforeItStartsIsWhatStatusShows() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        let config = oneTargetConfig("docs")
        XCTAssertEqual(FolioBinary.run(["sync", "--now"] + config, environment: environment).status, 0)
        try FileManager.default.removeItem(atPath: work.path("dst/.folio"))
        FixtureTree.write(work.path("dst"), ".folio", "not a folder")
        let failed = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(failed.status, 1)
        XCTAssertEqual(failed.stderrLines, ["docs: failed: cannot open \(work.path("dst/.folio")): Not a directory; a file or a link stands where a folder should be: move it aside"])
        let status = FolioBinary.run(["status"] + config, environment: environment)
        XCTAssertTrue(status.stdout.hasPrefix("docs: failed at "), status.stdout)
        XCTAssertTrue(status.stdout.contains("— cannot open \(work.path("dst/.folio")): Not a directory"), status.stdout)
    }

    /// Writes a configuration with one target, `docs` (src to dst), whose on-change runs `hook` with /bin/sh,
    /// and returns the arguments that point folio at it.
    private func hookedConfig(_ hook: String) -> [String] {
        oneTargetConfig("docs", extra: "on-change = [\"/bin/sh\", \"-c\", \"\(hook)\"]")
    }

    /// Writes `folio.toml` with one target, `name`, from `source` to `destination` (the work folder's src and dst
    /// unless given), with `extra` (a line of keys) as its line 5, and returns the arguments that point folio at it.
    @discardableResult
    private func oneTargetConfig(_ name: String, source: String = "src", destination: String = "dst", extra: String = "") -> [String] {
        FixtureTree.write(work.path(""), "folio.toml", """
            [[target]]
            name = "\(name)"
            source = "\(work.path(source))"
            destination = "\(work.path(destination))"
            \(extra)
            """)
        return ["--config", work.path("folio.toml")]
    }

    /// `on-change` runs after `folio sync --now` too (it ran only in the daemon), with the changed paths on its
    /// input, once the folder's lock is let go (the hook could not sync the folder itself), and with its output
    /// on standard error (a line of it broke `--json`'s NDJSON); a run that changed nothing runs no hook.
    func testSyncNowRunsTheOnChangeHook() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "sub/b.txt", "b")
        let hook = "cat > \(work.path("hook.out")); echo {target} >> \(work.path("hook.out")); "
            + "flock -n \(work.path("dst/.folio/lock")) true && echo free > \(work.path("lock.out")); echo refreshed the library"
        let config = hookedConfig(hook)
        let first = FolioBinary.run(["sync", "--now", "--json"] + config, environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(first.events.count, first.stdout.split(separator: "\n").count, "every line of standard output is an event\n\(first.stdout)")
        XCTAssertTrue(first.stderr.contains("refreshed the library"), first.stderr)
        XCTAssertEqual(FixtureTree.read(work.path("lock.out")), Array("free\n".utf8), "the lock is let go before the hook")
        let lines = (FixtureTree.read(work.path("hook.out")).map { String(decoding: $0, as: UTF8.self) } ?? "").split(separator: "\n")
        XCTAssertEqual(lines.last, "docs", "{target} in the command")
        XCTAssertEqual(lines.dropLast().sorted(), ["a.txt", "sub/b.txt"], "the changed paths, in the order they were installed")
        try FileManager.default.removeItem(atPath: work.path("hook.out"))
        let unchanged = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(unchanged.status, 0, unchanged.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("hook.out")), "nothing changed, no hook")
    }

    /// A hook that cannot start says so in one line, with what to fix, and without the daemon log's timestamp
    /// (a run by hand is read as it happens); the run itself succeeded.
    func testAHookThatCannotStartSaysWhatToFix() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        let config = oneTargetConfig("docs", extra: "on-change = [\"\(work.path("no-such-hook"))\"]")
        let outcome = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, ["warning: docs: on-change hook \(work.path("no-such-hook")) could not start: No such file or directory; fix the command in on-change (it is not retried; the next change runs it again)"])
    }

    /// 600 source files whose paths, a line each, pass a pipe's 64 KiB: a hook's input that cannot all wait in the pipe.
    private func writeMoreThanAPipeOfPaths() {
        let longName = String(repeating: "n", count: 120)
        for i in 0..<600 { FixtureTree.write(work.path("src"), "\(longName)-\(i).txt", "\(i)") }
    }

    /// A hook that does not read its input (`systemctl reload`, a script that ignores it) is a hook that
    /// succeeded: `sync --now` is not killed by SIGPIPE writing the paths to it (it exited 141, and the next run
    /// ran the hook again for the same paths). Over 64 KiB of paths, so that the write meets the closed pipe.
    func testAHookThatIgnoresItsInputSucceeds() throws {
        writeMoreThanAPipeOfPaths()
        let config = hookedConfig("exec 0<&-; echo ran > \(work.path("hook.out"))")
        let first = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stdout.hasPrefix("docs: 600 added, "), first.stdout)
        XCTAssertNotNil(FixtureTree.read(work.path("hook.out")), "the hook ran")
        try FileManager.default.removeItem(atPath: work.path("hook.out"))
        let unchanged = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(unchanged.status, 0, unchanged.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("hook.out")), "its paths were delivered: no hook")
    }

    /// A hook that ends while a child it started holds its standard input, unread (a service it launches), past a
    /// full pipe of paths: the run still ends, 5 s after the hook, and says what was not written (the write
    /// blocked for good before, and the target's next run with it).
    func testAHookWhoseChildHoldsItsInputStillEnds() throws {
        writeMoreThanAPipeOfPaths()
        let pidFile = work.path("child.pid")
        let config = hookedConfig("exec 3<&0; sleep 60 <&3 >/dev/null 2>&1 & echo $! > \(pidFile); exit 0")
        let running = FolioBinary.start(["sync", "--now"] + config, environment: environment)
        let deadline = Date().addingTimeInterval(20)
        while running.process.isRunning && Date() < deadline { usleep(50_000) }
        let endedOnItsOwn = !running.process.isRunning
        // The hook's child ends either way (which unblocks a folio stuck writing to it).
        let child = FixtureTree.read(pidFile).flatMap { pid_t(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) }
        XCTAssertNotNil(child, "the hook ran")
        if let child { kill(child, SIGKILL) }
        running.process.waitUntilExit()
        XCTAssertTrue(endedOnItsOwn, "folio ended within 20 s, with the hook's child still holding the hook's input")
        XCTAssertEqual(running.process.terminationStatus, 0)
        let stderr = String(decoding: running.standardErrorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        XCTAssertTrue(stderr.contains("held its input unread for 5.0 seconds; ") && stderr.contains(" of 600 paths were not written to it"), stderr)
    }

    /// A hook that hands its input to something it starts and ends: that reader, slow but reading, gets every path
    /// (the write gave up at the hook's end once the pipe had been full for 100 ms, and 92 of 600 were lost).
    func testAHookWhoseChildReadsItsInputSlowlyGetsEveryPath() throws {
        writeMoreThanAPipeOfPaths()
        let got = work.path("got")
        let config = hookedConfig("exec 3<&0; (while read p; do echo \\\"$p\\\" >> \(got); sleep 0.005; done <&3 >/dev/null 2>&1 &); exit 0")
        let first = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        var lines: [Substring] = []
        for _ in 0..<600 {
            lines = (FixtureTree.read(got).map { String(decoding: $0, as: UTF8.self) } ?? "").split(separator: "\n")
            if lines.count >= 600 { break }
            usleep(50_000)
        }
        XCTAssertEqual(lines.count, 600)
        XCTAssertEqual(Set(lines).count, 600)
    }

    /// Ctrl-C during `sync --now`'s hook (SIGINT to folio and to the hook, as a terminal sends it) keeps the
    /// run's paths: the next run's hook gets them with its own. A hook that ends on its own forgets them.
    func testPathsOfAHookCutShortByCtrlCReachTheNextRunsHook() throws {
        FixtureTree.write(work.path("src"), "a.txt", "a")
        FixtureTree.write(work.path("src"), "sub/b.txt", "b")
        FixtureTree.write(work.path(""), "slow", "")
        let hook = "cat >> \(work.path("paths.out")); echo $$ > \(work.path("hook.pid")); [ -e \(work.path("slow")) ] && exec sleep 30; true"
        let config = hookedConfig(hook)
        let running = FolioBinary.start(["sync", "--now"] + config, environment: environment)
        var hookPID: pid_t?
        for _ in 0..<200 where hookPID == nil {
            usleep(50_000)
            hookPID = FixtureTree.read(work.path("hook.pid")).flatMap { pid_t(String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        let pid = try XCTUnwrap(hookPID, "the hook started")
        // The hook first: Ctrl-C can end it before Folio's own handler has seen the signal.
        kill(pid, SIGINT)
        kill(running.process.processIdentifier, SIGINT)
        running.process.waitUntilExit()
        XCTAssertEqual(FixtureTree.read(work.path("paths.out")).map { String(decoding: $0, as: UTF8.self) }?.split(separator: "\n").sorted(), ["a.txt", "sub/b.txt"])

        try FileManager.default.removeItem(atPath: work.path("slow"))
        try FileManager.default.removeItem(atPath: work.path("paths.out"))
        FixtureTree.write(work.path("src"), "c.txt", "c")
        let next = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(next.status, 0, next.stderr)
        let lines = FixtureTree.read(work.path("paths.out")).map { String(decoding: $0, as: UTF8.self) }?.split(separator: "\n")
        XCTAssertEqual(lines?.count, 3, "\(lines ?? [])")
        XCTAssertEqual(lines?.prefix(2).sorted(), ["a.txt", "sub/b.txt"], "the cut-short hook's paths first")
        XCTAssertEqual(lines?.last, "c.txt", "then this run's")

        try FileManager.default.removeItem(atPath: work.path("paths.out"))
        let unchanged = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(unchanged.status, 0, unchanged.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("paths.out")), "all delivered: no hook")
    }

    /// Two targets whose destinations are one folder through a symlink would each trash the other's files on
    /// every run: the configuration is refused, as when the two are spelt alike, and nothing is written.
    func testTwoDestinationsThatAreOneFolderThroughASymlinkAreRefused() throws {
        FixtureTree.write(work.path("a"), "from-a", "a")
        FixtureTree.write(work.path("b"), "from-b", "b")
        FixtureTree.makeFolder(work.path("shared"), "")
        XCTAssertEqual(symlink(work.path("shared"), work.path("link")), 0)
        FixtureTree.write(work.path(""), "folio.toml", """
            [[target]]
            name = "one"
            source = "\(work.path("a"))"
            destination = "\(work.path("link"))"

            [[target]]
            name = "two"
            source = "\(work.path("b"))"
            destination = "\(work.path("shared"))"
            """)
        let outcome = FolioBinary.run(["sync", "--now", "two", "--config", work.path("folio.toml")], environment: environment)
        XCTAssertEqual(outcome.status, 2, outcome.stdout)
        // The line of its destination, as for every other configuration error; "also", as the folder is one.
        XCTAssertEqual(outcome.stderrLines, ["folio: \(work.path("folio.toml")):9: target \"two\": destination \(work.path("shared")) is also target \"one\"'s destination \(work.path("link")) (through a symbolic link: both are \(PathText.real(work.path("shared")))); give each target a folder of its own"])
        XCTAssertEqual(FixtureTree.listing(work.path("shared")), [], "nothing written")
    }

    /// A target named twice runs once: with `--parallel-targets` its second run waited on the first's lock and,
    /// with `--no-wait`, failed as "being synced by another folio process" (its own).
    func testATargetNamedTwiceRunsOnce() throws {
        FixtureTree.write(work.path("a"), "f", "f")
        let config = oneTargetConfig("t1", source: "a", destination: "mirror-a")
        let outcome = FolioBinary.run(["sync"] + config + ["--parallel-targets", "2", "--no-wait", "t1", "t1"], environment: environment)
        XCTAssertEqual(outcome.status, 0, outcome.stderr)
        XCTAssertEqual(outcome.stderrLines, [])
        XCTAssertEqual(outcome.stdoutLines.count, 1, outcome.stdout)
        XCTAssertTrue(outcome.stdout.hasPrefix("t1: 1 added, "), outcome.stdout)
    }

    func testSyncNowRunsManualTargetsAndGuardsExitFour() throws {
        for i in 0..<4 { FixtureTree.write(work.path("a"), "f\(i)", "\(i)") }
        FixtureTree.write(work.path("b"), "only", "b")
        FixtureTree.write(work.path(""), "folio.toml", """
            [[target]]
            name = "manual-one"
            source = "\(work.path("a"))"
            destination = "\(work.path("mirror-a"))"
            mode = "manual"

            [[target]]
            name = "auto-one"
            source = "\(work.path("b"))"
            destination = "\(work.path("mirror-b"))"
            mode = "automatic"
            """)
        let config = ["--config", work.path("folio.toml")]
        FixtureTree.write(work.path(""), "empty.toml", "# nothing yet\n")
        let empty = FolioBinary.run(["sync", "--now", "--config", work.path("empty.toml")], environment: environment)
        XCTAssertEqual(empty.status, 2)
        XCTAssertEqual(empty.stderrLines, ["folio: \(work.path("empty.toml")): no [[target]] in it; add one (config/folio.example.toml shows how)"])
        let first = FolioBinary.run(["sync", "--now"] + config, environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertTrue(first.stdout.hasPrefix("manual-one: 4 added, "), first.stdout)
        XCTAssertEqual(FixtureTree.listing(work.path("mirror-a")), ["f0", "f1", "f2", "f3"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: work.path("mirror-b")), "automatic targets wait for the daemon")

        for i in 0..<3 { unlink(work.path("a/f\(i)")) }
        let refused = FolioBinary.run(["sync", "--now", "manual-one"] + config, environment: environment)
        XCTAssertEqual(refused.status, 4)
        XCTAssertEqual(refused.stderrLines, ["manual-one: refused: would remove 3 of 4 entries in \(work.path("mirror-a")), more than max-delete (50%); nothing was changed; check that the source is complete and that the destination is the right folder, then run with --force to allow it"])
        XCTAssertEqual(FixtureTree.listing(work.path("mirror-a")).count, 4)

        // The dry run of the refused run lists what the guard holds back, then says it would be refused.
        let preview = FolioBinary.run(["sync", "--now", "manual-one", "--dry-run"] + config, environment: environment)
        XCTAssertEqual(preview.status, 4)
        XCTAssertEqual(preview.stdout.split(separator: "\n").filter { $0.contains("would remove f") }.sorted(),
                       ["manual-one: would remove f0", "manual-one: would remove f1", "manual-one: would remove f2"])
        XCTAssertEqual(preview.stderrLines, ["manual-one: refused: would remove 3 of 4 entries in \(work.path("mirror-a")), more than max-delete (50%), so a run stops before changing anything; the \"would\" lines are what it would do with --force"])
        XCTAssertEqual(FixtureTree.listing(work.path("mirror-a")).count, 4)

        let named = FolioBinary.run(["sync", "--now", "auto-one", "--json"] + config, environment: environment)
        XCTAssertEqual(named.status, 0, named.stderr)
        XCTAssertEqual(named.events.last?["result"] as? String, "synced")

        let status = FolioBinary.run(["status", "--json"] + config, environment: environment)
        XCTAssertEqual(status.status, 0, status.stderr)
        let results = Dictionary(uniqueKeysWithValues: status.events.map { ($0["target"] as? String ?? "", $0["result"] as? String ?? "") })
        XCTAssertEqual(results, ["manual-one": "refused", "auto-one": "synced"])
        XCTAssertFalse(status.events.contains { $0["configured"] != nil }, status.stdout)

        // Taken out of the configuration (renamed, say), a target's last run is still shown, marked as such.
        oneTargetConfig("manual-one", source: "a", destination: "mirror-a", extra: "mode = \"manual\"")
        let after = FolioBinary.run(["status"] + config, environment: environment)
        XCTAssertEqual(after.stdoutLines.filter { $0.hasPrefix("auto-one") }.map { $0.prefix(53) },
                       ["auto-one (no longer in the configuration): synced at "])
        let afterJSON = FolioBinary.run(["status", "--json"] + config, environment: environment)
        XCTAssertEqual(afterJSON.events.first { $0["target"] as? String == "auto-one" }?["configured"] as? Bool, false, afterJSON.stdout)
    }
}
