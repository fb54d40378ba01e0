@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

final class LocalSourceTests: XCTestCase {
    func testConformance() async throws {
        let served = TemporaryDirectory("local-source")
        try await SourceConformance.run(servedRoot: served.path) { LocalSource(rootPath: $0) }
    }

    /// A file cut short after the listing (its mtime put back, so only the copy can tell) is refused, whether
    /// it is copied with read/write (small) or `copy_file_range` (from `LocalConnection.kernelCopyFrom` up).
    func testAFileThatShrankAfterTheListingIsRefusedAtEitherSize() async throws {
        let served = TemporaryDirectory("local-shrink")
        let scratch = TemporaryDirectory("local-shrink-out")
        let mtime = (seconds: 1_650_000_000, nanoseconds: 250)
        let sizes = ["small.bin": 5_000, "large.bin": Int(LocalConnection.kernelCopyFrom) + 4_321]
        for (name, size) in sizes { FixtureTree.write(served.path, name, FixtureTree.bytes(count: size, seed: 3), mtime: mtime) }
        let source = LocalSource(rootPath: served.path)
        let snapshot = try await source.snapshot(options: ListingOptions())
        let connection = try source.makeConnection()
        defer { connection.close() }
        for (name, size) in sizes {
            XCTAssertEqual(truncate(served.path(name), off_t(size - 1_000)), 0)
            FixtureTree.setMtime(served.path(name), mtime)
            let entry = try XCTUnwrap(snapshot.entry(at: try RelativePath(validating: name)))
            XCTAssertThrowsError(try SourceConformance.download(entry, with: connection, into: scratch.path(name), from: 0), name) { error in
                XCTAssertEqual((error as? SourceError)?.code, .changed, "\(error)")
                XCTAssertEqual((error as? SourceError)?.message, "\(name) shrank while it was being copied; it will be fetched again next run")
            }
        }
    }

    /// Swapped after the listing, a folder for a link to one outside the source, or a file for a FIFO: the copy
    /// neither follows the link (under either policy: `follow` may not leave the source) nor waits on the FIFO.
    func testWhatTookAListedEntrysPlaceIsNotCopied() async throws {
        let served = TemporaryDirectory("local-swap")
        let outside = TemporaryDirectory("local-swap-outside")
        let scratch = TemporaryDirectory("local-swap-out")
        let mtime = (seconds: 1_650_000_000, nanoseconds: 0)
        FixtureTree.write(outside.path, "secret.txt", "not yours", mtime: mtime)
        FixtureTree.write(served.path, "z/secret.txt", "mine, same", mtime: mtime)
        FixtureTree.write(served.path, "pipe", "a file", mtime: mtime)
        for policy in ListingOptions.SymlinkPolicy.allCases {
            let source = LocalSource(rootPath: served.path, symlinks: policy)
            let snapshot = try await source.snapshot(options: ListingOptions(symlinks: policy))
            XCTAssertEqual(rename(served.path("z"), served.path("z.orig")), 0)
            XCTAssertEqual(symlink(outside.path, served.path("z")), 0)
            XCTAssertEqual(unlink(served.path("pipe")), 0)
            XCTAssertEqual(mkfifo(served.path("pipe"), 0o644), 0)
            let connection = try source.makeConnection()
            let secret = try XCTUnwrap(snapshot.entry(at: try RelativePath(validating: "z/secret.txt")))
            XCTAssertThrowsError(try SourceConformance.download(secret, with: connection, into: scratch.path("secret"), from: 0), "\(policy)") { error in
                XCTAssertEqual((error as? SourceError)?.message, policy == .skip
                    ? "\(served.path)/z/secret.txt, or a folder on its path, became a symbolic link; not followed"
                    : "\(served.path)/z/secret.txt now leads outside the source, to \(PathText.real(outside.path))/secret.txt, through a link made since the listing; not copied")
            }
            let pipe = try XCTUnwrap(snapshot.entry(at: try RelativePath(validating: "pipe")))
            XCTAssertThrowsError(try SourceConformance.download(pipe, with: connection, into: scratch.path("pipe"), from: 0), "\(policy)") { error in
                XCTAssertEqual((error as? SourceError)?.code, .changed)
                XCTAssertEqual((error as? SourceError)?.message, "\(served.path)/pipe is no longer a regular file (a folder, FIFO, socket or device took its place since the listing); not copied")
            }
            connection.close()
            XCTAssertNotEqual(FixtureTree.read(scratch.path("secret")), Array("not yours".utf8))
            // Back as listed, for the other policy.
            XCTAssertEqual(unlink(served.path("z")), 0)
            XCTAssertEqual(rename(served.path("z.orig"), served.path("z")), 0)
            XCTAssertEqual(unlink(served.path("pipe")), 0)
            FixtureTree.write(served.path, "pipe", "a file", mtime: mtime)
        }
    }

