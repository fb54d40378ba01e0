import FolioCore
import FolioTestSupport
import Foundation
import XCTest

/// The real path that keys a destination's lock and tells a source and destination apart.
final class PathTextTests: XCTestCase {
    func testDotDotAfterALinkGoesUpFromTheLinksTarget() throws {
        let scratch = TemporaryDirectory("path-text")
        FixtureTree.makeFolder(scratch.path, "deep/inner")
        XCTAssertEqual(symlink(scratch.path("deep/inner"), scratch.path("link")), 0)
        let base = PathText.real(scratch.path)
        // The kernel reads link/.. as deep (inner's parent), not as the folder holding the link.
        XCTAssertEqual(PathText.real(scratch.path("link/..")), base + "/deep")
        XCTAssertEqual(PathText.real(scratch.path("link/../inner")), base + "/deep/inner")
        XCTAssertEqual(PathText.real(scratch.path("link")), base + "/deep/inner")
    }

    func testThePartThatDoesNotExistYetIsReadByItsText() {
        let scratch = TemporaryDirectory("path-text")
        FixtureTree.makeFolder(scratch.path, "a")
        let base = PathText.real(scratch.path)
        XCTAssertEqual(PathText.real(scratch.path("a/new/../mirror/")), base + "/a/mirror")
        XCTAssertEqual(PathText.real(scratch.path("a//./mirror")), base + "/a/mirror")
        XCTAssertEqual(PathText.real(scratch.path("a/")), base + "/a")
    }

    /// A link to a folder not made yet names where that folder will be: two targets, one writing to `d1` and
    /// one to a link to it, both ran on their first run (the second run refused them).
    func testALinkToAFolderNotMadeYetIsFollowedByItsText() {
        let scratch = TemporaryDirectory("path-text")
        FixtureTree.makeFolder(scratch.path, "a")
        let base = PathText.real(scratch.path)
        XCTAssertEqual(symlink("d1", scratch.path("relative")), 0)
        XCTAssertEqual(symlink(scratch.path("a/new"), scratch.path("absolute")), 0)
        XCTAssertEqual(symlink("../relative/sub", scratch.path("a/chained")), 0)
        XCTAssertEqual(PathText.real(scratch.path("relative")), base + "/d1")
        XCTAssertEqual(PathText.real(scratch.path("relative/mirror")), base + "/d1/mirror")
        XCTAssertEqual(PathText.real(scratch.path("absolute")), base + "/a/new")
        XCTAssertEqual(PathText.real(scratch.path("a/chained")), base + "/d1/sub")
        // A loop of links ends, read by its text.
        XCTAssertEqual(symlink("loop2", scratch.path("loop1")), 0)
        XCTAssertEqual(symlink("loop1", scratch.path("loop2")), 0)
        XCTAssertTrue(PathText.real(scratch.path("loop1")).hasPrefix(base + "/loop"))
    }
}
