import FolioCore
import XCTest

/// The planner, case by case: each row is (remote, local, record) → the plan, written as short lines.
final class SyncPlannerTests: XCTestCase {
    struct Case {
        var name: String
        var remote: [Entry]
        var local: [LocalItem]
        var record: [RecordedEntry] = []
        /// The record is of the target's runs from another source (`SyncPlanner.plan`'s `recordIsOfAnotherTree`).
        var recordOfAnotherSource = false
        var complete = true
        /// How finely the destination keeps times, and which.
        var localPrecision = TimePrecision.nanosecond
        var localTimeRange: KeptTimeRange?
        /// What the destination's scan left in place unlisted: excluded entries, and folders holding a name it
        /// could not list.
        var excluded: [String] = []
        var holdingUnlisted: [String] = []
        /// Entries the destination's scan could not read.
        var unreadable: [String] = []
        var expected: [String]
    }

    func testTable() throws {
        let cases: [Case] = [
            Case(name: "new file", remote: [file("a")], local: [], expected: ["get a new"]),
            Case(name: "new folder with a file", remote: [folder("d"), file("d/f")], local: [],
                 expected: ["mkdir d", "folder-time d", "get d/f new"]),
            Case(name: "unchanged, recorded", remote: [file("a")], local: [item("a")], record: [rec("a")], expected: ["unchanged 1"]),
            Case(name: "identical without record is adopted", remote: [file("a")], local: [item("a")], expected: ["adopt a", "unchanged 1"]),
            Case(name: "identical at the coarser precision is adopted",
                 remote: [file("a", mtime: 100_000_000_000, precision: .second)], local: [item("a", mtime: 100_123_456_789)],
                 expected: ["adopt a", "unchanged 1"]),
            Case(name: "changed on the source", remote: [file("a", size: 20, mtime: 200)], local: [item("a")], record: [rec("a")],
                 expected: ["get a replace"]),
            Case(name: "changed on the source and here", remote: [file("a", size: 20, mtime: 200)], local: [item("a", inode: 9)], record: [rec("a")],
                 expected: ["get a replace local-changes"]),
            Case(name: "a file folio did not write", remote: [file("a", size: 20)], local: [item("a")],
                 expected: ["get a replace local-changes"]),
            Case(name: "same size and time, new ETag", remote: [file("a", validator: "\"v2\"")], local: [item("a")], record: [rec("a", validator: "\"v1\"")],
                 expected: ["get a replace"]),
            Case(name: "only the mtime moved, checksum equal", remote: [file("a", mtime: 300, checksum: "sha256:x")], local: [item("a")],
                 record: [rec("a", checksum: "sha256:x")], expected: ["mtime a"]),
            Case(name: "only the mtime moved, validator equal", remote: [file("a", mtime: 300, validator: "e")], local: [item("a")],
                 record: [rec("a", validator: "e")], expected: ["mtime a"]),
            Case(name: "mtime moved without a content token: fetched", remote: [file("a", mtime: 300)], local: [item("a")], record: [rec("a")],
                 expected: ["get a replace"]),
            Case(name: "gone from the source", remote: [file("b")], local: [item("a"), item("b")], record: [rec("a"), rec("b")],
                 expected: ["rm a gone 1", "unchanged 1"]),
            Case(name: "gone, and changed here", remote: [file("b")], local: [item("a", inode: 5), item("b")], record: [rec("a"), rec("b")],
                 expected: ["rm a gone 1 local-changes", "unchanged 1"]),
            Case(name: "gone folder takes its subtree", remote: [file("z")],
                 local: [item("d", kind: .folder), item("d/e", kind: .folder), item("d/e/f"), item("d/g"), item("z")],
                 record: [rec("d", kind: .folder), rec("d/e", kind: .folder), rec("d/e/f"), rec("d/g"), rec("z")],
                 expected: ["rm d gone 4", "unchanged 1"]),
            Case(name: "file becomes folder", remote: [folder("x"), file("x/f")], local: [item("x")], record: [rec("x")],
                 expected: ["rm x type 1", "mkdir x", "folder-time x", "get x/f new"]),
            Case(name: "folder becomes file", remote: [file("x")], local: [item("x", kind: .folder), item("x/f")],
                 record: [rec("x", kind: .folder), rec("x/f")], expected: ["rm x type 2", "get x new"]),
            Case(name: "a planted symlink where the source has a folder", remote: [folder("x"), file("x/f")], local: [item("x", kind: .symlink)],
                 expected: ["rm x type 1 local-changes", "mkdir x", "folder-time x", "get x/f new"]),
            Case(name: "a FIFO where the source has a file", remote: [file("p")], local: [item("p", kind: .special)],
                 expected: ["rm p type 1 local-changes", "get p new"]),
            Case(name: "incomplete listing removes nothing", remote: [file("b"), file("x")], local: [item("a"), item("b"), item("x", kind: .folder), item("x/y")],
                 record: [rec("a"), rec("b")], complete: false, expected: ["unchanged 1", "withheld 2"]),
            Case(name: "the source's own .folio is left out", remote: [folder(".folio"), file(".folio/x"), file("a")], local: [item("a")], record: [rec("a")],
                 expected: ["skip .folio", "unchanged 1"]),
            Case(name: "a record of something gone on both sides is forgotten", remote: [file("a")], local: [item("a")], record: [rec("a"), rec("old")],
                 expected: ["forget old", "unchanged 1"]),
            Case(name: "a replaced file's folder gets its time back", remote: [folder("d"), file("d/f", size: 20, mtime: 200)],
                 local: [item("d", kind: .folder), item("d/f")], record: [rec("d", kind: .folder), rec("d/f")],
                 expected: ["folder-time d", "get d/f replace"]),
            Case(name: "each touched folder gets its time back once, siblings or not",
                 remote: [folder("a"), file("a/bc", size: 20, mtime: 200), folder("ab"), file("ab/c"), folder("d"), folder("d/e"),
                          file("d/e/g", size: 20, mtime: 200), file("d/f1", size: 20, mtime: 200), file("d/f2", size: 20, mtime: 200),
                          folder("x"), file("x/h", size: 20, mtime: 200)],
                 local: [item("a", kind: .folder), item("a/bc"), item("ab", kind: .folder), item("ab/c"), item("d", kind: .folder),
                         item("d/e", kind: .folder), item("d/e/g"), item("d/f1"), item("d/f2"), item("x", kind: .folder), item("x/h"), item("x/old")],
                 record: [rec("a", kind: .folder), rec("a/bc"), rec("ab", kind: .folder), rec("ab/c"), rec("d", kind: .folder),
                          rec("d/e", kind: .folder), rec("d/e/g"), rec("d/f1"), rec("d/f2"), rec("x", kind: .folder), rec("x/h"), rec("x/old")],
                 expected: ["rm x/old gone 1", "folder-time d/e", "folder-time a", "folder-time d", "folder-time x",
                            "get a/bc replace", "get d/e/g replace", "get d/f1 replace", "get d/f2 replace", "get x/h replace", "unchanged 1"]),
            Case(name: "a folder whose time moved", remote: [folder("d", mtime: 500)], local: [item("d", kind: .folder)], record: [rec("d", kind: .folder)],
                 expected: ["folder-time d"]),
            Case(name: "a file the source gives no time, unchanged by its ETag, is left as is (no time to set, nothing for a hook)",
                 remote: [file("a", mtime: FileTime.unknown.nanoseconds, validator: "e")], local: [item("a")],
                 record: [rec("a", mtime: FileTime.unknown.nanoseconds, validator: "e")], expected: ["unchanged 1"]),
            // 1970 and 2200 at the source; FAT and exFAT keep 1980-01-01 and 2107-12-31 (exfat-fuse: 2071-12-31).
            Case(name: "a file dated before 1980, on FAT or exFAT, is kept clamped and left as is",
                 remote: [file("a", mtime: 0), file("b", mtime: 7_258_118_400_000_000_000)],
                 local: [item("a", mtime: 315_532_800_000_000_000), item("b", mtime: 3_218_832_000_000_000_000)],
                 record: [rec("a", mtime: 0, localMtime: 315_532_800_000_000_000), rec("b", mtime: 7_258_118_400_000_000_000, localMtime: 3_218_832_000_000_000_000)],
                 localPrecision: .twoSeconds, localTimeRange: .fat, expected: ["unchanged 2"]),
            Case(name: "a time Folio set and exfat-fuse clamped only at the next mount is no local change",
                 remote: [file("a", mtime: 0)], local: [item("a", mtime: 315_532_800_000_000_000)], record: [rec("a", mtime: 0, localMtime: 0)],
                 localPrecision: .second, localTimeRange: .fat, expected: ["unchanged 1"]),
            Case(name: "without the range, a time exfat-fuse clamped at the next mount is a change",
                 remote: [file("a", mtime: 0)], local: [item("a", mtime: 315_532_800_000_000_000)], record: [rec("a", mtime: 0, localMtime: 0)],
                 localPrecision: .second, expected: ["get a replace local-changes"]),
            Case(name: "a folder with an unknown time is left as is", remote: [folder("d", mtime: FileTime.unknown.nanoseconds)], local: [item("d", kind: .folder)],
                 record: [rec("d", kind: .folder, mtime: FileTime.unknown.nanoseconds)], expected: []),
            Case(name: "removals deepest first, folders shallowest first",
                 remote: [folder("n"), folder("n/m"), folder("n/m/o")],
                 local: [item("a", kind: .folder), item("a/b", kind: .folder), item("c", kind: .folder), item("c/d", kind: .folder), item("c/d/e")],
                 record: [rec("a", kind: .folder), rec("a/b", kind: .folder), rec("c", kind: .folder), rec("c/d", kind: .folder), rec("c/d/e")],
                 expected: ["rm a gone 2", "rm c gone 3", "mkdir n", "mkdir n/m", "mkdir n/m/o", "folder-time n/m/o", "folder-time n/m", "folder-time n"]),
            // A destination that keeps whole seconds (ext4 with small inodes, HFS+; FAT and exFAT alike, coarser):
            // the copy's time is the source's cut down, and that is no difference.
            Case(name: "whole seconds here: the copy Folio wrote is unchanged",
                 remote: [file("a", mtime: 5_000_000_123)], local: [item("a", mtime: 5_000_000_000)],
                 record: [rec("a", mtime: 5_000_000_123, localMtime: 5_000_000_000)], localPrecision: .second, expected: ["unchanged 1"]),
            Case(name: "nanoseconds here: the same difference, from a new time at the source, is a change",
                 remote: [file("a", mtime: 5_000_000_123)], local: [item("a", mtime: 5_000_000_000)],
                 record: [rec("a", mtime: 5_000_000_000, localMtime: 5_000_000_000)], expected: ["get a replace"]),
            Case(name: "whole seconds here: an existing copy is adopted",
                 remote: [file("a", mtime: 5_000_000_123)], local: [item("a", mtime: 5_000_000_000)], localPrecision: .second,
                 expected: ["adopt a", "unchanged 1"]),
            Case(name: "whole seconds here: a folder's cut time stays",
                 remote: [folder("d", mtime: 5_000_000_123)], local: [item("d", kind: .folder, mtime: 5_000_000_000)],
                 record: [rec("d", kind: .folder, mtime: 5_000_000_123)], localPrecision: .second, expected: []),
            Case(name: "whole seconds here: a same-size edit within the second is fetched",
                 remote: [file("a", mtime: 5_000_000_500)], local: [item("a", mtime: 5_000_000_000)],
                 record: [rec("a", mtime: 5_000_000_123, localMtime: 5_000_000_000)], localPrecision: .second, expected: ["get a replace"]),
            Case(name: "whole seconds here: a new time with the same ETag is a time fix",
                 remote: [file("a", mtime: 5_000_000_500, validator: "e")], local: [item("a", mtime: 5_000_000_000)],
                 record: [rec("a", mtime: 5_000_000_123, localMtime: 5_000_000_000, validator: "e")], localPrecision: .second, expected: ["mtime a"]),
            Case(name: "a listing that keeps whole seconds of the version Folio wrote is no change",
                 remote: [file("a", mtime: 5_000_000_000, precision: .second)], local: [item("a", mtime: 5_000_000_123)],
                 record: [rec("a", mtime: 5_000_000_123, localMtime: 5_000_000_123)], expected: ["adopt a", "unchanged 1"]),
            Case(name: "same size and time, new checksum", remote: [file("a", checksum: "sha256:y")], local: [item("a")],
                 record: [rec("a", checksum: "sha256:x")], expected: ["get a replace"]),
            Case(name: "a gone folder holding an excluded entry stays; the rest of it goes entry by entry", remote: [file("z")],
                 local: [item("d", kind: .folder), item("d/e", kind: .folder), item("d/e/f"), item("d/g"), item("z")],
                 record: [rec("d", kind: .folder), rec("d/e", kind: .folder), rec("d/e/f"), rec("d/g"), rec("z")],
                 excluded: ["d/e/node_modules"], expected: ["keep d", "rm d/e/f gone 1", "rm d/g gone 1", "unchanged 1"]),
            Case(name: "a gone folder beside the one holding an excluded entry goes whole", remote: [file("z")],
                 local: [item("d", kind: .folder), item("d/e", kind: .folder), item("d/e/f"), item("d/g", kind: .folder), item("d/g/h"), item("z")],
                 record: [rec("d", kind: .folder), rec("d/e", kind: .folder), rec("d/e/f"), rec("d/g", kind: .folder), rec("d/g/h"), rec("z")],
                 excluded: ["d/e/x.tmp"], expected: ["keep d", "rm d/e/f gone 1", "rm d/g gone 2", "unchanged 1"]),
            Case(name: "a gone folder holding a name that cannot be listed stays", remote: [],
                 local: [item("d", kind: .folder), item("d/f")], record: [rec("d", kind: .folder), rec("d/f")],
                 holdingUnlisted: ["d"], expected: ["keep d", "rm d/f gone 1"]),
            Case(name: "a folder holding an excluded entry is not replaced by the source's file", remote: [file("x")],
                 local: [item("x", kind: .folder), item("x/f")], record: [rec("x", kind: .folder), rec("x/f")],
                 excluded: ["x/cache"], expected: ["skip x", "rm x/f gone 1"]),
            Case(name: "the source's file does not take an excluded folder's place", remote: [file("a"), file("cache")],
                 local: [item("a")], record: [rec("a")], excluded: ["cache"], expected: ["skip cache", "unchanged 1"]),
            Case(name: "records of excluded entries still here stay; those of entries gone from here go", remote: [file("a")],
                 local: [item("a")], record: [rec("a"), rec("cache", kind: .folder), rec("cache/x"), rec("b.tmp"), rec("gone.tmp")],
                 excluded: ["cache", "b.tmp"], expected: ["forget gone.tmp", "unchanged 1"]),
            Case(name: "nothing is planned at or below a destination folder that could not be read, and the folders above it stay",
                 remote: [folder("d"), folder("d/u"), file("d/u/new"), file("d/u/changed", size: 20), file("z")],
                 local: [item("d", kind: .folder), item("d/u", kind: .folder), item("d/u/changed"), item("d/u/partly-read"), item("z")],
                 record: [rec("d", kind: .folder), rec("d/u", kind: .folder), rec("d/u/changed"), rec("d/u/gone"), rec("z")],
                 unreadable: ["d/u"], expected: ["unchanged 1"]),
            Case(name: "a dropped folder holding an unreadable one stays; the rest of it goes", remote: [file("z")],
                 local: [item("d", kind: .folder), item("d/f"), item("d/u", kind: .folder), item("z")],
                 record: [rec("d", kind: .folder), rec("d/f"), rec("d/u", kind: .folder), rec("d/u/x"), rec("z")],
                 unreadable: ["d/u"], expected: ["keep d", "rm d/f gone 1", "unchanged 1"]),
            Case(name: "a source's own .folio is skipped in one line, not one per entry it holds",
                 remote: [file("a"), folder(".folio"), folder(".folio/trash"), file(".folio/trash/x"), file(".folio/lock")], local: [],
                 expected: ["skip .folio", "get a new"]),
            Case(name: "a source of whole seconds: an edit here within the second is a local change, not adopted",
                 remote: [file("a", mtime: 5_000_000_000, precision: .second)], local: [item("a", mtime: 5_500_000_000, inode: 9)],
                 record: [rec("a", mtime: 5_000_000_000, localMtime: 5_000_000_000)], expected: ["get a replace local-changes"]),
            Case(name: "a source of whole seconds: a copy put back with the time Folio wrote is adopted",
                 remote: [file("a", mtime: 5_000_000_000, precision: .second)], local: [item("a", mtime: 5_000_000_000, inode: 9)],
                 record: [rec("a", mtime: 5_000_000_000, localMtime: 5_000_000_000)], expected: ["adopt a", "unchanged 1"]),
            Case(name: "a time this filesystem cannot keep (1800 on ext4, kept as 1901), on the version Folio wrote, is no change",
                 remote: [file("a", mtime: -5_364_662_400_000_000_000, validator: "e")], local: [item("a", mtime: -2_147_483_648_000_000_000)],
                 record: [rec("a", mtime: -5_364_662_400_000_000_000, localMtime: -2_147_483_648_000_000_000, validator: "e")],
                 expected: ["unchanged 1"]),
            Case(name: "another source: its files Folio wrote here are replaced and removed as Folio's; an edited one is a local change",
                 remote: [file("changed", size: 20, mtime: 200), file("edited", size: 20, mtime: 200)],
                 local: [item("changed"), item("edited", inode: 9), item("gone")], record: [rec("changed"), rec("edited"), rec("gone"), rec("elsewhere")],
                 recordOfAnotherSource: true, expected: ["rm gone gone 1", "get changed replace", "get edited replace local-changes", "forget elsewhere"]),
            Case(name: "another source: the same ETag as the version Folio copied from the old one is no sign of the same content",
                 remote: [file("a", mtime: 300, validator: "e")], local: [item("a")], record: [rec("a", validator: "e")],
                 recordOfAnotherSource: true, expected: ["get a replace"]),
            Case(name: "another source: a file alike is adopted, as on a first run",
                 remote: [file("a", validator: "new")], local: [item("a")], record: [rec("a", validator: "old")],
                 recordOfAnotherSource: true, expected: ["adopt a", "unchanged 1"]),
            Case(name: "whole seconds here: a new second at the source is a change",
                 remote: [file("a", mtime: 6_000_000_000)], local: [item("a", mtime: 5_000_000_000)],
                 record: [rec("a", mtime: 5_000_000_123, localMtime: 5_000_000_000)], localPrecision: .second, expected: ["get a replace"]),
        ]
        for row in cases {
            var builder = SnapshotBuilder()
            for entry in row.remote { builder.append(entry) }
            if !row.complete { builder.note(ListingIssue(path: "elsewhere", kind: .unreadable("permission denied"))) }
            let snapshot = builder.finish()
            let record = RecordedTree(row.record)
            let local = row.local.sorted { $0.path < $1.path }
            let leftAlone = LeftAlone(excluded: row.excluded.map { path($0) },
                                      holdingUnlisted: row.holdingUnlisted.map { path($0) },
                                      unreadable: row.unreadable.map { (path($0), "Permission denied") })
            let plan = SyncPlanner.plan(remote: snapshot, local: local, record: record, recordIsOfAnotherTree: row.recordOfAnotherSource,
                                        removalsAllowed: snapshot.isComplete, localPrecision: row.localPrecision,
                                        localTimeRange: row.localTimeRange, leftAlone: leftAlone)
            XCTAssertEqual(describe(plan), row.expected, row.name)
        }
    }

