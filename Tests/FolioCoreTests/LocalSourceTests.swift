import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

final class LocalSourceTests: XCTestCase {
    func testConformance() async throws {
        let served = TemporaryDirectory("local-source")
        try await SourceConformance.run(servedRoot: served.path) { LocalSource(rootPath: $0) }
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
}
