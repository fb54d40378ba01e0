@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// The walker hands its items over in `RelativePath` order without sorting the tree: each folder's names in byte
/// order, each subtree right after its folder, subtrees read by other threads spliced back in.
final class TreeWalkerTests: XCTestCase {
    /// Names where byte order and path order disagree: "a b" sorts before "a/x" byte-wise (space < `/`), but a
    /// folder's children come before its next sibling.
    private static let names = ["a", "a b", "a-b", "a.b", "a~", "B", "b", "é", "e\u{301}", "0", "z z"]

    private func makeTree() -> (TemporaryDirectory, Int) {
        let root = TemporaryDirectory("walk-order")
        var count = 0
        for top in 0..<40 {
            let folder = "f\(top % 2 == 0 ? " " : "-")\(top)"
            count += 1
            for name in Self.names {
                FixtureTree.write(root.path, "\(folder)/\(name)/x", "x")
                FixtureTree.write(root.path, "\(folder)/\(name)/\(name)/y", "y")
                FixtureTree.write(root.path, "\(folder)/\(name) file", "z")
                count += 5
            }
        }
        return (root, count)
    }

    private func walk(_ root: String, threads: Int) -> (paths: [RelativePath], handoffs: Int) {
        let fd = open(root, O_RDONLY | O_DIRECTORY)
        defer { close(fd) }
        let walker = TreeWalker(rootPath: root, symlinks: .skip, exclude: ExcludeFilter([]), isDestination: true,
                                skipAtRoot: [], threads: threads)
        var findings = walker.gather(rootFD: fd)
        let handoffs = findings.handoffCount
        var paths: [RelativePath] = []
        findings.drain { paths.append($0.path) }
        XCTAssertEqual(paths.count, findings.count)
        return (paths, handoffs)
    }

    func testItemsComeInPathOrderOnAnyNumberOfThreads() throws {
        let (root, count) = makeTree()
        var handoffs = 0
        for threads in [1, 2, 4, 8] {
            let walked = walk(root.path, threads: threads)
            XCTAssertEqual(walked.paths.count, count, "\(threads) threads")
            // Strictly increasing: in order, and nothing twice. The first pair out of order, if any, is named.
            let misordered = zip(walked.paths, walked.paths.dropFirst()).first { !($0 < $1) }
            XCTAssertNil(misordered.map { "\($0) before \($1)" }, "\(threads) threads")
            handoffs += walked.handoffs
        }
        // One thread never hands on; with several, subtrees were read elsewhere and spliced back.
        XCTAssertEqual(walk(root.path, threads: 1).handoffs, 0)
        XCTAssertGreaterThan(handoffs, 0)
        let expected = try RelativePath(validating: "f 0/a")
        let paths = walk(root.path, threads: 4).paths
        let index = try XCTUnwrap(paths.firstIndex(of: expected))
        XCTAssertEqual(paths[index + 1...index + 4].map(\.description), ["f 0/a/a", "f 0/a/a/y", "f 0/a/x", "f 0/a b"])
    }

    func testLocalSnapshotIsTheSortedWalk() async throws {
        let (root, count) = makeTree()
        let snapshot = try await LocalSource(rootPath: root.path).snapshot(options: ListingOptions(parallelism: 4))
        XCTAssertEqual(snapshot.entries.count, count)
        XCTAssertEqual(snapshot.entries.map(\.path), walk(root.path, threads: 1).paths)
    }
}