    func testMaxDeleteLimit() {
        XCTAssertEqual(MaxDelete.percent(50).limit(forEntryCount: 10), 5)
        XCTAssertEqual(MaxDelete.percent(50).limit(forEntryCount: 1), 0)
        XCTAssertEqual(MaxDelete.count(7).limit(forEntryCount: 1_000), 7)
    }

    // MARK: helpers

    private func describe(_ plan: SyncPlan) -> [String] {
        var lines: [String] = []
        for issue in plan.skipped {
            if case .kept = issue.kind { lines.append("keep \(issue.path)") } else { lines.append("skip \(issue.path)") }
        }
        for removal in plan.removals {
            let reason = removal.reason == .goneFromSource ? "gone" : "type"
            lines.append("rm \(removal.item.path) \(reason) \(removal.entryCount)\(removal.hasLocalChanges ? " local-changes" : "")")
        }
        for folder in plan.folders { lines.append("mkdir \(folder.path)") }
        for folder in plan.folderTimes { lines.append("folder-time \(folder.path)") }
        for download in plan.downloads {
            lines.append("get \(download.entry.path) \(download.replacing == nil ? "new" : "replace")\(download.hasLocalChanges ? " local-changes" : "")")
        }
        for fix in plan.mtimeFixes { lines.append("mtime \(fix.entry.path)") }
        for update in plan.recordUpdates where update.kind == .file { lines.append("adopt \(update.path)") }
        for path in plan.recordDeletions.sorted() { lines.append("forget \(path)") }
        if plan.unchangedFiles > 0 { lines.append("unchanged \(plan.unchangedFiles)") }
        if plan.withheldRemovals > 0 { lines.append("withheld \(plan.withheldRemovals)") }
        return lines
    }

