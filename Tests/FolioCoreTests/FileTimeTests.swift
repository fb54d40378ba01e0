@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Times past what 64 bits of nanoseconds hold (after 2262, before 1677) are held at the nearest end, never
/// trapped on: one such file once crashed every run of its target with "Illegal instruction".
final class FileTimeTests: XCTestCase {
    /// 2300-01-01 and 1600-01-01, in seconds since the epoch.
    let year2300: Int64 = 10_413_792_000
    let year1600: Int64 = -11_676_096_000

    func testTimesPastEitherEndAreHeldAtThatEnd() {
        XCTAssertEqual(FileTime(seconds: year2300), .latest)
        XCTAssertEqual(FileTime(seconds: 253_402_300_799), .latest, "a Last-Modified in 9999")
        XCTAssertEqual(FileTime(seconds: 9_223_372_036, nanoseconds: 999_999_999), .latest, "past the end by its nanoseconds only")
        XCTAssertEqual(FileTime(seconds: year1600), .earliest)
        XCTAssertEqual(FileTime(seconds: .min), .earliest)
        XCTAssertEqual(FileTime(seconds: 1_700_000_000, nanoseconds: 5).nanoseconds, 1_700_000_000_000_000_005)
        XCTAssertEqual(FileTime(seconds: -5, nanoseconds: -500_000_000).nanoseconds, -5_500_000_000)
    }

    func testBothEndsTruncateToEveryPrecisionWithoutLeavingTheRange() {
        for precision in TimePrecision.allCases {
            XCTAssertGreaterThan(FileTime.latest.truncated(to: precision).nanoseconds, Int64.max - precision.nanoseconds)
            XCTAssertEqual(FileTime.earliest.truncated(to: precision), .earliest)
        }
    }

    func testAFileDatedInTheYear2300IsMirroredAndThenLeftUnchanged() async throws {
        let served = TemporaryDirectory("far-future-source")
        let mirror = TemporaryDirectory("far-future-dest")
        FixtureTree.write(served.path, "future.txt", "from the future", mtime: (seconds: Int(year2300), nanoseconds: 0))
        FixtureTree.write(served.path, "past.txt", "from the past", mtime: (seconds: Int(year1600), nanoseconds: 0))
        let target = TargetConfig(name: "t", source: served.path, destination: mirror.path)
        let state = MemoryStateStore()
        let engine = SyncEngine(state: state, events: EventRecorder())

        let first = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(first.result, .synced, first.error ?? "")
        XCTAssertEqual(first.downloaded, 2)
        XCTAssertEqual(FixtureTree.read(mirror.path("future.txt")).map { String(decoding: $0, as: UTF8.self) }, "from the future")
        var info = stat()
        XCTAssertEqual(stat(mirror.path("future.txt"), &info), 0)
        XCTAssertEqual(FileTime(modificationOf: info), .latest)

        let second = await engine.run(target, source: LocalSource(rootPath: served.path), options: .init(trigger: .manual))
        XCTAssertEqual(second.result, .unchanged, second.error ?? "")
    }

    func testAFilesystemsPrecisionIsReadFromWhatItKeepsOfAProbe() {
        let probe = FileTime(seconds: 1_000_000_001, nanoseconds: 123_456_789)
        let kept: [(FileTime, TimePrecision)] = [
            (probe, .nanosecond),
            (FileTime(seconds: 1_000_000_001, nanoseconds: 123_456_700), .microsecond),  // NTFS: 100 ns
            (FileTime(seconds: 1_000_000_001, nanoseconds: 123_456_000), .microsecond),
            (FileTime(seconds: 1_000_000_001, nanoseconds: 123_000_000), .millisecond),
            (FileTime(seconds: 1_000_000_001, nanoseconds: 120_000_000), .tenMilliseconds),  // exFAT
            (FileTime(seconds: 1_000_000_001), .second),  // ext4 with 128-byte inodes, HFS+
            (FileTime(seconds: 1_000_000_000), .twoSeconds),  // FAT
        ]
        for (readBack, precision) in kept {
            XCTAssertEqual(TimePrecision(keeping: readBack, of: probe), precision, "\(readBack)")
        }
    }
}
