@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// A disk that takes a file's bytes into memory but cannot write them out: ext4 on a thin image (its free blocks
/// are holes in a file on a full tmpfs), as a thin volume or a network share out of space behaves. Writes succeed;
/// only the flush fails. Once, that failure went unchecked: the file was renamed into place and reported added,
/// its pages read right until the kernel let them go (then zeros), and every later run said "unchanged".
final class WritebackFailureTests: XCTestCase {
    var scratch: TemporaryDirectory!
    var backing: String!
    var mountPoint: String!
    var mounted: [String] = []

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a tmpfs and an ext4 image needs root") }
        scratch = TemporaryDirectory("writeback")
        backing = scratch.path("tmpfs")
        mountPoint = scratch.path("mnt")
        for folder in [backing!, mountPoint!] { try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true) }
        do {
            try LoopbackServer.run("mount", ["-t", "tmpfs", "-o", "size=40m", "tmpfs", backing])
            mounted.insert(backing, at: 0)
            try LoopbackServer.run("fallocate", ["-l", "32M", backing + "/fs.img"])
            // nodiscard: mkfs would otherwise punch the whole image into holes. No journal, and errors=continue: a
            // metadata block placed in a hole would abort the journal and turn the filesystem read-only, which a
            // thin volume out of space need not do.
            try LoopbackServer.run("mkfs.ext4", ["-q", "-F", "-O", "^has_journal", "-E", "nodiscard", backing + "/fs.img"])
            try LoopbackServer.run("mount", ["-o", "loop,errors=continue", backing + "/fs.img", mountPoint])
            mounted.insert(mountPoint, at: 0)
        } catch {
            throw XCTSkip("cannot mount a tmpfs and a loop device here: \(error)")
        }
    }

    override func tearDownWithError() throws {
        // The folder goes once its mounts are gone (see `TemporaryDirectory`).
        defer { scratch = nil }
        for folder in mounted { try LoopbackServer.run("umount", ["--lazy", folder]) }
    }

    func testAFileTheDiskCouldNotTakeFailsAndIsFetchedAgainOnceItCan() async throws {
        let served = TemporaryDirectory("writeback-source")
        FixtureTree.write(served.path, "small.txt", "first", mtime: (1_700_000_000, 0))
        let destination = mountPoint + "/mirror"
        let target = TargetConfig(name: "t", source: served.path, destination: destination)
        let engine = SyncEngine(state: MemoryStateStore(), events: EventRecorder())
        let first = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(first.result, .synced, first.error ?? "")

        // The image's free blocks become holes, and the tmpfs under it fills: ext4 can still write its metadata
        // (in blocks the image holds), but no new data.
        try LoopbackServer.run("bash", ["-c", """
            set -e
            sync
            image=\(backing!)/fs.img
            size=$(dumpe2fs -h "$image" 2>/dev/null | awk -F: '/^Block size/ { gsub(/ /, "", $2); print $2 }')
            dumpe2fs "$image" 2>/dev/null | sed -n 's/^  Free blocks: //p' | tr ',' '\\n' | while read -r range; do
              [ -n "$range" ] || continue
              first=${range%-*}; last=${range#*-}
              fallocate --punch-hole --offset $((first * size)) --length $(((last - first + 1) * size)) "$image"
            done
            dd if=/dev/zero of=\(backing!)/fill bs=1M 2>/dev/null || true
            """])
        let film = FixtureTree.bytes(count: 1_000_000, seed: 9)
        FixtureTree.write(served.path, "film.bin", film, mtime: (1_700_000_100, 0))
        let failed = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(failed.failures.map(\.path.description), ["film.bin"], failed.error ?? "")
        let message = failed.failures.first?.message ?? ""
        XCTAssertTrue(message.hasPrefix("cannot write \(destination)/film.bin to disk: ") && message.hasSuffix("; it is fetched again next run"), message)
        XCTAssertFalse(FileManager.default.fileExists(atPath: destination + "/film.bin"), "not put in place")
        XCTAssertEqual(Self.partialFiles(in: destination), [], "not kept to be resumed either: what is on disk is not what was written")

        XCTAssertEqual(unlink(backing + "/fill"), 0)
        let again = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(again.result, .synced, again.error ?? "")
        XCTAssertEqual(again.downloaded, 1, "\(again.failures)")
        XCTAssertTrue(FixtureTree.read(destination + "/film.bin") == film, "film.bin as at the source")
    }

    private static func partialFiles(in destination: String) -> [String] {
        (0..<16).flatMap { shard in
            (try? FileManager.default.contentsOfDirectory(atPath: destination + "/.folio/partial/" + String(shard, radix: 16))) ?? []
        }
    }
}
