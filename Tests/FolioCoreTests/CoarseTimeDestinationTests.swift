@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// A destination whose filesystem keeps whole seconds (ext4 made with 128-byte inodes, as FAT, exFAT, HFS+ and
/// many network shares keep coarse times too): a copy's time is the source's cut down. Once, every run fetched
/// every file again and kept the previous copy in the trash, filling the disk within the trash's 30 days.
final class CoarseTimeDestinationTests: XCTestCase {
    var scratch: TemporaryDirectory!
    var image: MountedImage?
    var mountPoint: String { image!.mountPoint }

    override func setUpWithError() throws {
        scratch = TemporaryDirectory("coarse-times")
        image = try MountedImage(in: scratch, megabytes: 32, mkfs: ["mkfs.ext4", "-q", "-F", "-I", "128"], mounting: .loop)
    }

    override func tearDownWithError() throws {
        // The folder goes once the image is unmounted (see `TemporaryDirectory`).
        defer { (image, scratch) = (nil, nil) }
        try image?.unmount()
    }

    func testTheFilesystemsPrecisionIsFoundAndKept() throws {
        let coarse = try Destination(path: mountPoint + "/mirror", create: true)
        XCTAssertEqual(coarse.timePrecision, .second)
        XCTAssertEqual(try Destination(path: mountPoint + "/mirror", create: false).timePrecision, .second, "read back without setting it again")
        XCTAssertEqual(try Destination(path: scratch.path("fine"), create: true).timePrecision, .nanosecond, "/tmp's own filesystem")
        // A `.folio` restored from a tar of the coarse one (its probe time cut to the second) does not pass the
        // coarse filesystem's precision on to this one.
        FixtureTree.setMtime(scratch.path("fine/.folio"), (seconds: 1_000_000_001, nanoseconds: 0))
        XCTAssertEqual(try Destination(path: scratch.path("fine"), create: true).timePrecision, .nanosecond)
    }

    func testAMirrorThereIsUnchangedOnTheNextRunAndTheTrashStaysEmpty() async throws {
        let served = TemporaryDirectory("coarse-source")
        let mtime = (seconds: 1_700_000_000, nanoseconds: 123_456_789)
        for name in ["a.txt", "docs/b.txt", "docs/deep/c.txt"] { FixtureTree.write(served.path, name, "content of \(name)", mtime: mtime) }
        FixtureTree.setMtime(served.path("docs/deep"), mtime)
        FixtureTree.setMtime(served.path("docs"), mtime)
        let destination = mountPoint + "/mirror"
        let target = TargetConfig(name: "t", source: served.path, destination: destination)
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())

        let first = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(first.result, .synced, first.error ?? "")
        XCTAssertEqual(first.downloaded, 3)
        var info = stat()
        XCTAssertEqual(stat(destination + "/docs/deep/c.txt", &info), 0)
        XCTAssertEqual(FileTime(modificationOf: info), FileTime(seconds: 1_700_000_000), "the source's time, to the second")

        for _ in 0..<2 {
            let next = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
            XCTAssertEqual(next.result, .unchanged, next.error ?? "")
            XCTAssertEqual(next.downloaded + next.updated, 0)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/trash"), [])

        // A copy made there by other means (cp -a keeps what the filesystem can of the times) is adopted, not fetched.
        try LoopbackServer.run("cp", ["-a", served.path, mountPoint + "/copied"])
        var adopting = target
        adopting.name = "copied"
        adopting.destination = mountPoint + "/copied"
        let adopted = await engine.run(adopting, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(adopted.downloaded + adopted.updated + adopted.trashed, 0, "\(adopted)")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mountPoint + "/copied/.folio/trash"), [])
    }
}
