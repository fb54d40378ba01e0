import FolioCore
import Foundation
import XCTest

final class RunScheduleTests: XCTestCase {
    func testGoodRunWaitsTheIntervalPlusAtMostATenthOfJitter() {
        XCTAssertEqual(RunSchedule.delay(interval: 600, consecutiveFailures: 0, random: 0), 600)
        XCTAssertEqual(RunSchedule.delay(interval: 600, consecutiveFailures: 0, random: 0.5), 630)
        XCTAssertEqual(RunSchedule.delay(interval: 600, consecutiveFailures: 0, random: 1), 660)
        // The jitter never exceeds five minutes, however long the interval.
        XCTAssertEqual(RunSchedule.delay(interval: 86_400, consecutiveFailures: 0, random: 1), 86_400 + 300)
    }

    func testFailuresBackOffExponentiallyCappedAtTheInterval() {
        let delays = (1...8).map { RunSchedule.delay(interval: 300, consecutiveFailures: $0, random: 0) }
        XCTAssertEqual(delays, [10, 20, 40, 80, 160, 300, 300, 300])
        // A year of failures stays finite and capped.
        XCTAssertEqual(RunSchedule.delay(interval: 3_600, consecutiveFailures: 100_000, random: 0), 3_600)
        // An interval below the first retry caps it too.
        XCTAssertEqual(RunSchedule.delay(interval: 2, consecutiveFailures: 1, random: 0), 2)
    }

    /// The jitter counts toward the cap too: with a 20 s interval a retry once waited 21 s.
    func testARetryWithJitterStillWaitsNoLongerThanTheInterval() {
        XCTAssertEqual(RunSchedule.delay(interval: 20, consecutiveFailures: 2, random: 1), 20)
        XCTAssertEqual(RunSchedule.delay(interval: 600, consecutiveFailures: 1, random: 1), 11)
    }

    /// A retry's jitter is a tenth of its own wait: the first retry of an hourly target waited anywhere from 10 s
    /// to 5 min 10 s (a tenth of the interval, capped at five minutes), where the docs promise 10 s.
    func testARetrysJitterIsATenthOfItsOwnWait() {
        XCTAssertEqual(RunSchedule.delay(interval: 3_600, consecutiveFailures: 1, random: 1), 11)
        XCTAssertEqual(RunSchedule.delay(interval: 3_600, consecutiveFailures: 3, random: 0.5), 42)
        XCTAssertEqual(RunSchedule.delay(interval: 86_400, consecutiveFailures: 12, random: 1), 20_480 + 300, "never more than five minutes")
    }

    /// A clock set back a day left a target due "tomorrow" for a day; now it is held at one interval.
    func testADueTimeFurtherOffThanAnyDelayIsHeldAtOneInterval() {
        let now = Date(timeIntervalSince1970: 1_000_000)
        XCTAssertEqual(RunSchedule.clamped(now.addingTimeInterval(86_400 + 60), now: now, interval: 60), now.addingTimeInterval(60))
        XCTAssertEqual(RunSchedule.clamped(now.addingTimeInterval(66), now: now, interval: 60), now.addingTimeInterval(66), "interval and jitter")
        XCTAssertEqual(RunSchedule.clamped(now.addingTimeInterval(-5), now: now, interval: 60), now.addingTimeInterval(-5), "due already")
    }

    func testStartableTakesDueTargetsEarliestFirstWithinTheFreeSlots() {
        let now = Date(timeIntervalSince1970: 1_000)
        let candidates = [
            RunSchedule.Candidate(name: "late", host: nil, due: now.addingTimeInterval(5)),
            RunSchedule.Candidate(name: "b", host: nil, due: now.addingTimeInterval(-1)),
            RunSchedule.Candidate(name: "a", host: nil, due: now.addingTimeInterval(-9)),
            RunSchedule.Candidate(name: "c", host: nil, due: now),
        ]
        XCTAssertEqual(RunSchedule.startable(candidates, now: now, busyHosts: [], slots: 2), ["a", "b"])
        XCTAssertEqual(RunSchedule.startable(candidates, now: now, busyHosts: [], slots: 9), ["a", "b", "c"])
        XCTAssertEqual(RunSchedule.startable(candidates, now: now, busyHosts: [], slots: 0), [])
    }

    func testTargetsOnOneHostRunOneAtATime() {
        let now = Date(timeIntervalSince1970: 1_000)
        let candidates = [
            RunSchedule.Candidate(name: "photos", host: "nas:22", due: now.addingTimeInterval(-3)),
            RunSchedule.Candidate(name: "videos", host: "nas:22", due: now.addingTimeInterval(-2)),
            RunSchedule.Candidate(name: "web", host: "www:443", due: now.addingTimeInterval(-1)),
            RunSchedule.Candidate(name: "local", host: nil, due: now),
        ]
        XCTAssertEqual(RunSchedule.startable(candidates, now: now, busyHosts: [], slots: 4), ["photos", "web", "local"])
        XCTAssertEqual(RunSchedule.startable(candidates, now: now, busyHosts: ["nas:22"], slots: 4), ["web", "local"])
    }

    func testHostOfASource() {
        XCTAssertNil(RunSchedule.host(of: "/srv/photos"))
        XCTAssertEqual(RunSchedule.host(of: "sftp://me@NAS.local/photos"), "nas.local:22")
        XCTAssertEqual(RunSchedule.host(of: "sftp://nas.local:2222/videos"), "nas.local:2222")
        XCTAssertEqual(RunSchedule.host(of: "https://example.org/gallery/"), "example.org:443")
    }
}
