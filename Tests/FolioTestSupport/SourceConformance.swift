import FolioCore
import Foundation
import Glibc
import XCTest

/// The checks every `Source` must pass, run against a real server (or folder) serving `ConformanceTree`.
///
/// A source test creates the tree with `ConformanceTree.create(at:)` in the folder its server serves, makes a
/// `Source` for it, and calls `SourceConformance.run`. The tree has names with spaces, `#`, `%`, `?`, `&`,
/// NFC and NFD unicode, an empty file, an empty folder, a deep path and a file of 3 MiB and 777 bytes.
public enum SourceConformance {
    public struct Options: Sendable {
        /// What mtime precision the source must at least reach (HTTP: seconds).
        public var precision: TimePrecision
        /// Whether the source lists folder mtimes.
        public var folderTimes: Bool
        public init(precision: TimePrecision = .nanosecond, folderTimes: Bool = true) {
            self.precision = precision
            self.folderTimes = folderTimes
        }
    }

    /// Runs every check; `makeSource(root)` builds the source for a served folder path (`root` is the local path
    /// of the folder the server serves; the closure maps it to the source's URL).
    public static func run(
        servedRoot: String, options: Options = Options(),
        file: StaticString = #filePath, line: UInt = #line,
        makeSource: (String) throws -> any Source
    ) async throws {
        ConformanceTree.create(at: servedRoot)
        let source = try makeSource(servedRoot)

        // 1. The listing: exact paths, kinds, sizes; mtimes at the source's precision.
        let snapshot = try await source.snapshot(options: ListingOptions())
        let listed = snapshot.entries.map { "\($0.path)\($0.kind == .folder ? "/" : "")" }
        XCTAssertEqual(listed, ConformanceTree.expectedListing, "listing", file: file, line: line)
        XCTAssertTrue(snapshot.isComplete, "issues: \(snapshot.issues)", file: file, line: line)
        for entry in snapshot.entries {
            let local = servedRoot + "/" + String(decoding: entry.path.bytes, as: UTF8.self)
            var info = stat()
            XCTAssertEqual(lstat(local, &info), 0, file: file, line: line)
            if entry.kind == .file {
                XCTAssertEqual(entry.size, Int64(info.st_size), "size of \(entry.path)", file: file, line: line)
            }
            if entry.kind == .file || options.folderTimes {
                let actual = FileTime(seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec))
                XCTAssertLessThanOrEqual(entry.precision, options.precision, "precision of \(entry.path)", file: file, line: line)
                XCTAssertEqual(entry.mtime.truncated(to: entry.precision), actual.truncated(to: entry.precision), "mtime of \(entry.path)", file: file, line: line)
            }
        }

        // 2. Whole downloads, byte for byte; 3. a resumed download of the big file from an offset.
        let scratch = TemporaryDirectory("conformance-out")
        let connection = try makeConnectionOffPool(source)
        defer { connection.close() }
        for entry in snapshot.entries where entry.kind == .file {
            let expected = FixtureTree.read(servedRoot + "/" + String(decoding: entry.path.bytes, as: UTF8.self))
            let got = try download(entry, with: connection, into: scratch.path("out"), from: 0)
            XCTAssertEqual(got, expected, "content of \(entry.path)", file: file, line: line)
        }
        if source.features.resumable, let big = snapshot.entry(at: try RelativePath(validating: "big.bin")) {
            let full = FixtureTree.read(servedRoot + "/big.bin")!
            // From an odd offset (written through the page cache) and a MiB one (direct I/O from there).
            for offset in [1_234_567, 1 << 20] {
                let got = try download(big, with: connection, into: scratch.path("resume"), from: Int64(offset), prefix: Array(full[..<offset]))
                XCTAssertTrue(got == full, "resumed content of big.bin from \(offset): \(got.count) of \(full.count) bytes, or different", file: file, line: line)
            }
        }

        // 4. A file changed after the listing is refused, not installed half-old.
        let changedEntry = snapshot.entry(at: try RelativePath(validating: "a.txt"))!
        FixtureTree.write(servedRoot, "a.txt", "changed content, longer than before", mtime: (1_700_000_999, 0))
        XCTAssertThrowsError(try download(changedEntry, with: connection, into: scratch.path("changed"), from: 0), file: file, line: line) { error in
            XCTAssertEqual((error as? SourceError)?.code, .changed, "\(error)", file: file, line: line)
        }

        // 5. Excludes prune the listing.
        let filtered = try await source.snapshot(options: ListingOptions(exclude: ExcludeFilter(["*.bin", "deep/"])))
        XCTAssertFalse(filtered.entries.contains { $0.path.name.starts(with: Array("big".utf8)) || $0.path.description.hasPrefix("deep") },
                       "excluded entries listed: \(filtered.entries.map(\.path))", file: file, line: line)
        XCTAssertTrue(filtered.entries.contains { $0.path.description == "a.txt" }, file: file, line: line)

