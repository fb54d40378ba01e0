import CSQLiteShims
import FolioCore
import Foundation
import GRDB
import GRDBSQLite

/// The SQLite state database (WAL, numbered migrations): targets, the record of what Folio wrote for each,
/// and every run. One per state directory, shared by `folio sync --now`, `folio mirror` and the daemon.
public final class StateDatabase: StateStore, Sendable {
    /// The file, for messages.
    public let path: String
    /// Internal, not private: the daemon's schedule (StateDatabase+Schedule.swift) uses it too.
    let queue: DatabaseQueue

    /// `mkdir -p` with mode 0700 for what it creates; the errno of the first failure, or nil. Why not
    /// FileManager: on Linux its error carries only a sentence ("You don’t have permission."), not the errno.
    private static func makeDirectories(_ directory: String) -> Int32? {
        var prefix = directory.hasPrefix("/") ? "" : "."
        for component in directory.split(separator: "/") {
            prefix += "/" + component
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST { return errno }
        }
        var info = stat()
        guard stat(directory, &info) == 0 else { return errno }
        return (info.st_mode & S_IFMT) == S_IFDIR ? nil : ENOTDIR
    }

    /// Opens (creating if needed) `state.sqlite` in `directory`.
    public init(directory: String) throws(StateError) {
        if let code = Self.makeDirectories(directory) {
            throw StateError("cannot create the state directory \(directory): \(String(cString: strerror(code))); set state-dir or FOLIO_STATE_DIR to a writable folder")
        }
        let path = directory + "/state.sqlite"
        self.path = path
        do {
            queue = try Self.openingAlone(in: directory) { try Self.openAndMigrate(path) }
        } catch let error as StateError {
            throw error
        } catch {
            throw Self.describe(error, path: path)
        }
    }

