@testable import FolioCore
import XCTest

final class RelativePathTests: XCTestCase {
    func testNamesFolioRefuses() throws {
        let refused: [(String, NameError.Problem)] = [
            ("..", .dotName), (".", .dotName), ("a/../b", .dotName), ("a//b", .empty), ("/abs", .empty), ("a/", .empty),
            ("new\nline", .controlCharacter), ("tab\there", .controlCharacter), ("del\u{7F}", .controlCharacter),
            (String(repeating: "x", count: 256), .tooLong),
        ]
        for (text, problem) in refused {
            XCTAssertThrowsError(try RelativePath(validating: text), text) { error in
                XCTAssertEqual((error as? NameError)?.problem, problem, text)
            }
        }
        XCTAssertThrowsError(try RelativePath(validating: [UInt8(ascii: "a"), 0, UInt8(ascii: "b")])) { error in
            XCTAssertEqual((error as? NameError)?.problem, .nul)
        }
        XCTAssertThrowsError(try RelativePath.root.appending(name: Array("a/b".utf8))) { error in
            XCTAssertEqual((error as? NameError)?.problem, .slash)
        }
        // A path too long, of names each short enough: its line says it is the path, and what the limit is.
        let deep = try RelativePath(validating: Array(repeating: String(repeating: "d", count: 210), count: 18).joined(separator: "/"))
        XCTAssertThrowsError(try deep.appending(name: Array("film.mkv".utf8))) { error in
            XCTAssertEqual("\(error)", "name \"film.mkv\" makes a path longer than 3800 bytes, the most Folio mirrors (it keeps room for its trash under Linux's 4096)")
        }
    }

    func testNamesFolioKeepsAsTheirBytes() throws {
        for text in ["a b", "#1 %41", "?&=", "...", ".hidden", "caf\u{E9}", "cafe\u{301}", "日本語", String(repeating: "y", count: 255)] {
            let path = try RelativePath(validating: "dir/" + text)
            XCTAssertEqual(Array(path.name), Array(text.utf8), text)
        }
        // Not UTF-8: kept exactly, shown escaped.
        let latin1 = try RelativePath.root.appending(name: [0x63, 0x61, 0x66, 0xE9])
        XCTAssertEqual(latin1.bytes, [0x63, 0x61, 0x66, 0xE9])
        XCTAssertEqual(latin1.description, "caf\\xe9")
        // A right-to-left override is kept, and shown escaped: on a terminal, "photo\u{202E}gpj.exe" reads as an image.
        let override = try RelativePath(validating: "photo\u{202E}gpj.exe")
        XCTAssertEqual(override.bytes, Array("photo\u{202E}gpj.exe".utf8))
        XCTAssertEqual(override.description, "photo\\u{202E}gpj.exe")
        XCTAssertEqual(try RelativePath(validating: "a\u{85}b").description, "a\\u{85}b")
        // NFC and NFD are two names.
        XCTAssertNotEqual(try RelativePath(validating: "caf\u{E9}"), try RelativePath(validating: "cafe\u{301}"))
        // A server's name of megabytes is shown by its start and its length, not printed whole.
        let huge = [UInt8](repeating: UInt8(ascii: "a"), count: 64 << 20)
        XCTAssertEqual(RelativePath.display(huge), String(repeating: "a", count: RelativePath.displayLimit) + "… (67108864 bytes)")
    }

    func testOrderPutsChildrenRightAfterTheirFolder() throws {
        let paths = try ["a-b", "a/b", "a", "a/b/c", "b", "a.b"].map { try RelativePath(validating: $0) }
        XCTAssertEqual(paths.sorted().map(\.description), ["a", "a/b", "a/b/c", "a-b", "a.b", "b"])
    }

    func testParentsDepthAndContainment() throws {
        let path = try RelativePath(validating: "a/b/c")
        XCTAssertEqual(path.depth, 3)
        XCTAssertEqual(path.parent, try RelativePath(validating: "a/b"))
        XCTAssertEqual(try RelativePath(validating: "a").parent, .root)
        XCTAssertTrue(path.isWithin(try RelativePath(validating: "a/b")))
        XCTAssertFalse(try RelativePath(validating: "a/bc").isWithin(try RelativePath(validating: "a/b")))
    }

    func testNormalisationClashesAreReportedNotMerged() throws {
        var builder = SnapshotBuilder()
        builder.append(Entry(path: try RelativePath(validating: "caf\u{E9}.txt"), kind: .file, size: 1, mtime: FileTime(seconds: 1)))
        builder.append(Entry(path: try RelativePath(validating: "cafe\u{301}.txt"), kind: .file, size: 2, mtime: FileTime(seconds: 1)))
        let snapshot = builder.finish()
        XCTAssertEqual(snapshot.entries.count, 2)
        XCTAssertEqual(snapshot.issues.count, 1)
        guard case .normalizationClash = snapshot.issues[0].kind else { return XCTFail("\(snapshot.issues)") }
        XCTAssertTrue(snapshot.isComplete, "a clash must not block removals")
    }