    /// Under `follow`, a link swapped in after the listing that leads outside the source to a FIFO is refused
    /// before anything opens the FIFO: a writer waiting on it is not let through (an open for reading would have
    /// released it, as an open of a device would have had its effect).
    func testALinkSwappedInToAFIFOOutsideTheSourceIsRefusedWithoutOpeningIt() async throws {
        let served = TemporaryDirectory("local-fifo")
        let outside = TemporaryDirectory("local-fifo-outside")
        let scratch = TemporaryDirectory("local-fifo-out")
        FixtureTree.write(served.path, "song.flac", "listed", mtime: (1_650_000_000, 0))
        XCTAssertEqual(mkfifo(outside.path("fifo"), 0o644), 0)
        let source = LocalSource(rootPath: served.path, symlinks: .follow)
        let snapshot = try await source.snapshot(options: ListingOptions(symlinks: .follow))
        XCTAssertEqual(unlink(served.path("song.flac")), 0)
        XCTAssertEqual(symlink(outside.path("fifo"), served.path("song.flac")), 0)

        let writerThrough = DispatchSemaphore(value: 0)
        let fifo = outside.path("fifo")
        Thread {
            // Blocks until a reader opens the FIFO.
            let fd = open(fifo, O_WRONLY)
            if fd >= 0 { close(fd) }
            writerThrough.signal()
        }.start()
        // Until the writer waits in the FIFO's open: else a copy that opened the FIFO could go unnoticed.
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !Self.aThreadWaitsInAFIFOsOpen() { usleep(5_000) }
        XCTAssertTrue(Self.aThreadWaitsInAFIFOsOpen(), "the writer never came to wait on the FIFO")
        let connection = try source.makeConnection()
        let entry = try XCTUnwrap(snapshot.entry(at: try RelativePath(validating: "song.flac")))
        XCTAssertThrowsError(try SourceConformance.download(entry, with: connection, into: scratch.path("song"), from: 0)) { error in
            XCTAssertEqual((error as? SourceError)?.message,
                           "\(served.path)/song.flac now leads outside the source, to \(PathText.real(outside.path))/fifo, through a link made since the listing; not copied")
        }
        connection.close()
        XCTAssertEqual(writerThrough.wait(timeout: .now() + 0.5), .timedOut, "the FIFO was opened for reading, which let its writer through")
        // Lets the writer go.
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        XCTAssertEqual(writerThrough.wait(timeout: .now() + 10), .success)
        close(reader)
    }

    /// Whether a thread of this process waits in the open of a FIFO for the other end (the kernel's wait channel).
    private static func aThreadWaitsInAFIFOsOpen() -> Bool {
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return threads.contains { (try? String(contentsOfFile: "/proc/self/task/\($0)/wchan", encoding: .utf8)) == "wait_for_partner" }
    }
}

final class LocalSourceSymlinkTests: XCTestCase {
    /// A tree with links inside, outside and in a loop, plus a FIFO.
    private func makeTree() -> (TemporaryDirectory, TemporaryDirectory) {
        let root = TemporaryDirectory("links")
        let outside = TemporaryDirectory("outside")
        FixtureTree.write(root.path, "real/file.txt", "inside")
        FixtureTree.write(outside.path, "secret.txt", "outside")
        symlink(root.path("real/file.txt"), root.path("link-to-file"))
        symlink("real", root.path("link-to-folder"))
        symlink("/etc/passwd", root.path("passwd"))
        symlink(outside.path, root.path("link-outside"))
        symlink("..", root.path("real/loop"))
        mkfifo(root.path("fifo"), 0o644)
        return (root, outside)
    }

    private func listing(_ snapshot: Snapshot) -> [String] {
        snapshot.entries.map { "\($0.path)\($0.kind == .folder ? "/" : "")" }
    }

    func testSkipPolicyListsNoLinksAndNotesThem() async throws {
        let (root, _) = makeTree()
        let snapshot = try await LocalSource(rootPath: root.path).snapshot(options: ListingOptions(symlinks: .skip))
        XCTAssertEqual(listing(snapshot), ["real/", "real/file.txt"])
        let skipped = Set(snapshot.issues.map(\.path))
        XCTAssertEqual(skipped, ["fifo", "link-outside", "link-to-file", "link-to-folder", "passwd", "real/loop"])
        XCTAssertTrue(snapshot.isComplete)
    }

