import FolioState
import FolioTestSupport
import Foundation
import XCTest

/// The daemon's rows in the state database (migration 2), as `folio status` reads them.
final class ScheduleStoreTests: XCTestCase {
    func testScheduleAndProgressRoundTripAndAreForgotten() throws {
        let folder = TemporaryDirectory("folio-schedule")
        let database = try StateDatabase(directory: folder.path)
        let next = Date(timeIntervalSince1970: 1_800_000_000)
        try database.resetSchedule(daemonPID: 42, nextRuns: ["photos": next, "videos": next.addingTimeInterval(60)])
        let photos = try XCTUnwrap(try database.schedules()["photos"])
        XCTAssertEqual(photos.daemonPID, 42)
        XCTAssertEqual(photos.nextRunAt, next)
        XCTAssertNil(photos.progress)

        // Running: no next run, live progress; the progress survives a next-run update and is cleared after.
        let progress = StateDatabase.ScheduleRow.Progress(filesDone: 3, filesTotal: 10, bytesDone: 300, bytesTotal: 1_000)
        try database.setNextRun(target: "photos", daemonPID: 42, at: nil)
        try database.setProgress(target: "photos", daemonPID: 42, progress)
        XCTAssertEqual(try database.schedules()["photos"]?.progress, progress)
        XCTAssertNil(try database.schedules()["photos"]?.nextRunAt)
        try database.setNextRun(target: "photos", daemonPID: 42, at: next)
        XCTAssertEqual(try database.schedules()["photos"]?.progress, progress)
        try database.setProgress(target: "photos", daemonPID: 42, nil)
        XCTAssertNil(try database.schedules()["photos"]?.progress)

        // A reload that drops videos forgets its row; a stop forgets them all.
        try database.forgetSchedules(keeping: ["photos"])
        XCTAssertEqual(Set(try database.schedules().keys), ["photos"])
        try database.forgetSchedules(keeping: [])
        XCTAssertTrue(try database.schedules().isEmpty)

        // A new daemon starts from a clean slate, whatever the last one left.
        try database.setNextRun(target: "stale", daemonPID: 7, at: next)
        try database.resetSchedule(daemonPID: 43, nextRuns: ["photos": next])
        XCTAssertEqual(Set(try database.schedules().keys), ["photos"])
        XCTAssertEqual(try database.schedules()["photos"]?.daemonPID, 43)
    }
}