    private func path(_ text: String) -> RelativePath { try! RelativePath(validating: text) }

    private func file(_ name: String, size: Int64 = 10, mtime: Int64 = 100, precision: TimePrecision = .nanosecond,
                      validator: String? = nil, checksum: String? = nil) -> Entry {
        Entry(path: path(name), kind: .file, size: size, mtime: FileTime(nanoseconds: mtime), precision: precision, validator: validator, checksum: checksum)
    }

    private func folder(_ name: String, mtime: Int64 = 100) -> Entry {
        Entry(path: path(name), kind: .folder, mtime: FileTime(nanoseconds: mtime))
    }

    private func item(_ name: String, kind: LocalItem.Kind = .file, size: Int64? = nil, mtime: Int64 = 100, inode: UInt64? = nil) -> LocalItem {
        LocalItem(path: path(name), kind: kind, size: size ?? (kind == .file ? 10 : 0), mtime: FileTime(nanoseconds: mtime),
                  inode: inode ?? UInt64(abs(name.hashValue % 100_000) + 1_000))
    }

    private func rec(_ name: String, kind: Entry.Kind = .file, mtime: Int64 = 100, localMtime: Int64 = 100,
                     validator: String? = nil, checksum: String? = nil) -> RecordedEntry {
        let local = item(name, kind: kind == .folder ? .folder : .file, mtime: localMtime)
        return RecordedEntry(path: path(name), kind: kind, size: kind == .file ? 10 : 0, mtime: FileTime(nanoseconds: mtime),
                             validator: validator, checksum: checksum, localInode: local.inode, localMtime: local.mtime)
    }
}