    func testFollowPolicyStaysInsideAndStopsLoops() async throws {
        let (root, _) = makeTree()
        let source = LocalSource(rootPath: root.path, symlinks: .follow)
        let snapshot = try await source.snapshot(options: ListingOptions(symlinks: .follow))
        XCTAssertEqual(listing(snapshot), ["link-to-file", "link-to-folder/", "link-to-folder/file.txt", "real/", "real/file.txt"])
        let reasons = Dictionary(uniqueKeysWithValues: snapshot.issues.map { ($0.path, $0.description) })
        XCTAssertEqual(reasons["passwd"], "skipped passwd: symbolic link leads outside the source root or nowhere")
        XCTAssertEqual(reasons["link-outside"], "skipped link-outside: symbolic link leads outside the source root or nowhere")
        XCTAssertNotNil(reasons["real/loop"])
        // A followed link downloads the target's bytes.
        let entry = try XCTUnwrap(snapshot.entry(at: RelativePath(validating: "link-to-file")))
        let scratch = TemporaryDirectory("out")
        let connection = try source.makeConnection()
        defer { connection.close() }
        XCTAssertEqual(try SourceConformance.download(entry, with: connection, into: scratch.path("x"), from: 0), Array("inside".utf8))
    }

    /// With `symlinks = follow`, a link that cannot be resolved for a reason other than a missing target or a loop
    /// (here permission denied on the way to its target) is unreadable, which blocks removals: what was mirrored
    /// through it is not trashed. A dangling link and a loop of links are only skipped, and an excluded link
    /// blocks nothing. The target's folder is excluded, so that the link is the only way to it.
    func testALinkThatCannotBeResolvedBlocksRemovals() throws {
        let root = TemporaryDirectory("links-denied")
        chmod(root.path, 0o755)
        FixtureTree.write(root.path, "real/data/f.txt", "data")
        FixtureTree.makeFolder(root.path, "links")
        symlink("../real/data", root.path("links/to-data"))
        symlink("nowhere", root.path("links/dangling"))
        symlink("loop-b", root.path("links/loop-a"))
        symlink("loop-a", root.path("links/loop-b"))
        let skipped = [
            ListingIssue(path: "links/dangling", kind: .skipped("symbolic link leads outside the source root or nowhere")),
            ListingIssue(path: "links/loop-a", kind: .skipped("symbolic link loop")),
            ListingIssue(path: "links/loop-b", kind: .skipped("symbolic link loop")),
        ]
        let readable = walkAsNobody(root.path, exclude: ExcludeFilter(["real/"]))
        XCTAssertEqual(readable.items.map(\.path.description), ["links", "links/to-data", "links/to-data/f.txt"])
        XCTAssertEqual(readable.issues.sorted { $0.path < $1.path }, skipped)

        XCTAssertEqual(chmod(root.path("real"), 0o700), 0)
        let denied = walkAsNobody(root.path, exclude: ExcludeFilter(["real/"]))
        XCTAssertEqual(denied.items.map(\.path.description), ["links"])
        XCTAssertEqual(denied.issues.sorted { $0.path < $1.path },
                       skipped + [ListingIssue(path: "links/to-data", kind: .unreadable("cannot resolve the symbolic link: Permission denied"))])
        XCTAssertEqual(denied.issues.filter(\.blocksRemovals).map(\.path), ["links/to-data"])

        let excluded = walkAsNobody(root.path, exclude: ExcludeFilter(["real/", "links/to-data"]))
        XCTAssertEqual(excluded.issues.sorted { $0.path < $1.path }, skipped)
    }

    /// A source walk following links, run as `nobody`. Why that way: root resolves any path whatever its
    /// permissions. Linux keeps the user files are accessed as (setfsuid) per thread, and a thread starts with
    /// its creator's, so the walk runs on a thread of its own that takes `nobody` (and so do the walker threads
    /// it starts), while the rest of the test process stays root.
    private func walkAsNobody(_ root: String, exclude: ExcludeFilter) -> TreeWalker.Result {
        typealias SetFileSystemID = @convention(c) (UInt32) -> Int32
        // Why dlsym: Swift's Glibc module leaves out <sys/fsuid.h>. RTLD_DEFAULT is the null handle on glibc.
        let setfsuid = unsafeBitCast(dlsym(nil, "setfsuid")!, to: SetFileSystemID.self)
        let setfsgid = unsafeBitCast(dlsym(nil, "setfsgid")!, to: SetFileSystemID.self)
        let fd = open(root, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        let walker = TreeWalker(rootPath: root, symlinks: .follow, exclude: exclude, isDestination: false, skipAtRoot: [], threads: 2)
        let result = Locked<TreeWalker.Result?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            _ = setfsgid(65534)
            _ = setfsuid(65534)
            let walked = walker.walk(rootFD: fd)
            result.withLock { $0 = walked }
            done.signal()
        }.start()
        done.wait()
        return result.withLock { $0 }!
    }
}