        // 6. A missing root is an error, never an empty snapshot.
        let missing = try makeSource(servedRoot + "/no-such-folder")
        do {
            let empty = try await missing.snapshot(options: ListingOptions())
            XCTFail("a missing root listed \(empty.entries.count) entries", file: file, line: line)
        } catch let error as SourceError {
            XCTAssertEqual(error.code, .notFound, "\(error)", file: file, line: line)
            XCTAssertFalse(error.message.isEmpty, file: file, line: line)
        }

        // 7. Given the last listing's folders and memo as hints (a folder that never existed among them), a source
        // lists the tree as it is now, after folders were renamed, removed, added and turned into files.
        let ghost = try RelativePath(validating: "ghost")
        let hints = ListingHints(folders: snapshot.entries.filter { $0.kind == .folder }.map(\.path) + [ghost], memo: snapshot.memo)
        XCTAssertEqual(rename(servedRoot + "/folder with space", servedRoot + "/renamed folder"), 0, file: file, line: line)
        try FileManager.default.removeItem(atPath: servedRoot + "/unicode")
        try FileManager.default.removeItem(atPath: servedRoot + "/deep/a/b")
        FixtureTree.write(servedRoot, "deep/a/b", "now a file\n")
        FixtureTree.write(servedRoot, "new/inner/x.txt", "new\n")
        var hinted = ListingOptions()
        hinted.hints = hints
        let again = try await source.snapshot(options: hinted)
        let plain = try await makeSource(servedRoot).snapshot(options: ListingOptions())
        let describe = { (listing: Snapshot) in listing.entries.map { "\($0.path)\($0.kind == .folder ? "/" : "") \($0.size)" } }
        XCTAssertEqual(describe(again), describe(plain), "a listing with hints", file: file, line: line)
        XCTAssertEqual(Set(again.entries.map { "\($0.path)\($0.kind == .folder ? "/" : "")" }), Set(FixtureTree.listing(servedRoot)), file: file, line: line)
        XCTAssertTrue(again.isComplete, "issues: \(again.issues)", file: file, line: line)
    }

    /// Opens a connection on a fresh thread, as the engine's workers do.
    static func makeConnectionOffPool(_ source: any Source) throws -> any SourceConnection {
        try source.makeConnection()
    }

    /// Downloads into a fresh file (optionally starting from a prefix) and returns its bytes.
    public static func download(_ entry: Entry, with connection: any SourceConnection, into path: String, from offset: Int64, prefix: [UInt8] = []) throws -> [UInt8] {
        let fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0o644)
        precondition(fd >= 0)
        defer { close(fd) }
        prefix.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        // As the engine writes: a large file past the page cache, its last bytes written when the sink finishes.
        let sink = DownloadSink.forTesting(fileDescriptor: fd, offset: offset, expectedSize: entry.size, directIO: true, path: entry.path)
        try connection.download(entry, into: sink, from: offset)
        try sink.finish()
        return FixtureTree.read(path) ?? []
    }
}

/// The tree every source is checked against.
public enum ConformanceTree {
    public static let nfc = "caf\u{E9}"
    public static let nfd = "cafe\u{301}"

    public static let expectedListing: [String] = [
        "a.txt",
        "big.bin",
        "deep/",
        "deep/a/",
        "deep/a/b/",
        "deep/a/b/c/",
        "deep/a/b/c/leaf.txt",
        "empty folder/",
        "empty.bin",
        "folder with space/",
        "folder with space/100% #1 &more?.txt",
        "folder with space/plain.txt",
        "unicode/",
        "unicode/\(nfc).txt",
        "unicode/\(nfd).txt",
    ].sorted { RelativePath.compare(Array($0.utf8), Array($1.utf8)) < 0 }

    public static func create(at root: String) {
        FixtureTree.write(root, "a.txt", "alpha\n", mtime: (1_600_000_000, 123_456_789))
        FixtureTree.write(root, "big.bin", FixtureTree.bytes(count: 3 << 20 + 777, seed: 7), mtime: (1_600_000_100, 500_000_000))
        FixtureTree.write(root, "empty.bin", [], mtime: (1_600_000_200, 0))
        FixtureTree.write(root, "deep/a/b/c/leaf.txt", "leaf\n", mtime: (1_600_000_300, 1))
        FixtureTree.write(root, "folder with space/100% #1 &more?.txt", "odd name\n", mtime: (1_600_000_400, 999_999_999))
        FixtureTree.write(root, "folder with space/plain.txt", "plain\n", mtime: (1_600_000_500, 0))
        FixtureTree.write(root, "unicode/\(nfc).txt", "nfc\n", mtime: (1_600_000_600, 0))
        FixtureTree.write(root, "unicode/\(nfd).txt", "nfd!\n", mtime: (1_600_000_700, 0))
        FixtureTree.makeFolder(root, "empty folder")
        for folder in ["deep/a/b/c", "deep/a/b", "deep/a", "deep", "empty folder", "folder with space", "unicode"] {
            FixtureTree.setMtime(root + "/" + folder, (1_500_000_000, 250_000_000))
        }
    }
}
