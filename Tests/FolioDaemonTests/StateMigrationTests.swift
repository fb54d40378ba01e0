import FolioCore
import FolioState
import FolioTestSupport
import Foundation
import XCTest

/// Migrations 2 and 3 are added on top of databases written before them: their targets, records and runs stay.
final class StateMigrationTests: XCTestCase {
    /// Migration 1's schema as released, and GRDB's record of it, written with Python's sqlite3 (not GRDB), so
    /// the database is what an older folio left on disk.
    private static let versionOne = """
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
                        CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY);
        INSERT INTO grdb_migrations VALUES ('1 targets, entries, runs');
        INSERT INTO target (name, source, destination) VALUES ('photos', '/srv/src', '/srv/dst');
        INSERT INTO entry VALUES ('photos', CAST('2024' AS BLOB), 1, 0, 0, NULL, NULL, 1, 0);
        INSERT INTO entry VALUES ('photos', CAST('2024/a.jpg' AS BLOB), 0, 3, 0, NULL, NULL, 2, 0);
        INSERT INTO run (target, trigger, started_at, ended_at, result, downloaded, bytes, pid)
            VALUES ('photos', 'manual', 1800000000, 1800000010, 'synced', 12, 3456, 1);
        """

    func testAVersionOneDatabaseGainsTheScheduleAndKeepsItsRuns() throws {
        let folder = TemporaryDirectory("folio-migration")
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", "import sqlite3, sys; sqlite3.connect(sys.argv[1]).executescript(sys.argv[2])",
                            folder.path("state.sqlite"), Self.versionOne]
        try python.run()
        python.waitUntilExit()
        XCTAssertEqual(python.terminationStatus, 0, "python3 with sqlite3 is needed to write a version 1 database")

        let database = try StateDatabase(directory: folder.path)
        let run = try XCTUnwrap(try database.lastRuns()["photos"])
        XCTAssertEqual(run.result, "synced")
        XCTAssertEqual(run.downloaded, 12)
        XCTAssertEqual(run.bytes, 3456)
        XCTAssertTrue(try database.schedules().isEmpty)
        try database.setNextRun(target: "photos", daemonPID: 9, at: Date(timeIntervalSince1970: 1_800_000_100))
        XCTAssertEqual(try database.schedules()["photos"]?.nextRunAt, Date(timeIntervalSince1970: 1_800_000_100))
        XCTAssertEqual(try database.listingHints(of: "photos"), ListingHints(folders: [try RelativePath(validating: "2024")], memo: nil))
    }
}