    /// Opens the database at `path`, making it if needed, and brings its tables up to this version's.
    private static func openAndMigrate(_ path: String) throws -> DatabaseQueue {
        // Why a new file is made unflushed: making it flushed six times (the switch to WAL is a rollback-journal
        // transaction with three flushes and its folder's, the log's first write two more), about 5 ms of a first
        // run's start, on the way to its first request. Unflushed, its file is flushed once, right after the
        // switch (`flushMainFile`), and its tables reach the disk with the log's first flush, as every commit of a
        // run does (`finishRun`): a power cut before that loses them with the run's record, as it would lose the
        // record alone before, and the next run makes them again.
        let making = access(path, F_OK) != 0
        var configuration = Configuration()
        configuration.busyMode = .timeout(Double(Self.busyTimeoutMilliseconds) / 1000)  // the daemon and a manual run may write at once
        configuration.prepareDatabase { db in
            try db.execute(sql: making ? "PRAGMA synchronous = OFF" : "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            // Why at once, before the migrations write to the log: a run that stops before they end (killed, say)
            // must not leave this unflushed.
            if making { try Self.flushMainFile(path) }
            // Why a 1 MB page cache (SQLite's default is 2 MB): the record is read once per run, front to back,
            // and written in path order, so a bigger cache holds pages that are never read again; the file's
            // pages stay in the kernel's cache anyway. It was 1 MB of an incremental run's peak at 100,000 files.
            try db.execute(sql: "PRAGMA cache_size = -1000")
            // Why the log is kept at close (no checkpoint): the close-time checkpoint flushes the log and the
            // database, and then the next run's first commit writes a new log header and flushes it and its
            // folder. Four flushes in every run, even one that found nothing to do, each one waiting for whatever
            // else the file system has to commit (a no-change run of 30 files: 9.7 → 9.0 ms on an idle disk).
            // Kept, the log takes the next run's commits after its own, unflushed, as synchronous = NORMAL allows;
            // a run that ends with more than `logLimit` in it checkpoints (`finishRun`), so the next open, which
            // reads the whole log to rebuild its index, reads at most that. A process crash loses no commit (each
            // is in the log before the run goes on); for a power cut, a run that changed files flushes the log
            // with its last commit (`finishRun`). The size limit truncates the log at the restart after a
            // checkpoint (an initial run's record can make it tens of MB).
            try db.execute(sql: "PRAGMA journal_size_limit = \(Self.logLimit)")
            let code = folio_sqlite3_keep_wal_on_close(db.sqliteConnection)
            guard code == SQLITE_OK else { throw DatabaseError(resultCode: ResultCode(rawValue: code)) }
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.read { db in _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") }
        if try queue.read({ try Self.migrator.hasBeenSuperseded($0) }) {
            throw StateError("state database \(path) was written by a newer version of Folio; upgrade folio, or set state-dir to another folder")
        }
        try Self.migrator.migrate(queue)
        // Ends the unflushed making: the tables are made.
        if making { try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") } }
        return queue
    }

    /// Runs `body` holding an exclusive `flock` on `state.sqlite-lock` beside the database: one process at a time
    /// opens it, makes it if it is not there, and brings its tables up to date. Why: two processes making the
    /// database at once (the daemon's first start and a run by hand, two timers' runs) both ran the first migration
    /// (GRDB reads which are applied before running them, each in a transaction of its own), and one failed in
    /// SQLite's words ("table target already exists": 3 pairs of runs in 12 here); with the migrations alone under
    /// the lock, a switch to WAL met another still under way and failed at once ("stayed locked", 3 rounds in 20 of
    /// the test). The lock costs an open and a `flock` at every opening, and is let go once the database is open.
    /// Where the file cannot be made (a folder this user cannot write, where making the database fails anyway and
    /// says why), `body` runs without it. The file stays: removing it would let a process that opened it before the
    /// removal lock a file no other process sees.
    private static func openingAlone<T>(in directory: String, _ body: () throws -> T) throws -> T {
        let descriptor = open(directory + "/state.sqlite-lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return try body() }
        // Closing the descriptor lets the lock go.
        defer { close(descriptor) }
        // Blocking, for another process's opening (milliseconds): the database is opened off the cooperative pool
        // (`Blocking.run`, or `folio status` on the main thread).
        while flock(descriptor, LOCK_EX) != 0, errno == EINTR {}
        return try body()
    }

    /// Flushes a new database's file, which holds the header that says WAL, written unflushed. Why: were it lost (a
    /// file of 0 bytes after a power cut), SQLite would take the database for empty and delete the log beside it,
    /// with the record the runs since then flushed into it.
    private static func flushMainFile(_ path: String) throws {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw StateError("cannot open state database \(path) to flush it: \(String(cString: strerror(errno))); check the disk it is on") }
        defer { close(descriptor) }
        guard fdatasync(descriptor) == 0 else { throw StateError("cannot flush state database \(path): \(String(cString: strerror(errno))); check the disk it is on") }
    }

    static let migrator: DatabaseMigrator = {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("1 targets, entries, runs") { db in
            try db.execute(sql: """
                CREATE TABLE target (
                    name TEXT PRIMARY KEY,
                    source TEXT NOT NULL,
                    destination TEXT NOT NULL,
                    source_digest INTEGER
                );
                CREATE TABLE entry (
                    target TEXT NOT NULL REFERENCES target(name) ON DELETE CASCADE,
                    path BLOB NOT NULL,
                    kind INTEGER NOT NULL,
                    size INTEGER NOT NULL,
                    mtime INTEGER NOT NULL,
                    validator TEXT,
                    checksum TEXT,
                    local_inode INTEGER NOT NULL,
                    local_mtime INTEGER NOT NULL,
                    PRIMARY KEY (target, path)
                ) WITHOUT ROWID;
                CREATE TABLE run (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    target TEXT NOT NULL,
                    trigger TEXT NOT NULL,
                    started_at REAL NOT NULL,
                    ended_at REAL,
                    result TEXT NOT NULL DEFAULT 'running',
                    downloaded INTEGER NOT NULL DEFAULT 0,
                    updated INTEGER NOT NULL DEFAULT 0,
                    removed INTEGER NOT NULL DEFAULT 0,
                    trashed INTEGER NOT NULL DEFAULT 0,
                    created_dirs INTEGER NOT NULL DEFAULT 0,
                    bytes INTEGER NOT NULL DEFAULT 0,
                    failed INTEGER NOT NULL DEFAULT 0,
                    error TEXT,
                    pid INTEGER
                );
                CREATE INDEX run_by_target ON run(target, id);
                """)
        }
        migrator.registerMigration("2 daemon schedule and progress") { db in
            // Written only by `folio daemon`, read by `folio status`: when each target runs next, and the live
            // counters of a run in progress. Rows of a daemon that died are recognised by `daemon_pid`.
            try db.execute(sql: """
                CREATE TABLE schedule (
                    target TEXT PRIMARY KEY,
                    daemon_pid INTEGER NOT NULL,
                    next_run_at REAL,
                    files_done INTEGER,
                    files_total INTEGER,
                    bytes_done INTEGER,
                    bytes_total INTEGER
                );
                """)
        }
        migrator.registerMigration("3 listing hints") { db in
            // What a source said about its server in the last listing (`Snapshot.memo`), and an index of each
            // target's folders (a few percent of its entries), which the next listing of a far source asks for
            // all at once.
            try db.execute(sql: """
                ALTER TABLE target ADD COLUMN listing_memo TEXT;
                CREATE INDEX entry_folder ON entry(target, path) WHERE kind = 1;
                """)
        }
        migrator.registerMigration("4 hook backlog") { db in
            // The changed paths of runs whose `on-change` hook has not had them yet (`HookBacklog`), one row per
            // run: the paths, each followed by a newline (names hold no control characters, see `RelativePath`).
            try db.execute(sql: """
                CREATE TABLE hook_backlog (
                    run INTEGER PRIMARY KEY,
                    target TEXT NOT NULL,
                    paths BLOB NOT NULL
                );
                CREATE INDEX hook_backlog_by_target ON hook_backlog(target, run);
                """)
        }
        migrator.registerMigration("5 hook backlog by batch") { db in
            // Several rows per run: its paths are kept batch by batch before they change (`keepChangesForHook`),
            // no longer all at its end.
            try db.execute(sql: """
                CREATE TABLE hook_backlog_by_batch (
                    id INTEGER PRIMARY KEY,
                    run INTEGER NOT NULL,
                    target TEXT NOT NULL,
                    paths BLOB NOT NULL
                );
                INSERT INTO hook_backlog_by_batch (run, target, paths) SELECT run, target, paths FROM hook_backlog ORDER BY run;
                DROP TABLE hook_backlog;
                ALTER TABLE hook_backlog_by_batch RENAME TO hook_backlog;
                CREATE INDEX hook_backlog_by_target ON hook_backlog(target, run);
                CREATE INDEX hook_backlog_by_run ON hook_backlog(run);
                """)
        }
        return migrator
    }()

    // MARK: StateStore

    /// Reads the target's record; a stored path that no longer validates is left out.
    public func record(of target: String, sharingPathsWith snapshot: Snapshot) throws -> RecordedTree {
        try perform {
            try queue.read { db in
                var record: [RecordedEntry] = []
                // Sized up front: growing by doubling would hold two copies of a large record at once.
                record.reserveCapacity(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM entry WHERE target = ?", arguments: [target]) ?? 0)
                let rows = try Row.fetchCursor(db, sql: "SELECT path, kind, size, mtime, validator, checksum, local_inode, local_mtime FROM entry WHERE target = ?", arguments: [target])
                while let row = try rows.next() {
                    let bytes: Data = try row.decode(atIndex: 0)
                    // A row whose path no longer validates (written by hand?) is dropped: it never becomes a path.
                    let shared = bytes.withUnsafeBytes { snapshot.path(matching: $0.assumingMemoryBound(to: UInt8.self)) }
                    guard let path = shared ?? (try? RelativePath(validating: [UInt8](bytes))),
                          let kind = Entry.Kind(rawValue: UInt8(clamping: try row.decode(Int.self, atIndex: 1))) else { continue }
                    try record.append(RecordedEntry(path: path, kind: kind, size: row.decode(atIndex: 2), mtime: FileTime(nanoseconds: row.decode(atIndex: 3)),
                                                validator: row.decode(atIndex: 4), checksum: row.decode(atIndex: 5), localInode: UInt64(bitPattern: row.decode(atIndex: 6)),
                                                localMtime: FileTime(nanoseconds: row.decode(atIndex: 7))))
                }
                return RecordedTree(consume record)
            }
        }
    }

    /// A target's recorded folders, from the partial index `entry_folder` (named: without statistics SQLite
    /// prefers the primary key, a pass over every entry of the target); `kind = 1` is a literal to match it.
    static let foldersQuery = "SELECT path FROM entry INDEXED BY entry_folder WHERE target = ? AND kind = 1 ORDER BY path"

    /// The target's recorded folders in path order, and its listing memo.
    public func listingHints(of target: String) throws -> ListingHints {
        try perform {
            try queue.read { db in
                let rows = try Data.fetchCursor(db, sql: Self.foldersQuery, arguments: [target])
                var folders: [RelativePath] = []
                while let bytes = try rows.next() {
                    // A row whose path no longer validates is left out, as `record(of:)` does.
                    if let path = try? RelativePath(validating: [UInt8](bytes)) { folders.append(path) }
                }
                let memo = try String.fetchOne(db, sql: Self.memoQuery, arguments: [target])
                return ListingHints(folders: folders, memo: memo)
            }
        }
    }

    static let memoQuery = "SELECT listing_memo FROM target WHERE name = ?"

    /// The target's listing memo; nil when none is stored.
    public func listingMemo(of target: String) throws -> String? {
        try perform {
            try queue.read { db in try String.fetchOne(db, sql: Self.memoQuery, arguments: [target]) }
        }
    }

    /// How many entries the records of runs from `source` into `destination` hold, whatever the target's name.
    public func recordedEntryCount(from source: String, in destination: String) throws -> Int {
        try perform {
            try queue.read { db in
                // By source and destination, whatever the target's name: a renamed target takes over its record
                // at its first run (`beginRun`), so the folder is guarded before that run as after.
                try Int.fetchOne(db, sql: """
                    SELECT count(*) FROM entry JOIN target ON entry.target = target.name WHERE target.source = ? AND target.destination = ?
                    """, arguments: [source, destination]) ?? 0
            }
        }
    }

    /// The source digest the last finished run stored (a clean run stores one, any other clears it); nil when none is.
    public func sourceDigest(of target: String) throws -> UInt64? {
        try perform {
            try queue.read { db in
                try Int64.fetchOne(db, sql: "SELECT source_digest FROM target WHERE name = ?", arguments: [target]).map { UInt64(bitPattern: $0) }
            }
        }
    }

    /// Adds a `running` run and returns its id. A target whose source or destination changed forgets its record,
    /// hook backlog, digest and memo; runs of the target still marked `running` are closed as interrupted.
    public func beginRun(target: String, source: String, destination: String, trigger: TargetConfig.Trigger, startedAt: Date) throws -> Int64 {
        try perform {
            try queue.write { db in
                // A target already known keeps its record here, even when pointed at another source or destination:
                // the run starts it over (`startOver`) once it goes on to change the destination.
                let known = try Bool.fetchOne(db, sql: "SELECT 1 FROM target WHERE name = ?", arguments: [target]) == true
                if !known, let previous = try String.fetchOne(db, sql: "SELECT name FROM target WHERE source = ? AND destination = ? LIMIT 1",
                                                              arguments: [source, destination]) {
                    // A target renamed in the configuration, or a `folio mirror` of the same two folders made a
                    // target: the same source into the same folder, so what Folio wrote there is this target's. Its
                    // record, runs and pending hook paths move to the new name; forgotten, every file the source
                    // then changed was set aside as a local change. (No two configured targets share a folder.)
                    try db.execute(sql: """
                        INSERT INTO target (name, source, destination, source_digest, listing_memo)
                        SELECT ?, source, destination, source_digest, listing_memo FROM target WHERE name = ?
                        """, arguments: [target, previous])
                    for table in ["entry", "run", "hook_backlog"] {
                        try db.execute(sql: "UPDATE \(table) SET target = ? WHERE target = ?", arguments: [target, previous])
                    }
                    try db.execute(sql: "DELETE FROM schedule WHERE target = ?", arguments: [previous])
                    try db.execute(sql: "DELETE FROM target WHERE name = ?", arguments: [previous])
                } else if !known {
                    try db.execute(sql: "INSERT INTO target (name, source, destination) VALUES (?, ?, ?)", arguments: [target, source, destination])
                }
                // Runs left 'running' by a process that died are closed as interrupted.
                try db.execute(sql: "UPDATE run SET result = 'interrupted' WHERE target = ? AND result = 'running'", arguments: [target])
                try db.execute(sql: "INSERT INTO run (target, trigger, started_at, pid) VALUES (?, ?, ?, ?)",
                               arguments: [target, trigger.rawValue, startedAt.timeIntervalSince1970, getpid()])
                return db.lastInsertedRowID
            }
        }
    }

    public func recordsAnotherTree(target: String, source: String, destination: String) throws -> Bool {
        try perform {
            try queue.read { db in
                guard let row = try Row.fetchOne(db, sql: "SELECT source, destination FROM target WHERE name = ?", arguments: [target]) else { return false }
                return try row.decode(String.self, atIndex: 0) != source || row.decode(String.self, atIndex: 1) != destination
            }
        }
    }

    public func startOver(target: String, source: String, destination: String) throws {
        try perform {
            try queue.write { db in
                // The rows stay, with the old source's validators and checksums gone: which local entries Folio
                // wrote (inode, size, times) outlives a run cut short after this, where the rows' versions must
                // not pass for the new source's (an equal ETag from another server says nothing of the content).
                // Without tokens a row can only say "the same size and time", the rule any file already there is
                // adopted by; rows of paths the new source lacks go at its first complete run.
                try db.execute(sql: "UPDATE entry SET validator = NULL, checksum = NULL WHERE target = ?", arguments: [target])
                // Paths of the old tree mean nothing to a hook of the new one.
                try db.execute(sql: "DELETE FROM hook_backlog WHERE target = ?", arguments: [target])
                try db.execute(sql: "UPDATE target SET source = ?, destination = ?, source_digest = NULL, listing_memo = NULL WHERE name = ?",
                               arguments: [source, destination, target])
            }
        }
    }

    /// Adds a finished `failed` (or, with `refused`, `refused`) run that ended as it started, leaving the target's
    /// record and other runs alone.
    public func recordFailedStart(target: String, trigger: TargetConfig.Trigger, at startedAt: Date, error: String, refused: Bool) throws {
        try perform {
            try queue.write { db in
                try db.execute(sql: "INSERT INTO run (target, trigger, started_at, ended_at, result, error, pid) VALUES (?, ?, ?, ?, ?, ?, ?)",
                               arguments: [target, trigger.rawValue, startedAt.timeIntervalSince1970, startedAt.timeIntervalSince1970,
                                           (refused ? RunReport.Result.refused : .failed).rawValue, error, getpid()])
                try Self.forgetOldRuns(of: target, in: db)
            }
        }
    }

    /// How many runs of each target the database keeps, the newest: about ten days of a daemon syncing every 15
    /// minutes, 100 KB. Why a bound: a row per run, kept for ever, grew the database without end on a machine
    /// left alone for years; `folio status` reads only the last.
    static let keptRuns = 1_000

    /// Forgets the target's runs older than its newest `keptRuns`. Their paths kept for a hook (`hook_backlog`)
    /// are not theirs to forget: the backlog is read by run number, not through this table.
    private static func forgetOldRuns(of target: String, in db: Database) throws {
        try db.execute(sql: """
            DELETE FROM run WHERE target = ?1 AND id <= (SELECT id FROM run WHERE target = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
            """, arguments: [target, keptRuns])
    }

    /// Upserts the entries and deletes each removed path with everything below it, in one transaction.
    public func commit(target: String, upserts: [RecordedEntry], removedSubtrees: [RelativePath]) throws {
        try perform {
            try queue.write { db in
                // Two statements, not one with OR: each is a range on the primary key, where an OR scans the table.
                let deleteOne = try db.cachedStatement(sql: "DELETE FROM entry WHERE target = ? AND path = ?")
                let deleteBelow = try db.cachedStatement(sql: "DELETE FROM entry WHERE target = ? AND path >= ? AND path < ?")
                for path in removedSubtrees {
                    var low = path.bytes
                    low.append(UInt8(ascii: "/"))
                    var high = path.bytes
                    high.append(UInt8(ascii: "/") + 1)
                    try deleteOne.execute(arguments: [target, Data(path.bytes)])
                    try deleteBelow.execute(arguments: [target, Data(low), Data(high)])
                }
                let statement = try db.cachedStatement(sql: """
                    INSERT OR REPLACE INTO entry (target, path, kind, size, mtime, validator, checksum, local_inode, local_mtime)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
                for record in upserts {
                    try statement.execute(arguments: [target, record.path.withBytes { Data($0) }, Int(record.kind.rawValue), record.size,
                                                      record.mtime.nanoseconds, record.validator, record.checksum,
                                                      Int64(bitPattern: record.localInode), record.localMtime.nanoseconds])
                }
            }
        }
    }

    /// Records how a run ended. A run that changed the destination ends with its log flushed (this commit is made with synchronous =
    /// FULL, which flushes the log and so every commit before it): the files it installed are on disk, and a
    /// power cut must not leave the record behind them. A run that changed nothing flushes nothing, unless its
    /// end finds more than `logLimit` in the log (one in about 30 such runs), which it then checkpoints.
    public func finishRun(id: Int64, target: String, report: RunReport, sourceDigest: UInt64?, listingMemo: String?,
                          keepingChangesForHook: Bool) throws {
        let changed = report.downloaded + report.updated + report.removed + report.trashed + report.createdFolders > 0
        try perform {
            try queue.writeWithoutTransaction { db in
                // Why outside the transaction: SQLite ignores a change of `synchronous` inside one.
                if changed { try db.execute(sql: "PRAGMA synchronous = FULL") }
                defer { if changed { try? db.execute(sql: "PRAGMA synchronous = NORMAL") } }
                try db.inTransaction {
                    try db.execute(sql: """
                        UPDATE run SET ended_at = ?, result = ?, downloaded = ?, updated = ?, removed = ?, trashed = ?,
                            created_dirs = ?, bytes = ?, failed = ?, error = ? WHERE id = ?
                        """, arguments: [report.startedAt.timeIntervalSince1970 + report.seconds, report.result.rawValue, report.downloaded,
                                         report.updated, report.removed, report.trashed, report.createdFolders, report.bytes,
                                         report.failed, report.error, id])
                    try db.execute(sql: "UPDATE target SET source_digest = ?, listing_memo = coalesce(?, listing_memo) WHERE name = ?",
                                   arguments: [sourceDigest.map { Int64(bitPattern: $0) }, listingMemo, target])
                    if !keepingChangesForHook {
                        try db.execute(sql: "DELETE FROM hook_backlog WHERE target = ?", arguments: [target])
                    }
                    try Self.forgetOldRuns(of: target, in: db)
                    return .commit
                }
                // Why: the next process to open the database reads the whole log, checkpointed or not (a 4 MB log
                // cost every run 1.7 ms). Past `logLimit`, about 30 runs that changed nothing, the log goes into
                // the database and is emptied (a passive checkpoint would leave it whole for the next opener). It
                // waits at most 0.2 s for another process's readers, not the 30 s a write waits; a failure leaves
                // the log as it was, for a later run.
                if Self.logSize(of: path) > Self.logLimit {
                    sqlite3_busy_timeout(db.sqliteConnection, 200)
                    defer { sqlite3_busy_timeout(db.sqliteConnection, Self.busyTimeoutMilliseconds) }
                    _ = try? db.checkpoint(.truncate)
                }
            }
        }
    }

    /// Why flushed (synchronous = FULL for this commit): the paths must be on disk before the files they name
    /// change, which a power cut can otherwise reverse (the renames reach the disk, the log's commit does not).
    public func keepChangesForHook(run: Int64, target: String, paths: [RelativePath]) throws {
        guard !paths.isEmpty else { return }
        var lines: [UInt8] = []
        for path in paths { path.withBytes { lines.append(contentsOf: $0) }; lines.append(UInt8(ascii: "\n")) }
        try perform {
            try queue.writeWithoutTransaction { db in
                // Why outside the transaction: SQLite ignores a change of `synchronous` inside one.
                try db.execute(sql: "PRAGMA synchronous = FULL")
                defer { try? db.execute(sql: "PRAGMA synchronous = NORMAL") }
                try db.inTransaction {
                    try db.execute(sql: "INSERT INTO hook_backlog (run, target, paths) VALUES (?, ?, ?)", arguments: [run, target, Data(lines)])
                    return .commit
                }
            }
        }
    }

    /// The paths kept for the target's hook by runs before `run` (every run with nil): each path once,
    /// oldest run first.
    public func pendingHookChanges(of target: String, before run: Int64?) throws -> HookBacklog {
        try perform {
            try queue.read { db in
                var backlog = HookBacklog(runs: [], paths: [])
                var seen = Set<RelativePath>()
                let rows = try Row.fetchAll(db, sql: "SELECT run, paths FROM hook_backlog WHERE target = ? AND run < ? ORDER BY run, id",
                                            arguments: [target, run ?? Int64.max])
                for row in rows {
                    let kept: Int64 = try row.decode(atIndex: 0)
                    if backlog.runs.last != kept { backlog.runs.append(kept) }
                    let bytes: Data = try row.decode(atIndex: 1)
                    for line in bytes.split(separator: UInt8(ascii: "\n")) {
                        if let path = try? RelativePath(validating: [UInt8](line)), seen.insert(path).inserted { backlog.paths.append(path) }
                    }
                }
                return backlog
            }
        }
    }

    /// Deletes the kept paths of the backlog's runs.
    public func forgetHookChanges(_ backlog: HookBacklog) throws {
        guard !backlog.runs.isEmpty else { return }
        try perform {
            try queue.write { db in
                let statement = try db.cachedStatement(sql: "DELETE FROM hook_backlog WHERE run = ?")
                for run in backlog.runs { try statement.execute(arguments: [run]) }
            }
        }
    }

    /// The most the log may hold at the end of a run before it is checkpointed (bytes).
    static let logLimit = 512 << 10

    /// How long a write waits for another process's (the daemon's, a manual run's) to end.
    static let busyTimeoutMilliseconds: Int32 = 30_000

    /// The log file's size; 0 when there is none.
    static func logSize(of path: String) -> Int {
        var info = stat()
        return stat(path + "-wal", &info) == 0 ? Int(info.st_size) : 0
    }

    // MARK: status

    /// A run as stored, for `folio status`.
    public struct RunRow: Sendable {
        /// The run's id (`RunReport.runID`).
        public var id: Int64
        /// The target's name.
        public var target: String
        /// `manual` or `automatic`.
        public var trigger: String
        /// When the run started.
        public var startedAt: Date
        /// When it ended; nil while it runs, and for a run whose process died before recording its end.
        public var endedAt: Date?
        /// `running` until the run ends, then a `RunReport.Result` raw value (`synced`, `failed`, …).
        public var result: String
        /// New files.
        public var downloaded: Int
        /// Files replaced by a newer version, plus mtime-only fixes.
        public var updated: Int
        /// Entries removed because the source no longer has them.
        public var removed: Int
        /// Local files Folio did not write, or that changed since, moved to the trash before being replaced.
        public var trashed: Int
        /// Folders created.
        public var createdFolders: Int
        /// Bytes copied.
        public var bytes: Int64
        /// Files that failed, plus unreadable parts of the source (`RunReport.failed`).
        public var failed: Int
        /// The run-level error or the guard that refused, one line; nil when there was none.
        public var error: String?
        /// The process that ran it, so that a `running` row whose process is gone reads as interrupted;
        /// nil when not stored.
        public var pid: Int32?
    }

    /// The latest run of each target that has run.
    public func lastRuns() throws -> [String: RunRow] {
        try perform {
            try queue.read { db in
                let rows = try Row.fetchAll(db, sql: """
                    SELECT id, target, trigger, started_at, ended_at, result, downloaded, updated, removed, trashed, created_dirs,
                           bytes, failed, error, pid FROM run WHERE id IN (SELECT max(id) FROM run GROUP BY target)
                    """)
                var runs: [String: RunRow] = [:]
                for row in rows {
                    let run = try RunRow(id: row.decode(atIndex: 0), target: row.decode(atIndex: 1), trigger: row.decode(atIndex: 2), startedAt: Date(timeIntervalSince1970: row.decode(atIndex: 3)),
                                     endedAt: row.decode(Double?.self, atIndex: 4).map { Date(timeIntervalSince1970: $0) }, result: row.decode(atIndex: 5),
                                     downloaded: row.decode(atIndex: 6), updated: row.decode(atIndex: 7), removed: row.decode(atIndex: 8), trashed: row.decode(atIndex: 9), createdFolders: row.decode(atIndex: 10),
                                     bytes: row.decode(atIndex: 11), failed: row.decode(atIndex: 12), error: row.decode(atIndex: 13), pid: row.decode(atIndex: 14))
                    runs[run.target] = run
                }
                return runs
            }
        }
    }

    /// Turns database errors into one line naming the file and the way out.
    func perform<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as StateError {
            throw error
        } catch {
            throw Self.describe(error, path: path)
        }
    }

    private static func describe(_ error: Error, path: String) -> StateError {
        // Folio's own line (from `prepareDatabase`, through GRDB), which names the database already.
        if let error = error as? StateError { return error }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_NOTADB, .SQLITE_CORRUPT:
                return StateError("state database \(path) is corrupt (SQLite \(error.resultCode.rawValue)); move it aside and run again: Folio starts a new one and adopts the files already in place")
            case .SQLITE_READONLY, .SQLITE_CANTOPEN, .SQLITE_PERM:
                // Most often another user's database (the service's, run as root) read by a user's `folio status`:
                // the line names the user, and the way that works for each case.
                let verb = error.resultCode == .SQLITE_READONLY ? "write" : "open"
                return StateError("cannot \(verb) the state database \(path) as \(PathText.userName) (SQLite \(error.resultCode.rawValue)); run folio as the user it belongs to (sudo, for the service's), make it and its folder writable by \(PathText.userName), or set FOLIO_STATE_DIR")
            case .SQLITE_FULL:
                return StateError("the disk holding the state database \(path) is full; free some space")
            case .SQLITE_BUSY, .SQLITE_LOCKED:
                return StateError("the state database \(path) stayed locked by another folio process for 30 s; try again")
            default:
                return StateError("state database \(path): \(error.message ?? "SQLite error \(error.resultCode.rawValue)")")
            }
        }
        if error is RowDecodingError {
            // A value of the wrong type (a file edited by hand, or damaged where SQLite's own checks do not look):
            // what it holds cannot be trusted, as for a file SQLite finds corrupt.
            return StateError("state database \(path) holds a value Folio cannot read; move it aside and run again: Folio starts a new one and adopts the files already in place")
        }
        return StateError("state database \(path): \(error)")
    }
}
