@testable import FolioCore
import FolioTestSupport
import Foundation
import XCTest

/// How long the trash keeps a run's folder: by its name's wall-clock time, and within one boot by the time since
/// boot read when it was made, so that a wall clock set forward after the fact (NTP on a machine without a
/// battery-backed clock) never ages a folder early.
final class TrashPurgeTests: XCTestCase {
    var destination: TemporaryDirectory!
    let day: Int64 = 86_400

    override func setUp() {
        destination = TemporaryDirectory("trash-purge")
    }

    /// Mirrors three files, then removes one at the source: the run moves it to a trash folder of its own.
    /// Returns that folder's name and the clocks it read.
    private func trashOneFile() async throws -> (run: String, reading: ClockReading) {
        let source = MemorySource()
        for name in ["a", "b", "c"] { source.setFile(name, "content of \(name)") }
        let target = TargetConfig(name: "t", source: "memory://", destination: destination.path)
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        _ = await engine.run(target, source: source, options: .init(trigger: .manual))
        source.remove("a")
        let report = await engine.run(target, source: source, options: .init(trigger: .manual))
        XCTAssertEqual(report.removed, 1)
        let runs = try FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash"))
        let run = try XCTUnwrap(runs.first)
        XCTAssertEqual(runs, [run])
        return (run, try XCTUnwrap(reading(of: run)))
    }

    private func reading(of run: String) -> ClockReading? {
        FixtureTree.read(destination.path(".folio/trash-clock/" + run)).flatMap { ClockReading(text: String(decoding: $0, as: UTF8.self)) }
    }

    private func trashListing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: destination.path(".folio/trash"))) ?? []).sorted()
    }

    func testARunFolderIsStampedWithThisBootsClocks() async throws {
        let (run, reading) = try await trashOneFile()
        let now = ClockReading.now()
        XCTAssertEqual(reading.boot, now.boot)
        XCTAssertFalse(reading.boot.isEmpty)
        XCTAssertLessThanOrEqual(now.sinceBoot - reading.sinceBoot, 60)
        XCTAssertEqual(Destination.time(ofRunID: run).map { abs($0 - reading.wall) <= 60 }, true, run)
        XCTAssertEqual(FixtureTree.read(destination.path(".folio/trash/\(run)/a")), Array("content of a".utf8))
    }

    /// The case this exists for: the wall clock was 40 days behind when the folder was made, and has been set
    /// since, within the same boot. Then the machine reboots: the corrected time, written back, still holds.
    func testAFolderMadeWhileTheClockWasBehindIsKeptItsFullDays() async throws {
        let (run, made) = try await trashOneFile()
        let destinationNow = try Destination(path: destination.path, create: true)
        let setForward = ClockReading(wall: made.wall + 40 * day, sinceBoot: made.sinceBoot + 10, boot: made.boot)
        destinationNow.purgeTrash(olderThan: 30, now: setForward)
        XCTAssertEqual(trashListing(), [run], "10 seconds old by the time since boot")
        XCTAssertEqual(reading(of: run)?.wall, setForward.wall - 10, "the corrected time is written back")

        let afterReboot = ClockReading(wall: setForward.wall + 29 * day, sinceBoot: 100, boot: "another-boot")
        destinationNow.purgeTrash(olderThan: 30, now: afterReboot)
        XCTAssertEqual(trashListing(), [run], "29 days old by the corrected time")

        let later = ClockReading(wall: setForward.wall + 31 * day, sinceBoot: 200, boot: "another-boot")
        destinationNow.purgeTrash(olderThan: 30, now: later)
        XCTAssertEqual(trashListing(), [])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [], "its reading went with it")
    }

    func testAFolderIsPurgedOnceItsDaysHavePassedByBothClocks() async throws {
        let (run, made) = try await trashOneFile()
        let destinationNow = try Destination(path: destination.path, create: true)
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 29 * day, sinceBoot: made.sinceBoot + 29 * day, boot: made.boot))
        XCTAssertEqual(trashListing(), [run])
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 31 * day, sinceBoot: made.sinceBoot + 31 * day, boot: made.boot))
        XCTAssertEqual(trashListing(), [])
    }

    /// A folder from before readings (or whose reading was lost) is aged by its name; a folder whose name is not
    /// a run's is not Folio's and stays, unless trash-days is 0; a reading whose folder was removed by hand goes.
    func testWithoutAReadingTheNameTellsTheAgeAndOtherNamesStay() async throws {
        let (run, made) = try await trashOneFile()
        FixtureTree.write(destination.path(".folio/trash/20200101-000000-old"), "x", "old removal")
        FixtureTree.write(destination.path(".folio/trash/kept by hand"), "y", "someone's")
        FixtureTree.write(destination.path(".folio/trash-clock"), "20210101-000000-gone", "- 1 1609459200\n")
        let destinationNow = try Destination(path: destination.path, create: true)
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 60, sinceBoot: made.sinceBoot + 60, boot: made.boot))
        XCTAssertEqual(trashListing(), [run, "kept by hand"])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [run])

        destinationNow.purgeTrash(olderThan: 0)
        XCTAssertEqual(trashListing(), [])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [])
    }

    func testMadeSeenFromAnotherReading() {
        let stamp = ClockReading(wall: 1_000_000, sinceBoot: 50, boot: "b1")
        let cases: [(now: ClockReading, made: Int64, why: String)] = [
            (ClockReading(wall: 1_000_100, sinceBoot: 150, boot: "b1"), 1_000_000, "clock right all along"),
            (ClockReading(wall: 5_000_000, sinceBoot: 150, boot: "b1"), 4_999_900, "clock set forward since"),
            (ClockReading(wall: 900_000, sinceBoot: 150, boot: "b1"), 1_000_000, "clock set back since: never older than stamped"),
            (ClockReading(wall: 5_000_000, sinceBoot: 10, boot: "b2"), 1_000_000, "another boot: the stamp's wall time"),
            (ClockReading(wall: 5_000_000, sinceBoot: 150, boot: ""), 1_000_000, "boot unknown"),
        ]
        for (now, made, why) in cases { XCTAssertEqual(stamp.made(seenAt: now), made, why) }
        XCTAssertEqual(ClockReading(text: stamp.text), stamp)
        XCTAssertEqual(ClockReading(text: ClockReading(wall: 7, sinceBoot: 8, boot: "").text), ClockReading(wall: 7, sinceBoot: 8, boot: ""))
        XCTAssertNil(ClockReading(text: "b1 50"))
        XCTAssertNil(ClockReading(text: ""))
    }

    func testRunFolderNamesReadBackAsTheirTime() {
        XCTAssertEqual(Destination.time(ofRunID: Destination.runID(at: Date(timeIntervalSince1970: 1_764_153_000), suffix: "-x1")), 1_764_153_000)
        XCTAssertEqual(Destination.time(ofRunID: "19700101-000000"), 0)
        for name in ["kept by hand", "2026112-104800-x", "20261126_104800", ".hidden", ""] { XCTAssertNil(Destination.time(ofRunID: name), name) }
    }
}