    func testEachNormalisationTwinIsReportedAgainstTheFirstListedAmongManyNames() throws {
        let nfc = try RelativePath(validating: "d/\u{C5}ngstr\u{F6}m.txt")            // Å and ö precomposed
        let nfd = try RelativePath(validating: "d/A\u{30A}ngstro\u{308}m.txt")       // both decomposed
        let mixed = try RelativePath(validating: "d/\u{212B}ngstr\u{F6}m.txt")      // Å as ANGSTROM SIGN
        let unrelated = try (0..<2_000).map { try RelativePath(validating: "d/n\u{E9}e \($0).txt") }
        // nfd listed first: the others are its twins, each reported once though the source listed nfc twice.
        var builder = SnapshotBuilder()
        for path in [nfd] + unrelated + [nfc, mixed, nfc] {
            builder.append(Entry(path: path, kind: .file, size: 1, mtime: FileTime(seconds: 1)))
        }
        let pairs = builder.finish().issues.compactMap { issue -> [String]? in
            guard case .normalizationClash(let other) = issue.kind else { return nil }
            return [issue.path, other]
        }
        XCTAssertEqual(pairs, [[nfd.description, nfc.description], [nfd.description, mixed.description]])
    }

    func testABuilderOfManyChunksAndMergedSharesFinishesAsOneSortedSnapshot() throws {
        // More entries than several chunks hold, appended out of order, with folders' own builders merged in (as
        // SFTP's readdir levels and its exec listing do), one path listed twice.
        let count = SnapshotBuilder.chunkSize * 2 + 123
        let paths = try (0..<count).map { try RelativePath(validating: String(format: "f%06d", $0)) }
        var builder = SnapshotBuilder(reservingCapacity: 10)
        for index in (0..<count).reversed() where index % 2 == 1 {
            builder.append(Entry(path: paths[index], kind: .file, size: Int64(index), mtime: FileTime(seconds: 1)))
        }
        var folder = SnapshotBuilder()
        for index in stride(from: 0, to: count, by: 2) {
            folder.append(Entry(path: paths[index], kind: .file, size: Int64(index), mtime: FileTime(seconds: 1)))
        }
        folder.append(Entry(path: paths[7], kind: .file, size: -1, mtime: FileTime(seconds: 1)))
        builder.merge(folder)
        let snapshot = builder.finish()
        XCTAssertEqual(snapshot.entries.count, count)
        XCTAssertTrue(snapshot.entries.map(\.path) == paths, "in path order")
        XCTAssertTrue(snapshot.entries.map(\.size) == (0..<count).map(Int64.init), "each path's first listing kept")
        XCTAssertEqual(snapshot.issues.map(\.path), [paths[7].description])
    }

    /// A file of a negative size or one past `Entry.maximumFileSize` (a hostile server's listing) is unreadable,
    /// not planned: their sum overflowed, and the run crashed.
    func testAFileOfAnImpossibleSizeIsUnreadable() throws {
        var builder = SnapshotBuilder()
        for (name, size) in [("ok", Int64(12)), ("negative", -5), ("huge", .max), ("largest", Entry.maximumFileSize)] {
            builder.append(Entry(path: try RelativePath(validating: name), kind: .file, size: size, mtime: FileTime(seconds: 1)))
        }
        let snapshot = builder.finish()
        XCTAssertEqual(snapshot.entries.map(\.path.description), ["largest", "ok"])
        XCTAssertEqual(snapshot.issues.map(\.description), [
            "cannot mirror huge: the source gave it an impossible size (9223372036854775807 bytes)",
            "cannot mirror negative: the source gave it an impossible size (-5 bytes)",
        ])
        XCTAssertFalse(snapshot.isComplete, "nothing is removed on a listing that holds one")
        var plan = SyncPlan()
        plan.downloads = (0..<8_200).map { _ in SyncPlan.Download(entry: snapshot.entries[0]) }
        XCTAssertEqual(plan.downloadBytes, .max, "a total past Int64 is held there")
    }

    func testTimesCompareAtTheCoarserPrecision() {
        let exact = FileTime(seconds: 100, nanoseconds: 999_999_999)
        XCTAssertTrue(FileTime.equal(exact, .nanosecond, FileTime(seconds: 100), .second))
        XCTAssertFalse(FileTime.equal(exact, .nanosecond, FileTime(seconds: 101), .second))
        XCTAssertFalse(FileTime.equal(exact, .nanosecond, FileTime(seconds: 100), .nanosecond))
        XCTAssertFalse(FileTime.equal(.unknown, .second, .unknown, .second))
        XCTAssertEqual(FileTime(nanoseconds: -1).truncated(to: .second), FileTime(seconds: -1))
    }

    /// The position sort gives exactly what a stable `sort(by:)` gives: path order, equal paths in their first order.
    func testSortByPathIsStableAndMatchesTheStandardSort() throws {
        let names = ["a", "a/b", "a b", "a/b/c", "a-b", "é", "e\u{301}", "z", "a/a", "b"]
        for round in 0..<20 {
            let items: [(path: RelativePath, tag: Int)] = try (0..<(round * 7 + 1)).map { index in
                (try RelativePath(validating: names[(index * 7 + index / 3 + round) % names.count]), index)
            }
            var sorted = items
            sorted.withUnsafeMutableBufferPointer { $0.sortByPath(\.path) }
            let expected = items.sorted { RelativePath.compare($0.path.bytes, $1.path.bytes) < 0 }
            XCTAssertEqual(sorted.map(\.tag), expected.map(\.tag), "round \(round)")
        }
    }
}
