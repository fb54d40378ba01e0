@testable import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Small files fetched over SFTP with many requests in flight, from an SFTP-only account (no tar): what counts as
/// arrived, and what is left for the engine to fetch alone.
final class SFTPBatchFetchTests: SFTPTestCase {
    /// Files of every shape arrive exactly: empty, one chunk, several chunks, odd names, more files than the
    /// server is asked to hold open at once. Files gone, touched or grown since the listing are not marked, and
    /// the others are unaffected. A second batch on the same connection goes through the same channel.
    func testFilesArriveExactlyAndFilesChangedSinceTheListingDoNot() async throws {
        let server = try SSHServer(forceInternalSFTP: true)
        let served = TemporaryDirectory("pipe-served")
        var expected: [String: [UInt8]?] = [:]
        func write(_ name: String, _ content: [UInt8]) {
            FixtureTree.write(served.path, name, content, mtime: (1_600_000_000, 0))
            expected[name] = content
        }
        write("empty", [])
        write("one chunk #1 100%.txt", Array("alpha\n".utf8))
        write("naïve/three chunks.bin", FixtureTree.bytes(count: 2 * SFTPBatchFetch.chunkSize + 5, seed: 1))
        write("exactly two chunks.bin", FixtureTree.bytes(count: 2 * SFTPBatchFetch.chunkSize, seed: 2))
        for index in 0..<(SFTPBatchFetch.window + 40) { write(String(format: "many/%03d", index), FixtureTree.bytes(count: index * 7, seed: UInt64(index))) }
        write("gone.txt", Array("gone\n".utf8))
        write("touched.txt", Array("touched\n".utf8))
        write("grown.txt", Array("grown\n".utf8))
        let source = try source(server, served.path)
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertFalse(source.tarBatchesAvailable)
        XCTAssertEqual(unlink(served.path("gone.txt")), 0)
        FixtureTree.write(served.path, "touched.txt", "touched\n", mtime: (1_600_000_009, 0))
        FixtureTree.write(served.path, "grown.txt", "grown and more\n", mtime: (1_600_000_000, 0))
        for name in ["gone.txt", "touched.txt", "grown.txt"] { expected[name] = .some(nil) }

        let entries = files(snapshot)
        let (first, rest) = (Array(entries.prefix(10)), Array(entries.dropFirst(10)))
        let fetched = try await fetchBatches(source, [first, rest])
        XCTAssertEqual(fetched[0].merging(fetched[1]) { $1 }, expected)
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Starting session: forced-command").count - 1, 2, "the listing's exec, then the pipe: it resolved the root, listed, and fetched both batches")
    }

    /// Over a 20 ms link (the delay proxy, 10 ms each way), a batch of 300 files costs a round trip for every
    /// `window` files, not two for each: the turns the proxy counts for the batch stay within a handful.
    func testABatchCostsARoundTripPerWindowOfFiles() async throws {
        let server = try SSHServer(forceInternalSFTP: true)
        let served = TemporaryDirectory("pipe-turns")
        for index in 0..<300 { FixtureTree.write(served.path, String(format: "file %03d", index), "content \(index)\n") }
        let proxy = try DelayProxy(forwardingTo: server.port, delay: 0.01)
        defer { proxy.stop() }
        let source = try source(server, served.path, through: proxy)
        let snapshot = try await source.snapshot(options: ListingOptions())
        let before = proxy.turns
        let fetched = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(fetched.values.filter { $0 != nil }.count, 300)
        // The pipe's channel (open, subsystem, version: 3), then 300 / 128 rounds of opens plus one of the last
        // reads: 4. A file at a time would be 600.
        XCTAssertLessThanOrEqual(proxy.turns - before, 3 + 4 + 2, "turns for the batch")
    }
}
