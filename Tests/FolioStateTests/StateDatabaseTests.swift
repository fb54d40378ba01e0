import FolioCore
@testable import FolioState
import FolioTestSupport
import Foundation
import GRDB
import Synchronization
import XCTest

final class StateDatabaseTests: XCTestCase {
    func testRecordRoundTripAndSubtreeRemoval() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        let id = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        let names = ["a", "a/b", "a/b/c", "a-b", "caf\u{E9}", "x"]
        let records = try names.map { name in
            RecordedEntry(path: try RelativePath(validating: name), kind: name == "a" || name == "a/b" ? .folder : .file, size: 3,
                          mtime: FileTime(seconds: 1, nanoseconds: 2), validator: name == "x" ? "\"e\"" : nil, checksum: nil,
                          localInode: UInt64.max - 1, localMtime: FileTime(nanoseconds: -5))
        }
        try database.commit(target: "t", upserts: records, removedSubtrees: [])
        XCTAssertEqual(try database.record(of: "t").count, 6)
        XCTAssertEqual(try database.record(of: "t")[try RelativePath(validating: "x")], records[5])
        try database.commit(target: "t", upserts: [], removedSubtrees: [try RelativePath(validating: "a")])
        XCTAssertEqual(Set(try database.record(of: "t").map(\.path.description)), ["a-b", "caf\u{E9}", "x"], "a and below gone, a-b kept")

