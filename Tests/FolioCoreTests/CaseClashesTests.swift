@testable import FolioCore
import XCTest

/// Which of a group of source names that differ only in case a case-ignoring destination gets, and what the
/// others are reported as.
final class CaseClashesTests: XCTestCase {
    func testNoClashLeavesTheSnapshotAsItIs() {
        let snapshot = make(["A.txt", "B/", "B/x", "b.txt"])
        let resolved = CaseClashes.resolve(snapshot, local: [], destination: "/usb")
        XCTAssertEqual(paths(resolved), ["A.txt", "B", "B/x", "b.txt"])
        XCTAssertEqual(resolved.issues, [])
    }

    func testTheFirstInPathOrderIsKeptAndALosingFolderTakesItsSubtree() {
        let snapshot = make(["A.txt", "Sub/", "Sub/x", "a.txt", "sub/", "sub/deep/", "sub/deep/y", "sUB/"])
        let resolved = CaseClashes.resolve(snapshot, local: [], destination: "/usb")
        XCTAssertEqual(paths(resolved), ["A.txt", "Sub", "Sub/x"])
        XCTAssertEqual(resolved.issues.map(\.description), [
            "skipped a.txt: differs only in case from A.txt, and the filesystem of /usb does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
            "skipped sUB: differs only in case from Sub, and the filesystem of /usb does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
            "skipped sub: differs only in case from Sub, and the filesystem of /usb does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
        ])
        XCTAssertTrue(resolved.isComplete, "a clash holds back no removal")
    }

    func testTheNameTheDestinationHoldsIsKept() {
        // The destination holds the later name of each pair (its folder too): a new twin at the source must not
        // trade places with the copy in use.
        let snapshot = make(["A.txt", "Sub/", "Sub/x", "a.txt", "sub/", "sub/x", "sub/y"])
        let local = [item("a.txt"), item("sub", folder: true), item("sub/x"), item("sub/y")]
        let resolved = CaseClashes.resolve(snapshot, local: local, destination: "/usb")
        XCTAssertEqual(paths(resolved), ["a.txt", "sub", "sub/x", "sub/y"])
        XCTAssertEqual(resolved.issues.map(\.path), ["A.txt", "Sub"])
    }

    func testTwinsInDifferentFoldersDoNotClash() {
        let snapshot = make(["a/", "a/X", "b/", "b/x"])
        XCTAssertEqual(paths(CaseClashes.resolve(snapshot, local: [], destination: "/usb")), ["a", "a/X", "b", "b/x"])
    }

    func testUnicodeLettersFoldButNormalisationDoesNot() {
        // exFAT and FAT fold É onto é, but keep NFC and NFD apart.
        let snapshot = make(["café.txt", "cafÉ.txt", "cafe\u{301}.txt"])
        let resolved = CaseClashes.resolve(snapshot, local: [], destination: "/usb")
        XCTAssertEqual(resolved.entries.count, 2)
        let skipped = resolved.issues.filter { if case .skipped = $0.kind { true } else { false } }
        XCTAssertEqual(skipped.map(\.path), ["café.txt"], "É sorts before é, so cafÉ.txt is the first")
    }

    /// Only a letter and the upper case whose own lower case it is are one name: exFAT keeps `ı` and `i`, `µ` and
    /// `μ`, `ǅ` and `ǆ` apart (checked on exfat-fuse), so they are all mirrored; `ß` has no one-letter upper case.
    /// Greek final sigma, which exFAT folds, is left to the check at install (see
    /// `CaseInsensitiveDestinationTests`).
    func testOnlyLettersThatSurelyFoldAreOne() {
        let snapshot = make(["kisa.txt", "kısa.txt", "5µm", "5μm", "ǅ", "ǆ", "straße", "STRASSE", "aσ", "aς", "Ébène", "ébène"])
        let resolved = CaseClashes.resolve(snapshot, local: [], destination: "/usb")
        XCTAssertEqual(resolved.issues.map(\.path), ["ébène"], "only É and é")
        XCTAssertEqual(resolved.entries.count, 11)
    }

    func testACaseTwinOfDotFolioIsSkipped() {
        let snapshot = make([".FOLIO/", ".FOLIO/x", "a"])
        let resolved = CaseClashes.resolve(snapshot, local: [], destination: "/usb")
        XCTAssertEqual(paths(resolved), ["a"])
        XCTAssertEqual(resolved.issues.map(\.description), [
            "skipped .FOLIO: differs only in case from .folio, where Folio keeps its own files, and the filesystem of /usb does not tell case apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
        ])
    }

    func testIssuesAlreadyThereAreKept() {
        var builder = SnapshotBuilder()
        builder.append(Entry(path: try! RelativePath(validating: "a"), kind: .file, mtime: FileTime(seconds: 1)))
        builder.append(Entry(path: try! RelativePath(validating: "A"), kind: .file, mtime: FileTime(seconds: 1)))
        builder.note(ListingIssue(path: "x", kind: .unreadable("permission denied")))
        let resolved = CaseClashes.resolve(builder.finish(), local: [], destination: "/usb")
        XCTAssertEqual(resolved.issues.map(\.path), ["x", "a"])
        XCTAssertFalse(resolved.isComplete)
    }

    /// Entries from short lines: a trailing `/` makes a folder.
    private func make(_ lines: [String]) -> Snapshot {
        var builder = SnapshotBuilder()
        for line in lines {
            let isFolder = line.hasSuffix("/")
            let path = try! RelativePath(validating: isFolder ? String(line.dropLast()) : line)
            builder.append(Entry(path: path, kind: isFolder ? .folder : .file, size: isFolder ? 0 : 1, mtime: FileTime(seconds: 1_700_000_000)))
        }
        return builder.finish()
    }

    private func item(_ path: String, folder: Bool = false) -> LocalItem {
        LocalItem(path: try! RelativePath(validating: path), kind: folder ? .folder : .file, size: folder ? 0 : 1,
                  mtime: FileTime(seconds: 1_700_000_000), inode: 1)
    }

    private func paths(_ snapshot: Snapshot) -> [String] { snapshot.entries.map(\.path.description) }
}
