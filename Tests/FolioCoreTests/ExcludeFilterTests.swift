import FolioCore
import XCTest

final class ExcludeFilterTests: XCTestCase {
    func testGlobs() throws {
        let rows: [(glob: String, path: String, folder: Bool, excluded: Bool)] = [
            ("*.tmp", "a.tmp", false, true),
            ("*.tmp", "deep/down/a.tmp", false, true),
            ("*.tmp", "a.tmp.keep", false, false),
            ("cache/", "x/cache", true, true),
            ("cache/", "x/cache", false, false),
            ("/top.txt", "top.txt", false, true),
            ("/top.txt", "sub/top.txt", false, false),
            ("photos/*.raw", "photos/a.raw", false, true),
            ("photos/*.raw", "photos/sub/a.raw", false, false),
            ("photos/**/*.raw", "photos/sub/deeper/a.raw", false, true),
            ("photos/**/*.raw", "photos/a.raw", false, true),
            ("?.txt", "a.txt", false, true),
            ("?.txt", "ab.txt", false, false),
            ("[!a]*", "b", false, true),
            ("[!a]*", "a", false, false),
            ("[a-c].jpg", "b.jpg", false, true),
            ("[a-c].jpg", "d.jpg", false, false),
            ("Thumbs.db", "x/Thumbs.db", false, true),
            // A `[` that no `]` closes matches itself (as fnmatch has it); so does an escaped one.
            ("*.[jJpg", "a.[jJpg", false, true),
            ("*.[jJpg", "a.jpg", false, false),
            ("\\[draft]*", "[draft] notes", false, true),
        ]
        for row in rows {
            let filter = ExcludeFilter([row.glob])
            XCTAssertEqual(filter.excludes(try RelativePath(validating: row.path), isFolder: row.folder), row.excluded, "\(row.glob) vs \(row.path)")
        }
    }

    /// The patterns a configuration is warned about: a `[` that no `]` closes, outside an escape and outside a set.
    func testUnclosedSetsAreFound() {
        let globs = ["*.[jJpg", "*.[jJ]pg", "\\[draft*", "[", "a[]b", "[]]", "[!]x", "x[a-c]y[", "\\", "plain"]
        XCTAssertEqual(ExcludeFilter.unclosedSets(in: globs), ["*.[jJpg", "[", "a[]b", "[!]x", "x[a-c]y["])
    }

    /// The last run's folders are listed ahead without those an exclude now leaves out, and without what lies in
    /// them: their records stay while the destination holds them, but the run does not want their entries.
    func testHintsDropExcludedFoldersAndWhatIsInThem() throws {
        let folders = try ["a", "a/cache", "a/cache/deep", "a/cached", "b", "b/x", "node_modules", "node_modules/dep"].map { try RelativePath(validating: $0) }
        var hints = ListingHints(folders: folders, memo: "m")
        hints.dropFolders(excludedBy: ExcludeFilter(["cache/", "/node_modules"]))
        XCTAssertEqual(hints.folders.map(\.description), ["a", "a/cached", "b", "b/x"])
        XCTAssertEqual(hints.memo, "m")
        var unfiltered = ListingHints(folders: folders)
        unfiltered.dropFolders(excludedBy: ExcludeFilter())
        XCTAssertEqual(unfiltered.folders, folders)
    }
}
