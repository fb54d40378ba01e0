@testable import FolioCore
import XCTest

final class BandwidthLimitTests: XCTestCase {
    /// Written as rsync and rclone take it: KiB/s without a unit, K, M and G 1,024-fold, B for bytes; KB, MB and
    /// GB 1,000-fold, as rsync reads them.
    func testLimitsParseAsRsyncAndRcloneWriteThem() {
        let rows: [(String, Int64?)] = [
            ("500", 512_000), ("500K", 512_000), ("500kib/s", 512_000), ("2M", 2 << 20), ("2MB/s", 2_000_000), ("500KB", 500_000), ("1GB", 1_000_000_000), (" 1.5MiB/s ", 1_572_864),
            ("1G", 1 << 30), ("4096B", 4096), ("1", 1024),
        ]
        for (text, bytes) in rows {
            XCTAssertEqual(BandwidthLimit.parse(text)??.bytesPerSecond, bytes, text)
        }
        XCTAssertEqual(BandwidthLimit.parse("off").map { $0 == nil }, true, "off is no limit")
        for bad in ["", "fast", "-5", "1e9", "inf", "0x10", "1.2.3", "2 M", "0", "1000B", "5T", "M"] {
            XCTAssertTrue(BandwidthLimit.parse(bad) == nil, bad)
        }
        XCTAssertEqual(BandwidthLimit(bytesPerSecond: 2 << 20).description, "2.0 MiB/s")
    }

    /// Every chunk is charged to one budget: a worker waits until the budget caught up with what it received, and
    /// idle time is made up for at most `burst`'s worth.
    func testThePacerHoldsChunksToTheRateAndLetsOnlyAShortIdleBeMadeUp() {
        let start = ContinuousClock.now
        var pacer = BandwidthPacer(BandwidthLimit(bytesPerSecond: 1000), now: start)
        XCTAssertEqual(pacer.charge(500, at: start), .milliseconds(500))
        XCTAssertEqual(pacer.charge(500, at: start), .seconds(1), "a second worker's chunk waits behind the first")
        XCTAssertEqual(pacer.charge(250, at: start + .seconds(1)), .milliseconds(250))
        // Idle for two seconds: only 0.25 s of it counts, so 500 bytes wait 0.25 s.
        XCTAssertEqual(pacer.charge(500, at: start + .seconds(3)), .milliseconds(250))
    }

    /// Under a limit, each parallel download has at least 64 KiB/s of it, however many were asked for.
    func testALimitBoundsTheParallelDownloads() {
        var target = TargetConfig(name: "t", source: "/s", destination: "/d")
        XCTAssertEqual(target.downloadWorkers(roundTrip: nil), 4)
        target.bandwidthLimit = BandwidthLimit(bytesPerSecond: 100 << 10)
        XCTAssertEqual(target.downloadWorkers(roundTrip: nil), 1)
        target.bandwidthLimit = BandwidthLimit(bytesPerSecond: 1 << 20)
        XCTAssertEqual(target.downloadWorkers(roundTrip: .milliseconds(20)), 8)
        target.transfers = 16
        target.bandwidthLimit = BandwidthLimit(bytesPerSecond: 256 << 10)
        XCTAssertEqual(target.downloadWorkers(roundTrip: nil), 4)
    }
}
