import FolioCore
import FolioTestSupport
import Foundation
import XCTest

/// The engine against `MemorySource` and a real destination folder.
final class SyncEngineTests: XCTestCase {
    var source: MemorySource!
    var state: MemoryStateStore!
    var destination: TemporaryDirectory!
    var target: TargetConfig!

    override func setUp() {
        source = MemorySource()
        state = MemoryStateStore()
        destination = TemporaryDirectory("engine-dest")
        target = TargetConfig(name: "t", source: "memory://", destination: destination.path)
        target.transfers = 3
    }

    // See `TemporaryDirectory`: the folder goes now, not at the process's end.
    override func tearDown() { destination = nil }

    private func run(force: Bool = false, dryRun: Bool = false) async -> RunReport {
        await SyncEngine(state: state, events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual, dryRun: dryRun, force: force))
    }

    private func content(_ relative: String) -> String? {
        FixtureTree.read(destination.path(relative)).map { String(decoding: $0, as: UTF8.self) }
    }

    private func trashed(_ relative: String) -> [String] {
        let trash = destination.path(".folio/trash")
        let runs = (try? FileManager.default.contentsOfDirectory(atPath: trash)) ?? []
        return runs.compactMap { run in FixtureTree.read(trash + "/" + run + "/" + relative).map { String(decoding: $0, as: UTF8.self) } }
    }

    /// With `transfers` unset, a far source (its quickest turn 5 ms or more) gets 8 download workers, a near one
    /// or one that cannot tell 4; a set `transfers` wins either way.
    func testUnsetTransfersFollowTheLinksRoundTrip() async throws {
        let cases: [(transfers: Int?, roundTrip: Duration?, workers: Int)] = [
            (nil, nil, 4), (nil, .microseconds(300), 4), (nil, .milliseconds(20), 8), (3, .milliseconds(20), 3), (6, nil, 6),
        ]
        for (transfers, roundTrip, workers) in cases {
            let source = MemorySource()
            for index in 0..<12 { source.setFile("f\(index)", "file \(index)") }
            source.roundTrip = roundTrip
            let destination = TemporaryDirectory("engine-workers")
            var target = TargetConfig(name: "t", source: "memory://", destination: destination.path)
            target.transfers = transfers
            let report = await SyncEngine(state: MemoryStateStore(), events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual))
            XCTAssertEqual(report.downloaded, 12)
            XCTAssertEqual(source.connections, workers, "transfers \(String(describing: transfers)), round trip \(String(describing: roundTrip))")
        }
    }

    /// Mirrors three files for a target with a hook, then changes the source so that the next run changes each in
    /// its own way: a retime (same validator, new time), a removal, a download over the old copy, and a new file.
    private func mirrorThreeFilesThenChangeTheSource() async {
        target.onChange = ["/bin/true"]
        source.setFile("retimed.txt", "same", mtime: FileTime(seconds: 1_600_000_000), validator: "v1")
        source.setFile("gone.txt", "gone")
        source.setFile("changed.txt", "one")
        let first = await run()
        XCTAssertEqual(first.downloaded, 3)
        source.setFile("retimed.txt", "same", mtime: FileTime(seconds: 1_600_000_100), validator: "v1")
        source.remove("gone.txt")
        source.setFile("changed.txt", "two!")
        source.setFile("new.txt", "new")
    }

    /// What the destination holds at `path`: its content and time in seconds, or "absent".
    private func held(_ path: String) -> String { Self.held(at: destination.path(path)) }

    private static func held(at full: String) -> String {
        guard let bytes = FixtureTree.read(full) else { return "absent" }
        return "\(String(decoding: bytes, as: UTF8.self)) \((FixtureTree.mtime(full) ?? 0) / 1_000_000_000)"
    }

    /// Every path a hooked run changes is kept for the hook while the destination still holds it as before (a
    /// crash just after a change must not lose its path), and only paths it changes are.
    func testAHookedRunKeepsEachPathBeforeItChangesIt() async throws {
        await mirrorThreeFilesThenChangeTheSource()
        let seen = Locked<[String: String]>([:])
        let root = destination.path
        state.observeKeptChanges { paths in
            for path in paths {
                let now = Self.held(at: root + "/" + path.description)
                seen.withLock { $0[path.description] = now }
            }
        }
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(Set(report.changedPaths.map(\.description)), ["retimed.txt", "gone.txt", "changed.txt", "new.txt"])
        XCTAssertEqual(seen.withLock { $0 }, ["retimed.txt": "same 1600000000", "gone.txt": "gone 1700000000",
                                              "changed.txt": "one 1700000000", "new.txt": "absent"])
        XCTAssertEqual(held("retimed.txt"), "same 1600000100")
        XCTAssertEqual(held("changed.txt"), "two! 1700000000")
        XCTAssertEqual(held("gone.txt"), "absent")
    }

    /// Paths that cannot be kept for the hook are not changed: the run fails, the destination is as it was, and
    /// the next run, able to keep them, makes the changes (the new files from their complete partial files).
    func testAHookedRunThatCannotKeepItsPathsChangesNothing() async throws {
        struct Full: Error {}
        state.observeKeptChanges { _ in throw Full() }
        target.onChange = ["/bin/true"]
        source.setFile("a.txt", "a")
        let first = await run()
        XCTAssertEqual(first.result, .failed)
        XCTAssertEqual(held("a.txt"), "absent")
        XCTAssertEqual(first.failures.map(\.path.description), ["a.txt"])
        XCTAssertTrue(first.failures[0].message.hasPrefix("left as it was: its path could not be kept for the on-change hook (cannot write the state database: "), first.failures[0].message)

        state.observeKeptChanges(nil)
        let downloads = source.downloads.count
        let again = await run()
        XCTAssertEqual(again.result, .synced)
        XCTAssertEqual(held("a.txt"), "a 1700000000")
        // Its bytes (all of them, as it is shorter than 64 KiB) are asked for again and compared with the partial
        // file's before it is installed: one request, and no second copy.
        XCTAssertEqual(source.downloads.map(\.1).suffix(from: downloads), [0], "installed from the partial file kept whole")

        await mirrorThreeFilesThenChangeTheSource()
        state.observeKeptChanges { _ in throw Full() }
        let second = await run()
        XCTAssertEqual(second.result, .failed)
        XCTAssertEqual(second.changedPaths, [])
        XCTAssertEqual(held("retimed.txt"), "same 1600000000")
        XCTAssertEqual(held("gone.txt"), "gone 1700000000")
        XCTAssertEqual(held("changed.txt"), "one 1700000000")
        XCTAssertEqual(held("new.txt"), "absent")
        XCTAssertNotNil(try state.record(of: "t")[try RelativePath(validating: "gone.txt")], "the record of what stayed is kept")
    }

    func testInitialSyncThenUnchanged() async throws {
        source.setFile("a.txt", "alpha", mtime: FileTime(seconds: 1_600_000_000, nanoseconds: 5))
        source.setFile("d/e/f.txt", "deep")
        source.setFolder("empty")
        let first = await run()
        XCTAssertEqual(first.result, .synced)
        XCTAssertEqual(first.downloaded, 2)
        XCTAssertEqual(first.createdFolders, 3)
        XCTAssertEqual(first.bytes, 9)
        XCTAssertEqual(content("a.txt"), "alpha")
        XCTAssertEqual(content("d/e/f.txt"), "deep")
        XCTAssertEqual(FixtureTree.mtime(destination.path("a.txt")), 1_600_000_000_000_000_005)
        XCTAssertEqual(FixtureTree.mtime(destination.path("d")), 1_600_000_000_000_000_000, "folder times are mirrored too")
        XCTAssertEqual(FixtureTree.listing(destination.path), ["a.txt", "d/", "d/e/", "d/e/f.txt", "empty/"])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/partial")).filter { !$0.hasSuffix("/") }, [], "no partial file left")

        let downloadsBefore = source.downloads.count
        let second = await run()
        XCTAssertEqual(second.result, .unchanged)
        XCTAssertEqual(source.downloads.count, downloadsBefore)
    }

    /// A large file is written past the page cache: what the last, partly filled MiB held reaches the file
    /// before it is sealed, checked and renamed into place.
    func testALargeFileArrivesWhole() async throws {
        let film = (0..<400_000).map(String.init).joined(separator: ",")
        XCTAssertGreaterThan(film.utf8.count, 2 << 20)
        XCTAssertNotEqual(film.utf8.count % (1 << 20), 0)
        source.setFile("films/film.mkv", film, mtime: FileTime(seconds: 1_650_000_000, nanoseconds: 250))
        let report = await run()
        XCTAssertEqual(report.result, .synced, report.error ?? "")
        XCTAssertEqual(report.bytes, Int64(film.utf8.count))
        let arrived = content("films/film.mkv")
        XCTAssertTrue(arrived == film, "arrived \(arrived?.utf8.count ?? 0) bytes, not the listed \(film.utf8.count) exactly")
        XCTAssertEqual(FixtureTree.mtime(destination.path("films/film.mkv")), 1_650_000_000_000_000_250)
    }

    /// A large download cut off mid-way keeps every byte that arrived, the ones still staged for direct I/O
    /// included, and the next attempt resumes after the last of them.
    func testACutDownloadResumesAfterTheLastByteThatArrived() async throws {
        let film = (0..<400_000).map(String.init).joined(separator: ";")
        source.setFile("film.mkv", film, mtime: FileTime(seconds: 1_650_000_000))
        let cut = 1 << 20 + 300_001
        source.cutDownload("film.mkv", after: cut, with: SourceError(.unreachable, "connection lost"))
        var report = await run()
        if report.result != .synced { report = await run() }
        XCTAssertEqual(report.result, .synced, report.error ?? "")
        // The resume asks again for the 64 KiB before its point, to compare them with the partial file's.
        XCTAssertEqual(source.downloads.map(\.1), [0, Int64(cut) - 65_536], "resumed after the bytes that arrived, not after the last whole MiB")
        let arrived = content("film.mkv")
        XCTAssertTrue(arrived == film, "arrived \(arrived?.utf8.count ?? 0) bytes, not the listed \(film.utf8.count) exactly")
    }

    /// A partial file of another version with the same size and time (a source of whole seconds, the file
    /// rewritten within the second after a run stopped mid-file) is not resumed: the 64 KiB before the resume
    /// point are asked for again, differ, and the file starts over. Resumed blindly, the old version's first part
    /// was joined to the new one's rest and installed, exit 0.
    func testAPartialFileOfAnotherVersionWithTheSameSizeAndTimeStartsOver() async throws {
        let old = String(repeating: "old version;", count: 20_000)
        let new = String(repeating: "NEW VERSION;", count: 20_000)
        source.setFile("film.mkv", new, mtime: FileTime(seconds: 1_700_000_000))
        _ = try Destination(path: destination.path, create: true)
        let file = Destination.partialName(for: Entry(path: try RelativePath(validating: "film.mkv"), kind: .file, size: Int64(new.utf8.count),
                                                      mtime: FileTime(seconds: 1_700_000_000)))
        FixtureTree.write(destination.path, ".folio/partial/\(file.prefix(1))/\(file)", String(old.prefix(100_000)))
        let report = await run()
        XCTAssertEqual(report.result, .synced, report.error ?? "")
        XCTAssertEqual(report.failures.count, 0, "\(report.failures)")
        XCTAssertTrue(content("film.mkv") == new, "the old version's bytes were kept")
        XCTAssertEqual(source.downloads.map(\.1), [100_000 - 65_536, 0])
        XCTAssertEqual(report.bytes, Int64(new.utf8.count), "the compared bytes count as fetched only once, in the whole file")
    }

    /// What stands at a partial file's name is written to only when it is a file of Folio's own. A FIFO there
    /// took the bytes (and a large file held the run, past SIGTERM); a hard link to a file outside the destination
    /// had that file overwritten; a symbolic link or a folder failed the file on every run.
    func testAPartialNameHoldingAFIFOOrAHardLinkIsReplacedNotWrittenThrough() async throws {
        source.setFile("a.txt", "alpha")
        source.setFile("b.txt", "bravo")
        source.setFile("c.txt", "charl")
        source.setFile("d.txt", "delta")
        _ = try Destination(path: destination.path, create: true)
        let outside = TemporaryDirectory("engine-outside")
        FixtureTree.write(outside.path, "victim.txt", "precious, and longer")
        let partial = { (name: String, size: Int64) -> String in
            let file = Destination.partialName(for: Entry(path: try! RelativePath(validating: name), kind: .file, size: size, mtime: FileTime(seconds: 1_700_000_000)))
            return self.destination.path(".folio/partial/\(file.prefix(1))/\(file)")
        }
        XCTAssertEqual(mkfifo(partial("a.txt", 5), 0o644), 0)
        XCTAssertEqual(link(outside.path("victim.txt"), partial("b.txt", 5)), 0)
        XCTAssertEqual(symlink(outside.path("victim.txt"), partial("c.txt", 5)), 0)
        FixtureTree.write(partial("d.txt", 5), "inside", "a folder at the name")

        let report = await run()
        XCTAssertEqual(report.result, .synced, report.error ?? "")
        XCTAssertEqual(report.failures.count, 0, "\(report.failures)")
        XCTAssertEqual(content("a.txt"), "alpha")
        XCTAssertEqual(content("b.txt"), "bravo")
        XCTAssertEqual(content("c.txt"), "charl")
        XCTAssertEqual(content("d.txt"), "delta")
        XCTAssertEqual(FixtureTree.read(outside.path("victim.txt")).map { String(decoding: $0, as: UTF8.self) }, "precious, and longer")
    }

    /// A partial file no download resumes goes on a run with nothing to fetch too: one a failed run left (the
    /// disk filled), of a file since gone from the source, held its space for good while every run said
    /// "unchanged".
    func testARunWithNothingToFetchClearsLeftoverPartialFiles() async throws {
        source.setFile("a.txt", "alpha")
        let first = await run()
        XCTAssertEqual(first.result, .synced)
        FixtureTree.write(destination.path, ".folio/partial/0/0123456789abcdef.part", "half of a file gone from the source")
        FixtureTree.write(destination.path, ".folio/partial/5/5aaaaaaaaaaaaaaa.part/inside", "a folder at a partial file's name")
        let unchanged = await run()
        XCTAssertEqual(unchanged.result, .unchanged)
        XCTAssertNil(FixtureTree.read(destination.path(".folio/partial/0/0123456789abcdef.part")))
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path(".folio/partial/5/5aaaaaaaaaaaaaaa.part")), "a folder at a partial file's name stayed")
        source.setFile("b.txt", "bravo")
        let second = await run()
        XCTAssertEqual(second.result, .synced)
        FixtureTree.write(destination.path, ".folio/partial/f/fedcba9876543210.part", "another")
        source.remove("b.txt")
        let third = await run()
        XCTAssertEqual(third.removed, 1)
        XCTAssertNil(FixtureTree.read(destination.path(".folio/partial/f/fedcba9876543210.part")), "a run that only removes")
    }

    func testChangedAndRemovedFilesGoToTheTrash() async throws {
        source.setFile("a.txt", "version 1")
        source.setFile("b.txt", "bravo")
        source.setFile("keep1", "k")
        source.setFile("keep2", "k")
        _ = await run()
        source.setFile("a.txt", "version 2, longer", mtime: FileTime(seconds: 1_700_000_500))
        source.remove("b.txt")
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(report.removed, 1)
        XCTAssertEqual(report.localChanges, [])
        XCTAssertEqual(content("a.txt"), "version 2, longer")
        XCTAssertNil(content("b.txt"))
        XCTAssertEqual(trashed("a.txt"), ["version 1"])
        XCTAssertEqual(trashed("b.txt"), ["bravo"])
    }

    func testAfterAnUpdateInsideAFolderTheNextRunIsUnchanged() async throws {
        source.setFile("d/a.txt", "one")
        source.setFile("d/b.txt", "two")
        _ = await run()
        source.setFile("d/a.txt", "one, edited", mtime: FileTime(seconds: 1_700_000_100))
        let update = await run()
        XCTAssertEqual(update.updated, 1)
        XCTAssertEqual(FixtureTree.mtime(destination.path("d")), 1_600_000_000_000_000_000, "the folder's time is the source's again")
        let next = await run()
        XCTAssertEqual(next.result, .unchanged)
    }

    func testTypeChangesBothWays() async throws {
        source.setFile("x", "a file")
        source.setFile("y/inner.txt", "in a folder")
        source.setFile("z1", "z")
        source.setFile("z2", "z")
        source.setFile("z3", "z")
        _ = await run()
        source.remove("x")
        source.setFile("x/now-a-folder.txt", "child")
        source.remove("y")
        source.setFile("y", "now a file")
        let report = await run()
        XCTAssertEqual(report.result, .synced, report.error ?? "")
        XCTAssertEqual(content("x/now-a-folder.txt"), "child")
        XCTAssertEqual(content("y"), "now a file")
        XCTAssertEqual(trashed("x"), ["a file"])
        XCTAssertEqual(trashed("y/inner.txt"), ["in a folder"])
    }

    func testIdenticalFilesAreAdoptedNotFetched() async throws {
        let mtime = FileTime(seconds: 1_650_000_000, nanoseconds: 123)
        source.setFile("same.txt", "identical", mtime: mtime)
        FixtureTree.write(destination.path, "same.txt", "identical", mtime: (1_650_000_000, 123))
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.downloaded + report.updated, 0)
        XCTAssertTrue(source.downloads.isEmpty)
        XCTAssertEqual(try state.record(of: "t").count, 1, "the adopted file is recorded")
    }

    func testLocalEditsAreTrashedAndReportedBeforeReplacement() async throws {
        source.setFile("doc.txt", "from the source")
        source.setFile("other", "o")
        source.setFile("other2", "o")
        _ = await run()
        FixtureTree.write(destination.path, "doc.txt", "edited here by someone")
        FixtureTree.write(destination.path, "stray.txt", "not from the source")
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(content("doc.txt"), "from the source")
        XCTAssertNil(content("stray.txt"))
        XCTAssertEqual(Set(report.localChanges.map(\.description)), ["doc.txt", "stray.txt"])
        XCTAssertEqual(trashed("doc.txt"), ["edited here by someone"])
        XCTAssertEqual(trashed("stray.txt"), ["not from the source"])
    }

    /// A destination moved with `mv` and the target pointed at its new place: the record starts over, and still
    /// knows the files Folio wrote (by inode, size and time), so a file changed at the source replaces Folio's copy
    /// as such, not as "a local file that folio did not write". An edit made here is still reported.
    func testADestinationMovedToAnotherFolderStillKnowsTheFilesFolioWrote() async throws {
        source.setFile("changed.txt", "one")
        source.setFile("edited.txt", "two")
        source.setFile("same.txt", "same")
        _ = await run()
        let moved = TemporaryDirectory("engine-moved")
        XCTAssertEqual(rmdir(moved.path), 0)
        XCTAssertEqual(rename(destination.path, moved.path), 0)
        target.destination = moved.path
        destination = moved
        FixtureTree.write(destination.path, "edited.txt", "edited here")
        source.setFile("changed.txt", "one, longer")
        source.setFile("edited.txt", "two, longer")
        let report = await run()
        XCTAssertEqual(report.result, .synced, report.error ?? "")
        XCTAssertEqual(report.updated, 2)
        XCTAssertEqual(report.localChanges.map(\.description), ["edited.txt"])
        XCTAssertEqual(trashed("changed.txt"), ["one"])
        XCTAssertEqual(trashed("edited.txt"), ["edited here"])
        XCTAssertEqual(content("changed.txt"), "one, longer")
        XCTAssertEqual(Set(try state.record(of: "t").map(\.path.description)), ["changed.txt", "edited.txt", "same.txt"])
    }

    /// A stop by hand (Ctrl-C or SIGTERM to `sync --now`) cancels only the run's progress, not its task. Landing
    /// between two files, where no transfer meets it, it still ends the run "interrupted", with nothing counted
    /// as failed, and the files not reached are not copied.
    func testAStopBetweenFilesThatCancelsOnlyTheProgressEndsInterrupted() async throws {
        for i in 0..<5 { source.setFile("f\(i)", "x\(i)") }
        target.transfers = 1
        let progress = TransferProgress()
        source.afterDownloading("f0") { progress.cancel() }
        let report = await SyncEngine(state: state, events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual), progress: progress)
        XCTAssertEqual(report.result, .interrupted)
        XCTAssertEqual(report.error, "stopped before the run finished")
        XCTAssertEqual(report.failed, 0, "files not reached are not done yet, not failed")
        XCTAssertLessThan(FixtureTree.listing(destination.path).filter { $0.hasPrefix("f") }.count, 5, "the run stopped")
        XCTAssertEqual(source.downloads.count, 1, "no file was fetched after the stop")
    }

    /// A stop before the downloads (here, already there when the listing ends) copies nothing.
    func testAStopBeforeTheDownloadsCopiesNothing() async throws {
        for i in 0..<3 { source.setFile("f\(i)", "x") }
        let progress = TransferProgress()
        progress.cancel()
        let report = await SyncEngine(state: state, events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual), progress: progress)
        XCTAssertEqual(report.result, .interrupted)
        XCTAssertEqual(report.failed, 0)
        XCTAssertEqual(FixtureTree.listing(destination.path).filter { !$0.hasPrefix(".folio") }, [])
    }

    func testMaxDeleteRefusesThenForceAllows() async throws {
        for i in 0..<10 { source.setFile("f\(i)", "x") }
        _ = await run()
        for i in 0..<6 { source.remove("f\(i)") }
        let refused = await run()
        XCTAssertEqual(refused.result, .refused)
        XCTAssertEqual(refused.error, "would remove 6 of 10 entries in \(destination.path), more than max-delete (50%); nothing was changed; check that the source is complete and that the destination is the right folder, then run with --force to allow it")
        XCTAssertEqual(FixtureTree.listing(destination.path).count, 10, "nothing removed")
        let forced = await run(force: true)
        XCTAssertEqual(forced.result, .synced)
        XCTAssertEqual(forced.removed, 6)
        XCTAssertEqual(FixtureTree.listing(destination.path), ["f6", "f7", "f8", "f9"])
    }

    func testAListingErrorAnywhereRemovesNothing() async throws {
        source.setFile("ok/a", "a")
        source.setFile("ok/gone", "g")
        source.setFile("locked/b", "b")
        _ = await run()
        source.remove("ok/gone")
        source.setFile("ok/new", "n")
        source.makeUnreadable("locked")
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertFalse(report.isClean)
        XCTAssertEqual(report.removed, 0)
        XCTAssertGreaterThan(report.withheldRemovals, 0)
        XCTAssertEqual(report.failed, 1, "the folder that could not be listed counts as failed")
        XCTAssertEqual(content("ok/gone"), "g", "not removed while the listing is incomplete")
        XCTAssertEqual(content("locked/b"), "b")
        XCTAssertEqual(content("ok/new"), "n", "the rest still syncs")
    }

    /// A partial file is resumed from its end, the 64 KiB before it asked for again and compared.
    func testAPartialFileIsResumedFromItsOffset() async throws {
        let text = String(repeating: "0123456789", count: 10_000)
        source.setFile("big.txt", text)
        let entry = try await source.snapshot(options: ListingOptions()).entry(at: RelativePath(validating: "big.txt"))!
        let name = Destination.partialName(for: entry)
        FixtureTree.write(destination.path(".folio/partial/\(name.prefix(1))"), name, Array(text.utf8.prefix(80_000)))
        let stale = name.hasPrefix("f") ? "e0123456789abcde.part" : "f0123456789abcde.part"
        FixtureTree.write(destination.path(".folio/partial/\(stale.prefix(1))"), stale, "of a version gone from the source")
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertNil(FixtureTree.read(destination.path(".folio/partial/\(stale.prefix(1))/\(stale)")), "a partial no download resumes goes first")
        XCTAssertEqual(source.downloads.map(\.1), [80_000 - 65_536])
        XCTAssertEqual(report.bytes, 20_000)
        XCTAssertEqual(content("big.txt"), text)
    }

    func testAnEmptyOrMissingSourceRemovesNothing() async throws {
        source.setFile("precious", "p")
        _ = await run()
        source.remove("precious")
        let empty = await run()
        XCTAssertEqual(empty.result, .refused)
        XCTAssertTrue(empty.error?.contains("is empty; refusing to remove the 1 entry in") == true, empty.error ?? "")
        source.failRoot(with: SourceError(.notFound, "source folder /x does not exist"))
        let missing = await run()
        XCTAssertEqual(missing.result, .failed)
        XCTAssertEqual(missing.error, "source folder /x does not exist")
        XCTAssertEqual(content("precious"), "p")
    }

    func testAFailedFileIsNeverInstalledAndTheRestIs() async throws {
        source.setFile("good", "g")
        source.setFile("bad", "b")
        source.failDownload("bad", with: SourceError(.permission, "cannot read /src/bad: permission denied"))
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.failures.map(\.message), ["cannot read /src/bad: permission denied"])
        XCTAssertEqual(content("good"), "g")
        XCTAssertNil(content("bad"))
        source.failDownload("bad", with: nil)
        let retry = await run()
        XCTAssertEqual(retry.downloaded, 1)
        XCTAssertEqual(content("bad"), "b")
    }

    func testTrashDaysZeroDeletes() async throws {
        target.trashDays = 0
        source.setFile("a", "a")
        source.setFile("b", "b")
        source.setFile("c", "c")
        _ = await run()
        source.remove("a")
        let report = await run()
        XCTAssertEqual(report.removed, 1)
        XCTAssertNil(report.trashFolder)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash")), [])
    }

    /// A run purges the trash kept past `trash-days` by its clock reading; a folder without one (here planted by
    /// hand, its name from 2020) counts from the first run that sees it (`TrashPurgeTests`), so it stays.
    func testTrashOlderThanTrashDaysIsPurged() async throws {
        source.setFile("a", "a")
        FixtureTree.write(destination.path(".folio/trash/20200101-000000-old"), "x", "old removal")
        FixtureTree.write(destination.path(".folio/trash/20200101-000000-read"), "x", "old removal, read then")
        FixtureTree.write(destination.path(".folio/trash/29990101-000000-new"), "y", "recent removal")
        FixtureTree.write(destination.path(".folio/trash-clock"), "20200101-000000-read", "- 1 1577836800 carried\n")
        _ = await run()
        XCTAssertEqual(Set(try FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash"))),
                       ["20200101-000000-old", "29990101-000000-new"])
    }

    func testDryRunChangesNothing() async throws {
        source.setFile("a", "a")
        let report = await run(dryRun: true)
        XCTAssertEqual(report.downloaded, 1)
        XCTAssertEqual(FixtureTree.listing(destination.path), [])
        XCTAssertTrue(source.downloads.isEmpty)
    }

    /// A batch that delivers nothing (a server without tar) leaves its files to more workers, not to the one
    /// worker that asked: one worker fetching a whole tree one file at a time took an SFTP-only server's 500-file
    /// initial mirror 34 s over a 20 ms link. Far, a worker for every four files left, up to `transfers`.
    func testFilesABatchLeftAreSharedAmongMoreWorkersOverAFarLink() async throws {
        source = MemorySource(features: SourceFeatures(mtimePrecision: .nanosecond, batchDownloads: true, costlyConnections: true))
        source.roundTrip = .milliseconds(20)
        try await assertLeftOverFiles(40, connections: 4)
    }

    /// Near, a log-in is worth dozens of files: 40 left over start one more worker.
    func testFilesABatchLeftStartFewerWorkersOverANearLink() async throws {
        source = MemorySource(features: SourceFeatures(mtimePrecision: .nanosecond, batchDownloads: true, costlyConnections: true))
        try await assertLeftOverFiles(40, connections: 2)
    }

    private func assertLeftOverFiles(_ count: Int, connections: Int, file: StaticString = #filePath, line: UInt = #line) async throws {
        source.refuseBatches()
        // Why a delay: so the first worker cannot fetch them all before the others start; the test times nothing.
        source.delayDownloads(by: 0.02)
        target.transfers = 4
        for index in 0..<count { source.setFile("small/\(String(index).leftPadded(to: 2))", "file \(index)", mtime: FileTime(seconds: 1_600_000_000 + Int64(index))) }
        let report = await run()
        XCTAssertEqual(report.result, .synced, file: file, line: line)
        XCTAssertEqual(report.downloaded, count, file: file, line: line)
        XCTAssertEqual(source.batches.map(\.count), [count], "a costly connection and few bytes: one worker, one batch", file: file, line: line)
        XCTAssertEqual(source.connections, connections, file: file, line: line)
        XCTAssertEqual(source.connectionsThatFetched, connections, "every worker took some of the files", file: file, line: line)
        XCTAssertEqual(source.downloads.count, count, "each file fetched once", file: file, line: line)
        for index in 0..<count {
            let name = "small/\(String(index).leftPadded(to: 2))"
            XCTAssertEqual(content(name), "file \(index)", file: file, line: line)
            XCTAssertEqual(FixtureTree.mtime(destination.path(name)), (1_600_000_000 + Int64(index)) * 1_000_000_000, file: file, line: line)
        }
    }

    /// A source that fetches small files in batches: they come in a few requests; a file the batch leaves out
    /// and a big file are fetched on their own; the mirror is exact and the failure names its file.
    func testSmallFilesComeInBatchesAndWhatABatchMissesIsFetchedAlone() async throws {
        source = MemorySource(features: SourceFeatures(mtimePrecision: .nanosecond, batchDownloads: true))
        target.transfers = 2
        for index in 0..<50 { source.setFile("small/\(String(index).leftPadded(to: 2))", "file \(index)", mtime: FileTime(seconds: 1_600_000_000 + Int64(index))) }
        let big = String(repeating: "b", count: Int(DownloadBatch.maxFileSize) + 1)
        source.setFile("big", big)
        source.failDownload("small/07", with: SourceError(.permission, "cannot read small/07: permission denied", path: try RelativePath(validating: "small/07")))
        let report = await run()
        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.downloaded, 50)
        XCTAssertEqual(report.failures.map(\.path.description), ["small/07"])
        XCTAssertEqual(report.failures.first?.message, "cannot read small/07: permission denied")
        // 50 small files over 2 workers: batches of 13 (two jobs per worker at least).
        XCTAssertEqual(source.batches.map(\.count).sorted(), [11, 13, 13, 13])
        XCTAssertEqual(Set(source.downloads.map(\.0.description)), ["big", "small/07"], "only what no batch delivered is fetched alone")
        XCTAssertEqual(content("big"), big)
        for index in 0..<50 where index != 7 {
            let name = "small/\(String(index).leftPadded(to: 2))"
            XCTAssertEqual(content(name), "file \(index)")
            XCTAssertEqual(FixtureTree.mtime(destination.path(name)), (1_600_000_000 + Int64(index)) * 1_000_000_000)
        }
        XCTAssertNil(content("small/07"))
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/partial")).filter { !$0.hasSuffix("/") }.count, 1, "only the failed file's partial file stays, for the next run")
    }

    func testAnETagChangeWithSameSizeAndTimeIsFetched() async throws {
        source.setFile("page.html", "AAAA", validator: "\"1\"")
        source.setFile("x", "x")
        _ = await run()
        source.setFile("page.html", "BBBB", validator: "\"2\"")
        let report = await run()
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(content("page.html"), "BBBB")
    }
}
