@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// A destination on exFAT (a USB drive, through exfat-fuse as on many desktops), which takes `A.txt` and `a.txt`
/// for one name. Once, two such source names replaced each other on every run, each time with a false "local
/// change" and a copy in the trash, and the mirror held one file under the other's name.
final class CaseInsensitiveDestinationTests: XCTestCase {
    var scratch: TemporaryDirectory!
    var image: MountedImage?
    var mountPoint: String { image!.mountPoint }
    /// Where every test mirrors: a folder on the exFAT image.
    var destination: String { mountPoint + "/mirror" }

    /// One run of `served` into `destination`, as target "t".
    private func mirror(_ served: TemporaryDirectory, with engine: SyncEngine) async -> RunReport {
        await engine.run(TargetConfig(name: "t", source: served.path, destination: destination), source: LocalSource(rootPath: served.path),
                         options: .init(trigger: .manual))
    }

    override func setUpWithError() throws {
        scratch = TemporaryDirectory("case-insensitive")
        image = try MountedImage(in: scratch, megabytes: 32, mkfs: ["mkfs.exfat"], mounting: .fuse(helper: "mount.exfat-fuse"))
    }

    override func tearDownWithError() throws {
        // The folder goes once the image is unmounted (see `TemporaryDirectory`).
        defer { (image, scratch) = (nil, nil) }
        try image?.unmount()
    }

    func testTheProbeTellsCaseIgnoringFilesystemsApart() throws {
        XCTAssertTrue(try Destination(path: mountPoint + "/mirror", create: true).ignoresCase)
        XCTAssertTrue(try Destination(path: mountPoint + "/mirror", create: false).ignoresCase, "a dry run asks without writing")
        XCTAssertFalse(try Destination(path: scratch.path("ext"), create: true).ignoresCase, "/tmp's own filesystem")
    }