        var report = RunReport(target: "t")
        report.downloaded = 4
        report.bytes = 99
        try database.finishRun(id: id, target: "t", report: report, sourceDigest: 42)
        XCTAssertEqual(try database.sourceDigest(of: "t"), 42)
        let last = try XCTUnwrap(try database.lastRuns()["t"])
        XCTAssertEqual(last.result, "synced")
        XCTAssertEqual(last.downloaded, 4)
        XCTAssertEqual(last.bytes, 99)
    }

    /// Each target keeps its newest `keptRuns` runs, failed starts included; the last is what `status` shows, and
    /// a hook's kept paths outlive their run's row. (A row per run was kept for ever.)
    func testEachTargetKeepsItsNewestRunsOnly() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        let kept = StateDatabase.keptRuns
        var first: Int64 = 0
        for number in 0..<(kept + 5) {
            let id = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .automatic, startedAt: Date())
            if number == 0 {
                first = id
                try database.keepChangesForHook(run: id, target: "t", paths: [try RelativePath(validating: "a.txt")])
            }
            var report = RunReport(target: "t")
            report.downloaded = number
            try database.finishRun(id: id, target: "t", report: report, sourceDigest: nil, listingMemo: nil, keepingChangesForHook: true)
        }
        try database.recordFailedStart(target: "other", trigger: .automatic, at: Date(), error: "source down", refused: false)
        try database.recordFailedStart(target: "t", trigger: .automatic, at: Date(), error: "source down", refused: false)
        let counts = try database.queue.read { db in
            try Row.fetchAll(db, sql: "SELECT target, count(*) AS runs, min(id) AS oldest FROM run GROUP BY target ORDER BY target")
                .map { "\($0["target"] as String) \($0["runs"] as Int) \(($0["oldest"] as Int64) - first)" }
        }
        XCTAssertEqual(counts, ["other 1 \(kept + 5)", "t \(kept) 6"])
        XCTAssertEqual(try database.lastRuns()["t"]?.error, "source down")
        XCTAssertEqual(try database.pendingHookChanges(of: "t", before: nil).paths.map(\.description), ["a.txt"])
    }

    func testAnotherSourceKeepsTheRecordUntilTheRunStartsItOver() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        let id = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        try database.commit(target: "t", upserts: [RecordedEntry(path: try RelativePath(validating: "f"), kind: .file, size: 1, mtime: FileTime(seconds: 1),
                                                                 validator: "\"e\"", checksum: "sha256:x", localInode: 1, localMtime: FileTime(seconds: 1))],
                            removedSubtrees: [])
        try database.finishRun(id: id, target: "t", report: RunReport(target: "t"), sourceDigest: 7, listingMemo: nil, keepingChangesForHook: false)
        XCTAssertFalse(try database.recordsAnotherTree(target: "t", source: "/s", destination: "/d"))
        // A run from elsewhere that fails or is refused before it changes anything leaves the record, and the
        // guard that counts it by source and destination, as they were.
        _ = try database.beginRun(target: "t", source: "/elsewhere", destination: "/d", trigger: .manual, startedAt: Date())
        XCTAssertTrue(try database.recordsAnotherTree(target: "t", source: "/elsewhere", destination: "/d"))
        XCTAssertTrue(try database.recordsAnotherTree(target: "t", source: "/s", destination: "/other"))
        XCTAssertEqual(try database.record(of: "t").count, 1)
        XCTAssertEqual(try database.recordedEntryCount(from: "/s", in: "/d"), 1)
        XCTAssertEqual(try database.sourceDigest(of: "t"), 7)

        // Started over, the record still says which local file Folio wrote, without the old source's version
        // tokens: a run cut short after this must not take the file for a local change, nor its ETag for the new
        // source's.
        try database.startOver(target: "t", source: "/elsewhere", destination: "/d")
        let kept = try XCTUnwrap(try database.record(of: "t")[try RelativePath(validating: "f")])
        XCTAssertEqual([kept.localInode, UInt64(kept.size)], [1, 1])
        XCTAssertNil(kept.validator)
        XCTAssertNil(kept.checksum)
        XCTAssertNil(try database.sourceDigest(of: "t"))
        XCTAssertFalse(try database.recordsAnotherTree(target: "t", source: "/elsewhere", destination: "/d"))
        XCTAssertEqual(try database.recordedEntryCount(from: "/s", in: "/d"), 0)
        XCTAssertEqual(try database.recordedEntryCount(from: "/elsewhere", in: "/d"), 1)
    }

    /// The next listing's hints: the record's folders in path order (files left out), and the memo of the last
    /// run that gave one; another source starts them over.
    func testListingHintsAreTheRecordsFoldersAndTheLastMemo() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        XCTAssertEqual(try database.listingHints(of: "t"), ListingHints())
        let id = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        let entries = try [("b", Entry.Kind.folder), ("a", .folder), ("a/x", .file), ("a/sub", .folder), ("b/link", .symlink)].map { name, kind in
            RecordedEntry(path: try RelativePath(validating: name), kind: kind, size: 0, mtime: FileTime(seconds: 1),
                          validator: nil, checksum: nil, localInode: 1, localMtime: FileTime(seconds: 1))
        }
        try database.commit(target: "t", upserts: entries, removedSubtrees: [])
        try database.finishRun(id: id, target: "t", report: RunReport(target: "t"), sourceDigest: 1, listingMemo: "depth-1 far", keepingChangesForHook: false)
        let hints = try database.listingHints(of: "t")
        XCTAssertEqual(hints.folders.map(\.description), ["a", "a/sub", "b"])
        XCTAssertEqual(hints.memo, "depth-1 far")

        let next = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        try database.finishRun(id: next, target: "t", report: RunReport(target: "t"), sourceDigest: nil)
        XCTAssertEqual(try database.listingHints(of: "t").memo, "depth-1 far", "a run without a memo keeps the last one")
        XCTAssertEqual(try database.listingMemo(of: "t"), "depth-1 far", "the memo alone, as with the folders")

        // Another source forgets the memo; the folders Folio wrote stay hints until a complete run from the new
        // source finds them gone (a folder asked ahead that the source lacks is set aside, not an error).
        try database.startOver(target: "t", source: "/elsewhere", destination: "/d")
        XCTAssertEqual(try database.listingHints(of: "t").memo, nil)
        XCTAssertEqual(try database.listingHints(of: "t").folders.map(\.description), ["a", "a/sub", "b"])
        // The folders come from the partial index, not from a pass over every entry of the target.
        let plan = try database.queue.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + StateDatabase.foldersQuery, arguments: ["t"]).map { $0["detail"] as String }
        }
        XCTAssertTrue(plan.contains { $0.contains("entry_folder") }, "\(plan)")
    }

    /// The changes runs keep for their hook, batch by batch: the runs' paths before a given run, each once, oldest
    /// first, until forgotten by run (a later run's stay for its own hook); a run of a target without a hook
    /// forgets them all, and so does pointing the target at another tree.
    func testChangesKeptForTheHookUntilAHookHasHadThem() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        func finish(_ batches: [String]..., keep: Bool = true, source: String = "/s") throws -> Int64 {
            let id = try database.beginRun(target: "t", source: source, destination: "/d", trigger: .automatic, startedAt: Date())
            if try database.recordsAnotherTree(target: "t", source: source, destination: "/d") {
                try database.startOver(target: "t", source: source, destination: "/d")
            }
            var report = RunReport(target: "t")
            for batch in batches where keep {
                let paths = try batch.map { try RelativePath(validating: $0) }
                try database.keepChangesForHook(run: id, target: "t", paths: paths)
                report.changedPaths += paths
            }
            report.downloaded = report.changedPaths.count
            try database.finishRun(id: id, target: "t", report: report, sourceDigest: nil, listingMemo: nil, keepingChangesForHook: keep)
            return id
        }
        let first = try finish(["b.txt"], ["sub dir/caf\u{E9}.txt"])
        let second = try finish(["a.txt", "b.txt"], [], ["a.txt"])
        let third = try finish(["c.txt"])
        let backlog = try database.pendingHookChanges(of: "t", before: third)
        XCTAssertEqual(backlog.runs, [first, second])
        XCTAssertEqual(backlog.paths.map(\.description), ["b.txt", "sub dir/caf\u{E9}.txt", "a.txt"])
        XCTAssertEqual(try database.pendingHookChanges(of: "other", before: nil).paths, [])

        try database.forgetHookChanges(backlog)
        XCTAssertEqual(try database.pendingHookChanges(of: "t", before: nil), HookBacklog(runs: [third], paths: [try RelativePath(validating: "c.txt")]))
        _ = try finish(["d.txt"], keep: false)
        XCTAssertEqual(try database.pendingHookChanges(of: "t", before: nil), HookBacklog(runs: [], paths: []))
        _ = try finish(["e.txt"])
        _ = try finish(["f.txt"], source: "/elsewhere")
        XCTAssertEqual(try database.pendingHookChanges(of: "t", before: nil).paths.map(\.description), ["f.txt"], "the old tree's paths are gone")
    }

    /// Paths a version 4 database kept for a hook (one row per run) are still there, for the hook, after the
    /// upgrade to rows by batch.
    func testPathsKeptByAnOlderVersionSurviveTheUpgrade() throws {
        let folder = TemporaryDirectory("state")
        let queue = try DatabaseQueue(path: folder.path + "/state.sqlite")
        try StateDatabase.migrator.migrate(queue, upTo: "4 hook backlog")
        try queue.write { db in
            try db.execute(sql: "INSERT INTO hook_backlog (run, target, paths) VALUES (7, 't', ?), (9, 't', ?)",
                           arguments: [Data("a.txt\nb.txt\n".utf8), Data("c.txt\n".utf8)])
        }
        try queue.close()
        let database = try StateDatabase(directory: folder.path)
        let backlog = try database.pendingHookChanges(of: "t", before: nil)
        XCTAssertEqual(backlog.runs, [7, 9])
        XCTAssertEqual(backlog.paths.map(\.description), ["a.txt", "b.txt", "c.txt"])
        try database.keepChangesForHook(run: 9, target: "t", paths: [try RelativePath(validating: "d.txt")])
        try database.forgetHookChanges(HookBacklog(runs: [9], paths: []))
        XCTAssertEqual(try database.pendingHookChanges(of: "t", before: nil).paths.map(\.description), ["a.txt", "b.txt"], "run 9 forgotten, both its rows")
    }

    /// A new name for the source and destination of an existing record (a renamed target) takes over its record
    /// and runs; a new name for another folder starts a record of its own.
    func testARenamedTargetTakesOverItsRecord() throws {
        let database = try StateDatabase(directory: TemporaryDirectory("state").path)
        let first = try database.beginRun(target: "photos", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        try database.commit(target: "photos", upserts: [RecordedEntry(path: try RelativePath(validating: "a.txt"), kind: .file, size: 1, mtime: FileTime(seconds: 1),
                                                                       validator: nil, checksum: nil, localInode: 5, localMtime: FileTime(seconds: 1))], removedSubtrees: [])
        try database.finishRun(id: first, target: "photos", report: RunReport(target: "photos"), sourceDigest: 7)
        XCTAssertEqual(try database.recordedEntryCount(from: "/s", in: "/d"), 1)

        _ = try database.beginRun(target: "pictures", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        XCTAssertEqual(try database.record(of: "pictures", sharingPathsWith: .empty).map(\.path.description), ["a.txt"])
        XCTAssertEqual(try database.record(of: "photos", sharingPathsWith: .empty).count, 0)
        XCTAssertEqual(Set(try database.lastRuns().keys), ["pictures"])
        XCTAssertEqual(try database.sourceDigest(of: "pictures"), 7)

        _ = try database.beginRun(target: "other", source: "/s", destination: "/elsewhere", trigger: .manual, startedAt: Date())
        XCTAssertEqual(try database.record(of: "other", sharingPathsWith: .empty).count, 0)
        XCTAssertEqual(try database.record(of: "pictures", sharingPathsWith: .empty).count, 1)
    }

    /// A run that closes the database leaves its commits in the write-ahead log, unflushed (no checkpoint, no
    /// truncation), and the next run reads them and adds its own after them.
    func testClosingKeepsTheLogAndTheNextRunReadsIt() throws {
        let folder = TemporaryDirectory("state")
        func run(_ target: String) throws {
            let database = try StateDatabase(directory: folder.path)
            let id = try database.beginRun(target: target, source: "/s", destination: "/d/\(target)", trigger: .manual, startedAt: Date())
            try database.finishRun(id: id, target: target, report: RunReport(target: target), sourceDigest: 7)
        }
        try run("first")
        let afterFirst = StateDatabase.logSize(of: folder.path("state.sqlite"))
        XCTAssertGreaterThan(afterFirst, 0, "the first run's commits wait in the log")
        try run("second")
        XCTAssertGreaterThan(StateDatabase.logSize(of: folder.path("state.sqlite")), afterFirst, "the second run appended to the log instead of starting it over")
        let database = try StateDatabase(directory: folder.path)
        XCTAssertEqual(Set(try database.lastRuns().keys), ["first", "second"])
        XCTAssertEqual(try database.sourceDigest(of: "first"), 7)
    }

    /// Runs that each leave their commits in the log: once it passes the limit, a run's end checkpoints it, so
    /// the next process reads at most that much of it at open.
    func testTheLogIsCheckpointedOnceItPassesItsLimit() throws {
        let folder = TemporaryDirectory("state")
        var sizes: [Int] = []
        for index in 0..<80 {
            let database = try StateDatabase(directory: folder.path)
            let id = try database.beginRun(target: "t\(index % 3)", source: "/s", destination: "/d\(index % 3)", trigger: .manual, startedAt: Date())
            try database.finishRun(id: id, target: "t\(index % 3)", report: RunReport(target: "t\(index % 3)"), sourceDigest: UInt64(index))
            sizes.append(StateDatabase.logSize(of: folder.path("state.sqlite")))
        }
        // 80 runs append more than twice the limit: without checkpoints the log would end past it.
        XCTAssertGreaterThan(sizes.max() ?? 0, StateDatabase.logLimit / 2, "the runs' commits went to the log: \(sizes)")
        XCTAssertLessThanOrEqual(sizes.max() ?? 0, StateDatabase.logLimit + 64 << 10, "log sizes after each run: \(sizes)")
        let database = try StateDatabase(directory: folder.path)
        XCTAssertEqual(try database.sourceDigest(of: "t0"), 78)
        XCTAssertEqual(try database.queue.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM run") }, 80)
    }

    /// Processes that open a state folder at once, before it holds a database (the daemon's first start and a run
    /// by hand), all open it: one makes it, the others wait for its migrations instead of running them too and
    /// failing in SQLite's words ("table target already exists"). Four openers at once, 20 times.
    func testOpenersOfANewStateFolderAtOnceAllOpenIt() throws {
        for round in 0..<20 {
            let folder = TemporaryDirectory("state-race")
            let failures = Mutex<[String]>([])
            DispatchQueue.concurrentPerform(iterations: 4) { _ in
                do {
                    let database = try StateDatabase(directory: folder.path)
                    _ = try database.lastRuns()
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
            XCTAssertEqual(failures.withLock { $0 }, [], "round \(round)")
        }
    }

    /// A new database is made unflushed, and left as one opened again is: in WAL mode, its file's header saying
    /// so (bytes 18 and 19 are 2), with unflushed commits (synchronous = NORMAL), not without flushes at all.
    func testANewDatabaseIsLeftInWALModeWithNormalFlushes() throws {
        let folder = TemporaryDirectory("state")
        for opening in ["made", "opened again"] {
            let database = try StateDatabase(directory: folder.path)
            XCTAssertEqual(try database.queue.read { try Int.fetchOne($0, sql: "PRAGMA synchronous") }, 1, "NORMAL when \(opening)")
            XCTAssertEqual(try database.queue.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") }, "wal", opening)
            let header = try XCTUnwrap(FileManager.default.contents(atPath: folder.path("state.sqlite")))
            XCTAssertEqual(Array(header.prefix(20).suffix(2)), [2, 2], "the file's header does not say WAL when \(opening)")
        }
    }

    /// The end of a run that changed files is committed flushed (synchronous = FULL); the connection then goes
    /// back to unflushed commits, so a later no-change run (with little in the log) flushes nothing.
    func testAChangingRunEndsFlushedAndLaterCommitsAreNot() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        let id = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        var report = RunReport(target: "t")
        report.downloaded = 2
        try database.finishRun(id: id, target: "t", report: report, sourceDigest: 9)
        XCTAssertEqual(try database.queue.read { try Int.fetchOne($0, sql: "PRAGMA synchronous") }, 1, "NORMAL again")
        XCTAssertEqual(try database.lastRuns()["t"]?.downloaded, 2)
        XCTAssertEqual(try database.sourceDigest(of: "t"), 9)
    }

    func testACorruptDatabaseSaysWhatToDo() throws {
        let folder = TemporaryDirectory("state")
        FixtureTree.write(folder.path, "state.sqlite", String(repeating: "this is not sqlite ", count: 400))
        XCTAssertThrowsError(try StateDatabase(directory: folder.path)) { error in
            XCTAssertEqual((error as? StateError)?.message,
                           "state database \(folder.path)/state.sqlite is corrupt (SQLite 26); move it aside and run again: Folio starts a new one and adopts the files already in place")
        }
    }

    /// A value of the wrong type in a row (`started_at = 'abc'`, here set by hand) is one line with the way out,
    /// as a corrupt file is; GRDB's subscripts stopped the process on it (`folio status` crashed).
    func testAValueOfTheWrongTypeSaysWhatToDo() throws {
        let folder = TemporaryDirectory("state")
        let database = try StateDatabase(directory: folder.path)
        _ = try database.beginRun(target: "t", source: "/s", destination: "/d", trigger: .manual, startedAt: Date())
        try database.queue.write { try $0.execute(sql: "UPDATE run SET started_at = 'abc'") }
        XCTAssertThrowsError(try database.lastRuns()) { error in
            XCTAssertEqual((error as? StateError)?.message,
                           "state database \(folder.path)/state.sqlite holds a value Folio cannot read; move it aside and run again: Folio starts a new one and adopts the files already in place")
        }
    }

    func testANewerSchemaIsRefused() throws {
        let folder = TemporaryDirectory("state")
        _ = try StateDatabase(directory: folder.path)
        let queue = try DatabaseQueue(path: folder.path("state.sqlite"))
        try queue.write { db in try db.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('99 from the future')") }
        XCTAssertThrowsError(try StateDatabase(directory: folder.path)) { error in
            XCTAssertEqual((error as? StateError)?.message,
                           "state database \(folder.path)/state.sqlite was written by a newer version of Folio; upgrade folio, or set state-dir to another folder")
        }
    }

    func testAStateDirectoryThatCannotBeMadeNamesTheSystemsReasonAndTheFix() throws {
        let folder = TemporaryDirectory("state")
        XCTAssertTrue(FileManager.default.createFile(atPath: folder.path("file"), contents: Data()))
        XCTAssertThrowsError(try StateDatabase(directory: folder.path("file/state"))) { error in
            XCTAssertEqual((error as? StateError)?.message,
                           "cannot create the state directory \(folder.path)/file/state: Not a directory; set state-dir or FOLIO_STATE_DIR to a writable folder")
        }
        let nested = folder.path("a/b/c")
        _ = try StateDatabase(directory: nested)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: nested)[.posixPermissions] as? Int, 0o700)
    }

    func testStateLocation() {
        XCTAssertEqual(StateLocation.directory(configured: "/cfg", environment: ["FOLIO_STATE_DIR": "/env"]), "/env")
        XCTAssertEqual(StateLocation.directory(configured: "/cfg", environment: ["FOLIO_STATE_DIR": "state"]),
                       FileManager.default.currentDirectoryPath + "/state")
        XCTAssertEqual(StateLocation.directory(configured: "/cfg", environment: [:]), "/cfg")
    }
}
