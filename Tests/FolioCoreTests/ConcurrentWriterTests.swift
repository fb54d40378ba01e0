import FolioCore
import FolioTestSupport
import Foundation
import XCTest

/// Something else writes into the destination while a run downloads: what it wrote is never lost silently
/// (guarantee 4), even though the destination was scanned before it appeared.
final class ConcurrentWriterTests: XCTestCase {
    var memory: MemorySource!
    var state: MemoryStateStore!
    var destination: TemporaryDirectory!
    var target: TargetConfig!

    override func setUp() {
        memory = MemorySource()
        state = MemoryStateStore()
        destination = TemporaryDirectory("intruded-dest")
        target = TargetConfig(name: "t", source: "memory://", destination: destination.path)
        target.transfers = 2
        for name in ["a.txt", "b.txt", "c.txt"] { memory.setFile("docs/\(name)", "source \(name)") }
    }

    // See `TemporaryDirectory`: the folder goes now, not at the process's end.
    override func tearDown() { destination = nil }

    private func run(_ intrude: @escaping @Sendable (String) -> Void = { _ in }) async -> RunReport {
        let root = destination.path
        let source = HookedSource(memory: memory, before: "docs/b.txt") { intrude(root) }
        return await SyncEngine(state: state, events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual))
    }

    /// A run that calls `intrude` with the destination's path once the plan is made, before the removals.
    private func runIntrudingAfterPlanning(_ intrude: @escaping @Sendable (String) -> Void) async -> RunReport {
        let events = AfterPlanning(root: destination.path, intrude: intrude)
        return await SyncEngine(state: state, events: events).run(target, source: memory, options: .init(trigger: .manual))
    }

    private func content(_ path: String) -> String? {
        FixtureTree.read(path).map { String(decoding: $0, as: UTF8.self) }
    }

    /// A first run, then a new version of docs/b.txt at the source, for a second run to update.
    private func mirrorThenChangeBAtTheSource() async {
        _ = await run()
        memory.setFile("docs/b.txt", "source b.txt, second version", mtime: FileTime(seconds: 1_800_000_000))
    }

    /// The one run folder under `.folio/trash`.
    private func trashRun() throws -> String {
        let runs = try FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash"))
        XCTAssertEqual(runs.count, 1)
        return destination.path(".folio/trash/" + (runs.first ?? "none"))
    }

    func testAFileWrittenWhereADownloadGoesIsMovedToTheTrashAndReported() async throws {
        let report = await run { root in FixtureTree.write(root, "docs/b.txt", "written here during the run") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.downloaded, 3)
        XCTAssertEqual(report.trashed, 1)
        XCTAssertEqual(report.localChanges.map(\.description), ["docs/b.txt"])
        XCTAssertEqual(content(destination.path("docs/b.txt")), "source b.txt")
        XCTAssertEqual(content(try trashRun() + "/docs/b.txt"), "written here during the run")
    }

    func testAFolderMadeWhereADownloadGoesIsMovedToTheTrashWithItsFiles() async throws {
        let report = await run { root in FixtureTree.write(root, "docs/b.txt/inside.txt", "a file in a folder made during the run") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.localChanges.map(\.description), ["docs/b.txt"])
        XCTAssertEqual(content(destination.path("docs/b.txt")), "source b.txt")
        XCTAssertEqual(content(try trashRun() + "/docs/b.txt/inside.txt"), "a file in a folder made during the run")
    }

    func testAnEditMadeToAFileBeingUpdatedIsMovedToTheTrashAndReported() async throws {
        await mirrorThenChangeBAtTheSource()
        let report = await run { root in FixtureTree.write(root, "docs/b.txt", "edited here during the run") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.updated, 1, "the file was replaced, as the dry run counts it")
        XCTAssertEqual(report.trashed, 1)
        XCTAssertEqual(report.localChanges.map(\.description), ["docs/b.txt"])
        XCTAssertEqual(content(destination.path("docs/b.txt")), "source b.txt, second version")
        XCTAssertEqual(content(try trashRun() + "/docs/b.txt"), "edited here during the run")
    }

    func testAnUpdateOfAnUntouchedFileIsNotReportedAsALocalChange() async throws {
        await mirrorThenChangeBAtTheSource()
        let report = await run()

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.updated, 1)
        XCTAssertEqual(report.trashed, 0)
        XCTAssertEqual(report.localChanges, [])
        XCTAssertEqual(content(destination.path("docs/b.txt")), "source b.txt, second version")
    }

    func testAnEditMadeBeforeAFilesTimeIsSetKeepsItsTimeAndIsKeptAndReportedNextRun() async throws {
        memory.setFile("docs/c.txt", "source c.txt", validator: "\"c1\"")
        _ = await run()
        // The source touches c.txt (same content, same ETag, new time): a time fix, set after the downloads. Meanwhile
        // (during b.txt's download) someone edits the local copy, keeping its size.
        memory.setFile("docs/c.txt", "source c.txt", mtime: FileTime(seconds: 1_800_000_000), validator: "\"c1\"")
        memory.setFile("docs/b.txt", "source b.txt, second version", mtime: FileTime(seconds: 1_800_000_000))
        let edited = await run { root in FixtureTree.write(root, "docs/c.txt", "edited c.txt") }

        XCTAssertEqual(edited.result, .synced)
        XCTAssertEqual(edited.updated, 1, "b.txt only: c.txt's time is left alone")
        XCTAssertEqual(content(destination.path("docs/c.txt")), "edited c.txt")
        let attributes = try FileManager.default.attributesOfItem(atPath: destination.path("docs/c.txt"))
        XCTAssertNotEqual((attributes[.modificationDate] as? Date)?.timeIntervalSince1970, 1_800_000_000)

        let next = await run()
        XCTAssertEqual(next.result, .synced)
        XCTAssertEqual(next.localChanges.map(\.description), ["docs/c.txt"])
        XCTAssertEqual(content(destination.path("docs/c.txt")), "source c.txt")
        let runs = try FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash"))
        XCTAssertEqual(runs.compactMap { content(destination.path(".folio/trash/\($0)/docs/c.txt")) }, ["edited c.txt"])
    }

    func testWithoutATrashTheFileIsReplacedAndStillReported() async throws {
        target.trashDays = 0
        let report = await run { root in FixtureTree.write(root, "docs/b.txt", "written here during the run") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.localChanges.map(\.description), ["docs/b.txt"])
        XCTAssertNil(report.trashFolder)
        XCTAssertEqual(content(destination.path("docs/b.txt")), "source b.txt")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash")), [])
    }

    // MARK: removals

    func testAnEditMadeToAFileBeingRemovedIsKeptInTheTrashAndReported() async throws {
        _ = await run()
        memory.remove("docs/b.txt")
        let report = await runIntrudingAfterPlanning { root in FixtureTree.write(root, "docs/b.txt", "edited here after the scan") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.removed, 1)
        XCTAssertEqual(report.trashed, 1)
        XCTAssertEqual(report.localChanges.map(\.description), ["docs/b.txt"])
        XCTAssertNil(content(destination.path("docs/b.txt")))
        XCTAssertEqual(content(try trashRun() + "/docs/b.txt"), "edited here after the scan")
    }

    func testWithoutATrashAnEditMadeToAFileBeingRemovedIsStillReported() async throws {
        target.trashDays = 0
        _ = await run()
        memory.remove("docs/b.txt")
        let report = await runIntrudingAfterPlanning { root in FixtureTree.write(root, "docs/b.txt", "edited here after the scan") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.removed, 1)
        XCTAssertEqual(report.localChanges.map(\.description), ["docs/b.txt"])
        XCTAssertNil(content(destination.path("docs/b.txt")))
    }

    func testAFileAddedToAFolderBeingRemovedIsKeptInTheTrashAndReported() async throws {
        memory.setFile("old/x.txt", "source x.txt")
        _ = await run()
        memory.remove("old")
        let report = await runIntrudingAfterPlanning { root in FixtureTree.write(root, "old/new.txt", "added here after the scan") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.localChanges.map(\.description), ["old"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination.path("old")))
        XCTAssertEqual(content(try trashRun() + "/old/new.txt"), "added here after the scan")
        XCTAssertEqual(content(try trashRun() + "/old/x.txt"), "source x.txt")
    }

    func testARemovalOfAnUntouchedFileIsNotReported() async throws {
        _ = await run()
        memory.remove("docs/b.txt")
        let report = await runIntrudingAfterPlanning { _ in }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.removed, 1)
        XCTAssertEqual(report.trashed, 0)
        XCTAssertEqual(report.localChanges, [])
        XCTAssertEqual(content(try trashRun() + "/docs/b.txt"), "source b.txt")
    }

    func testAFileDeletedHereAfterTheScanCountsAsRemovedNotFailed() async throws {
        _ = await run()
        memory.remove("docs/b.txt")
        let report = await runIntrudingAfterPlanning { root in unlink(root + "/docs/b.txt") }

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.removed, 1)
        XCTAssertTrue(report.failures.isEmpty, "\(report.failures)")
        XCTAssertEqual(report.localChanges, [])
    }
}

/// Calls `intrude` once the engine has planned a run, that is after the destination's scan and before anything
/// is removed.
private struct AfterPlanning: SyncEventSink {
    let root: String
    let intrude: @Sendable (String) -> Void

    func emit(_ event: SyncEvent) {
        if case .planned = event { intrude(root) }
    }
}