    func testNamesDifferingOnlyInCaseAreSkippedWithALineAndNeverTradePlaces() async throws {
        let served = TemporaryDirectory("case-source")
        let mtime = (seconds: 1_700_000_000, nanoseconds: 0)
        let files = ["A.txt": "upper", "a.txt": "lower", "Sub/x": "in Sub", "sub/y": "in sub", "plain.txt": "plain"]
        for (name, content) in files { FixtureTree.write(served.path, name, content, mtime: mtime) }
        for folder in ["Sub", "sub"] { FixtureTree.setMtime(served.path(folder), mtime) }
        let events = EventRecorder()
        let engine = SyncEngine(state: MemoryStateStore(), events: events)

        let first = await mirror(served, with: engine)
        XCTAssertEqual(first.result, .synced, first.error ?? "")
        XCTAssertEqual(first.downloaded, 3)
        XCTAssertEqual(try String(contentsOfFile: destination + "/A.txt", encoding: .utf8), "upper")
        XCTAssertEqual(try String(contentsOfFile: destination + "/Sub/x", encoding: .utf8), "in Sub")
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination + "/Sub/y"), "sub/y was not poured into Sub")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination).sorted(), [".folio", "A.txt", "Sub", "plain.txt"])
        XCTAssertEqual(first.issues.map(\.description), [
            "skipped a.txt: differs only in case from A.txt, and the filesystem of \(destination) does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
            "skipped sub: differs only in case from Sub, and the filesystem of \(destination) does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
        ])
        XCTAssertTrue(events.notices.contains(first.issues.first?.description ?? "no issue"), "the line reaches the console")

        for _ in 0..<2 {
            let next = await mirror(served, with: engine)
            XCTAssertEqual(next.result, .unchanged, next.error ?? "")
            XCTAssertEqual(next.trashed + next.downloaded + next.updated + next.removed, 0, "\(next)")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash"), [])

        // Once A.txt is gone from the source, a.txt is mirrored: the old copy goes to the trash first, then the
        // new name is written (a rename by case only, on a filesystem where both are one name).
        XCTAssertEqual(unlink(served.path("A.txt")), 0)
        let renamed = await mirror(served, with: engine)
        XCTAssertEqual(renamed.result, .synced, renamed.error ?? "")
        XCTAssertEqual(renamed.removed, 1)
        XCTAssertEqual(renamed.downloaded, 1)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination).sorted(), [".folio", "Sub", "a.txt", "plain.txt"])
        XCTAssertEqual(try String(contentsOfFile: destination + "/a.txt", encoding: .utf8), "lower")
        let trash = try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash")
        XCTAssertEqual(trash.count, 1)
        XCTAssertEqual(try String(contentsOfFile: destination + "/.folio/trash/\(trash[0])/A.txt", encoding: .utf8), "upper")
    }

    /// Names exFAT cannot hold (a `:` in a film's name, a folder with a `?`, a name that is not UTF-8) are skipped
    /// with one line each, the folder's contents with it, and nothing is fetched for them: each run downloaded
    /// them, failed to rename them ("No such file or directory"), kept their partial files and failed.
    func testNamesTheFilesystemCannotHoldAreSkippedWithALineAndNotFetched() async throws {
        let served = TemporaryDirectory("unholdable-source")
        FixtureTree.write(served.path, "Movie: Part 1.mkv", "film")
        FixtureTree.write(served.path, "Album?/CD1/t.txt", "track")
        FixtureTree.write(served.path, "plain.txt", "plain")
        let raw: [UInt8] = Array(served.path.utf8) + Array("/caf".utf8) + [0xE9]
        let fd = CString.with(raw) { open($0, O_WRONLY | O_CREAT, 0o644) }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        for _ in 0..<2 {
            let run = await mirror(served, with: engine)
            XCTAssertTrue(run.result == .synced || run.result == .unchanged, run.error ?? "")
            XCTAssertEqual(run.failures.count, 0, "\(run.failures)")
            XCTAssertEqual(run.issues.map(\.description), [
                "skipped Album?: the filesystem of \(destination) cannot hold \"?\" in a name (FAT and exFAT cannot); rename it at the source, exclude it, or mirror to a filesystem that can (ext4, xfs, btrfs)",
                "skipped Movie: Part 1.mkv: the filesystem of \(destination) cannot hold \":\" in a name (FAT and exFAT cannot); rename it at the source, exclude it, or mirror to a filesystem that can (ext4, xfs, btrfs)",
                "skipped caf\\xe9: the filesystem of \(destination) cannot hold a name that is not UTF-8 (FAT and exFAT cannot); rename it at the source, exclude it, or mirror to a filesystem that can (ext4, xfs, btrfs)",
            ])
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination).sorted(), [".folio", "plain.txt"])
        let shards = try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/partial")
        for shard in shards { XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/partial/" + shard), [], shard) }
    }

    /// A file dated 1970 is kept as 1980-01-01 on exFAT. exfat-fuse shows the time Folio set until the drive is
    /// mounted again; after that, the clamped time is neither a local change (the file went to the trash and was
    /// fetched again at every replug) nor a reason to fetch the file again.
    func testATimeBefore1980IsKeptClampedWithoutChurnAcrossAReplug() async throws {
        let served = TemporaryDirectory("old-times")
        FixtureTree.write(served.path, "old.txt", "from 1970", mtime: (0, 0))
        FixtureTree.write(served.path, "new.txt", "from 2023", mtime: (1_700_000_000, 0))
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        let first = await mirror(served, with: engine)
        XCTAssertEqual(first.downloaded, 2, first.error ?? "")
        for _ in 0..<2 {
            try image!.remount()
            let next = await mirror(served, with: engine)
            XCTAssertEqual(next.result, .unchanged, "\(next)")
            XCTAssertEqual(next.trashed + next.downloaded + next.updated, 0, "\(next)")
        }
        XCTAssertEqual(try String(contentsOfFile: destination + "/old.txt", encoding: .utf8), "from 1970")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash"), [])
    }

    /// exFAT takes Greek final sigma for sigma, a pair the check before the run leaves alone (their upper cases
    /// agree, their lower cases do not): the second name to arrive fails with a line on every run, and neither is
    /// traded for the other or put in the trash.
    func testATwinOnlyTheFilesystemFoldsFailsWithALineAndIsNotTraded() async throws {
        let served = TemporaryDirectory("case-source")
        FixtureTree.write(served.path, "aσ.txt", "sigma", mtime: (1_700_000_000, 0))
        FixtureTree.write(served.path, "aς.txt", "final sigma", mtime: (1_700_000_000, 0))
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        var held: [String] = []
        for run in 0..<3 {
            let report = await mirror(served, with: engine)
            XCTAssertEqual(report.failures.count, 1, "run \(run): \(report.failures)")
            XCTAssertTrue(report.failures.first?.message.contains("a name there that differs from it only in case takes its place") == true, "\(report.failures)")
            XCTAssertEqual(report.trashed, 0, "run \(run)")
            let names = try FileManager.default.contentsOfDirectory(atPath: destination).filter { $0 != ".folio" }
            XCTAssertEqual(names.count, 1)
            if run == 0 { held = names } else { XCTAssertEqual(names, held, "the name held stays") }
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash"), [])
    }

    /// A name the check before the run cannot see: `K.txt`, written here by hand, while the source has `k.txt` and
    /// a folder it could not list (so `K.txt` is not removed). Once, `k.txt` was put in place through `K.txt`'s
    /// name, which moved the hand-written file to the trash: a removal the incomplete listing forbade. Now the
    /// file fails with a line, every run, and `K.txt` stays.
    func testANewFileDoesNotTakeTheNameOfACaseTwinAlreadyThere() async throws {
        let source = MemorySource()
        source.setFile("k.txt", "from the source")
        source.setFile("locked/x", "unlisted")
        source.makeUnreadable("locked")
        FixtureTree.write(destination, "K.txt", "written here")
        let target = TargetConfig(name: "t", source: "memory://", destination: destination)
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        for run in 0..<2 {
            let report = await engine.run(target, source: source, options: .init(trigger: .manual))
            XCTAssertEqual(report.failures.map(\.path.description), ["k.txt"], "run \(run)")
            XCTAssertEqual(report.failures.first?.message,
                           "cannot write \(destination)/k.txt: a name there that differs from it only in case takes its place, as the filesystem of \(destination) does not tell them apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)")
            XCTAssertEqual(report.trashed, 0)
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination).sorted(), [".folio", "K.txt", "locked"])
            XCTAssertEqual(try String(contentsOfFile: destination + "/K.txt", encoding: .utf8), "written here")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash"), [])
    }
}
