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
}
