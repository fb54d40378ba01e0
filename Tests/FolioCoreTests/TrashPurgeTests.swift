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

    // See `TemporaryDirectory`: the folder goes now, not at the process's end.
    override func tearDown() { destination = nil }

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
    /// since, within the same boot. The corrected time is written back; after a reboot the folder counts as made
    /// when first seen there (nothing tells its age across a boot), once, and ages from then.
    func testAFolderMadeWhileTheClockWasBehindIsKeptItsFullDays() async throws {
        let (run, made) = try await trashOneFile()
        let destinationNow = try Destination(path: destination.path, create: true)
        let setForward = ClockReading(wall: made.wall + 40 * day, sinceBoot: made.sinceBoot + 10, boot: made.boot)
        destinationNow.purgeTrash(olderThan: 30, now: setForward)
        XCTAssertEqual(trashListing(), [run], "10 seconds old by the time since boot")
        XCTAssertEqual(reading(of: run)?.wall, setForward.wall - 10, "the corrected time is written back")

        let nextBoot = ClockReading(wall: setForward.wall + 3_600, sinceBoot: 30, boot: "next-boot")
        destinationNow.purgeTrash(olderThan: 30, now: nextBoot)
        XCTAssertEqual(trashListing(), [run])
        XCTAssertEqual(reading(of: run), ClockReading(wall: nextBoot.wall, sinceBoot: 30, boot: "next-boot", carried: true), "made when first seen in this boot")

        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: nextBoot.wall + 29 * day, sinceBoot: 40, boot: "third-boot"))
        XCTAssertEqual(trashListing(), [run], "29 days old by the carried time")
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: nextBoot.wall + 31 * day, sinceBoot: 50, boot: "fourth-boot"))
        XCTAssertEqual(trashListing(), [])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [], "its reading went with it")
    }

    /// A kiosk that ran once with its clock behind and was switched off before another run: in the next boot,
    /// with its clock set, the folder looks 40 days old by its name and its reading, and is kept all the same.
    func testAFolderFirstSeenAfterARebootCountsAsMadeThen() async throws {
        let (run, made) = try await trashOneFile()
        let destinationNow = try Destination(path: destination.path, create: true)
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 40 * day, sinceBoot: 20, boot: "next-boot"))
        XCTAssertEqual(trashListing(), [run])
    }

    /// A FIFO planted where a reading goes (anyone who may write in the destination can) hangs no purge: the
    /// reading is taken only from a regular file (else the folder counts as first seen now), and written through
    /// a temporary name made anew.
    func testAFIFOAtAReadingsNameHangsNothing() async throws {
        let (run, made) = try await trashOneFile()
        let readingPath = destination.path(".folio/trash-clock/" + run)
        let saved = try XCTUnwrap(FixtureTree.read(readingPath))
        XCTAssertEqual(unlink(readingPath), 0)
        XCTAssertEqual(mkfifo(readingPath, 0o644), 0)
        XCTAssertEqual(mkfifo(readingPath + ".new", 0o644), 0)
        // Should a purge block on a FIFO, this opens its other end after a few seconds, so that the test fails
        // instead of hanging.
        let rescued = Locked(false), done = Locked(false), clocks = destination.path(".folio/trash-clock")
        Thread.detachNewThread {
            while true {
                sleep(5)
                guard !done.withLock({ $0 }) else { return }
                for name in (try? FileManager.default.contentsOfDirectory(atPath: clocks)) ?? [] {
                    for flags in [O_WRONLY | O_NONBLOCK, O_RDONLY | O_NONBLOCK] {
                        let fd = open(clocks + "/" + name, flags)
                        if fd >= 0 { close(fd) }
                    }
                }
                rescued.withLock { $0 = true }
            }
        }
        defer { done.withLock { $0 = true } }
        let destinationNow = try Destination(path: destination.path, create: true)
        let firstSeen = ClockReading(wall: made.wall + 31 * day, sinceBoot: 10, boot: "next-boot")
        destinationNow.purgeTrash(olderThan: 30, now: firstSeen)
        XCTAssertEqual(trashListing(), [run], "no reading to read: first seen now, and kept")
        XCTAssertEqual(reading(of: run), firstSeen, "a reading in place of the FIFO")
        XCTAssertFalse(rescued.withLock { $0 }, "a purge waited on the FIFO")
        destinationNow.purgeTrash(olderThan: 0)

        let (again, _) = try await trashOneFile()
        FixtureTree.write(destination.path(".folio/trash-clock"), again, String(decoding: saved, as: UTF8.self))
        XCTAssertEqual(mkfifo(destination.path(".folio/trash-clock/\(again).new"), 0o644), 0)
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 20, sinceBoot: 20, boot: "next-boot"))
        XCTAssertFalse(rescued.withLock { $0 }, "a purge waited on the FIFO")
        XCTAssertEqual(reading(of: again)?.carried, true, "written anew through the temporary name")
    }

    func testAFolderIsPurgedOnceItsDaysHavePassedByBothClocks() async throws {
        let (run, made) = try await trashOneFile()
        let destinationNow = try Destination(path: destination.path, create: true)
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 29 * day, sinceBoot: made.sinceBoot + 29 * day, boot: made.boot))
        XCTAssertEqual(trashListing(), [run])
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 31 * day, sinceBoot: made.sinceBoot + 31 * day, boot: made.boot))
        XCTAssertEqual(trashListing(), [])
    }

    /// A folder from before readings (or whose reading was lost) counts as made when first seen, not by its name:
    /// a name written while the wall clock was behind would have it purged at once. A folder whose name is not a
    /// run's is not Folio's and stays, unless trash-days is 0; a reading whose folder was removed by hand goes.
    func testWithoutAReadingAFolderCountsAsMadeWhenFirstSeenAndOtherNamesStay() async throws {
        let (run, made) = try await trashOneFile()
        let old = "20200101-000000-old"
        FixtureTree.write(destination.path(".folio/trash/\(old)"), "x", "old removal")
        FixtureTree.write(destination.path(".folio/trash/kept by hand"), "y", "someone's")
        FixtureTree.write(destination.path(".folio/trash-clock"), "20210101-000000-gone", "- 1 1609459200\n")
        let destinationNow = try Destination(path: destination.path, create: true)
        let firstSeen = ClockReading(wall: made.wall + 60, sinceBoot: made.sinceBoot + 60, boot: made.boot)
        destinationNow.purgeTrash(olderThan: 30, now: firstSeen)
        XCTAssertEqual(trashListing(), [old, run, "kept by hand"])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [old, run])
        XCTAssertEqual(reading(of: old), firstSeen)
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 29 * day, sinceBoot: made.sinceBoot + 29 * day, boot: made.boot))
        XCTAssertEqual(trashListing(), [old, run, "kept by hand"], "29 days since it was first seen")
        destinationNow.purgeTrash(olderThan: 30, now: ClockReading(wall: made.wall + 31 * day, sinceBoot: made.sinceBoot + 31 * day, boot: made.boot))
        XCTAssertEqual(trashListing(), ["kept by hand"])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [])

        destinationNow.purgeTrash(olderThan: 0)
        XCTAssertEqual(trashListing(), [])
        XCTAssertEqual(FixtureTree.listing(destination.path(".folio/trash-clock")), [])
    }

    /// A folder whose age cannot be recorded (a file stands where `.folio/trash-clock` should be) is kept, as
    /// always, and the purge says why and what to do at every run, rather than let the trash grow unseen; once the
    /// file is moved aside, the age is recorded and the line goes.
    func testAFolderWhoseAgeCannotBeRecordedIsKeptAndSaidSo() throws {
        let old = "20200101-000000-old"
        FixtureTree.write(destination.path(".folio/trash/\(old)"), "x", "old removal")
        FixtureTree.write(destination.path(".folio"), "trash-clock", "not a folder")
        let destinationNow = try Destination(path: destination.path, create: true)
        let line = "run folders in /dst/.folio/trash are kept past trash-days until the time each was made can be recorded: "
            + "cannot open \(destination.path)/.folio/trash-clock: Not a directory; a file or a link stands where a folder should be: move it aside"
        for _ in 0..<2 {
            let purge = destinationNow.purgeTrash(olderThan: 30)
            XCTAssertEqual(trashListing(), [old])
            XCTAssertEqual(purge.notices(trash: "/dst/.folio/trash", trashDays: 30), [line])
        }
        XCTAssertEqual(unlink(destination.path(".folio/trash-clock")), 0)
        let recorded = destinationNow.purgeTrash(olderThan: 30)
        XCTAssertEqual(recorded.notices(trash: "/dst/.folio/trash", trashDays: 30), [])
        XCTAssertEqual(trashListing(), [old])
        XCTAssertNotNil(reading(of: old), "its first sighting is recorded now")

        // The folder of readings is there, but a folder stands at this run folder's reading.
        let another = "20200202-000000-another"
        FixtureTree.write(destination.path(".folio/trash/\(another)"), "z", "another removal")
        FixtureTree.write(destination.path(".folio/trash-clock/\(another)"), "in the way", "a folder, not a reading")
        let blocked = destinationNow.purgeTrash(olderThan: 30)
        XCTAssertEqual(trashListing(), [old, another])
        XCTAssertEqual(blocked.notices(trash: "/dst/.folio/trash", trashDays: 30), [
            "run folders in /dst/.folio/trash are kept past trash-days until the time each was made can be recorded: "
                + "cannot write \(destination.path)/.folio/trash-clock/\(another): Is a directory; a folder stands where a file should be: move it aside",
        ])
    }

    func testAReadingSeenFromAnother() {
        let stamp = ClockReading(wall: 1_000_000, sinceBoot: 50, boot: "b1")
        let carried = ClockReading(wall: 1_000_000, sinceBoot: 50, boot: "b1", carried: true)
        let cases: [(stamp: ClockReading, now: ClockReading, seen: ClockReading, why: String)] = [
            (stamp, ClockReading(wall: 1_000_100, sinceBoot: 150, boot: "b1"), stamp, "clock right all along"),
            (stamp, ClockReading(wall: 5_000_000, sinceBoot: 150, boot: "b1"), ClockReading(wall: 4_999_900, sinceBoot: 50, boot: "b1"), "clock set forward since"),
            (stamp, ClockReading(wall: 900_000, sinceBoot: 150, boot: "b1"), stamp, "clock set back since: never older than stamped"),
            (stamp, ClockReading(wall: 5_000_000, sinceBoot: 10, boot: "b2"), ClockReading(wall: 5_000_000, sinceBoot: 10, boot: "b2", carried: true), "another boot, first seen: made now"),
            (carried, ClockReading(wall: 5_000_000, sinceBoot: 10, boot: "b2"), carried, "another boot, carried: as it is"),
            (stamp, ClockReading(wall: 5_000_000, sinceBoot: 150, boot: ""), ClockReading(wall: 5_000_000, sinceBoot: 150, boot: "", carried: true), "boot unknown"),
        ]
        for (stamp, now, seen, why) in cases { XCTAssertEqual(stamp.seen(at: now), seen, why) }
        for reading in [stamp, carried, ClockReading(wall: 7, sinceBoot: 8, boot: "")] { XCTAssertEqual(ClockReading(text: reading.text), reading) }
        for text in ["b1 50", "", "b1 50 7 maybe", "b1 x 7"] { XCTAssertNil(ClockReading(text: text), text) }
    }

    func testRunFolderNamesReadBackAsTheirTime() {
        XCTAssertEqual(Destination.time(ofRunID: Destination.runID(at: Date(timeIntervalSince1970: 1_764_153_000), suffix: "-x1")), 1_764_153_000)
        XCTAssertEqual(Destination.time(ofRunID: "19700101-000000"), 0)
        for name in ["kept by hand", "2026112-104800-x", "20261126_104800", ".hidden", ""] { XCTAssertNil(Destination.time(ofRunID: name), name) }
    }
}
