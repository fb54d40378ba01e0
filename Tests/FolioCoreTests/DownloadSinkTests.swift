import CFolioSys
@testable import FolioCore
import FolioTestSupport
import Foundation
import XCTest

/// How a download's bytes reach its partial file: large files past the page cache, exact to the byte.
final class DownloadSinkTests: XCTestCase {
    private var folder: TemporaryDirectory!
    private let path = try! RelativePath(validating: "film.mkv")

    override func setUp() { folder = TemporaryDirectory("sink") }
    // See `TemporaryDirectory`: the folder goes now, not at the process's end.
    override func tearDown() { folder = nil }

    /// Bytes that do not repeat with any power-of-two period, so a block written at the wrong offset shows.
    private func bytes(_ count: Int, seed: UInt32 = 7) -> [UInt8] {
        var state = seed
        return (0..<count).map { _ in
            state = state &* 1_103_515_245 &+ 12_345
            return UInt8(truncatingIfNeeded: state >> 16)
        }
    }

    /// Opens the partial file with `prefix` already in it, positioned after it, as a resumed download finds it.
    private func openPartial(prefix: [UInt8] = []) throws -> Int32 {
        let file = folder.path("partial")
        try Data(prefix).write(to: URL(fileURLWithPath: file))
        // As `Destination.openPartial` does: no O_APPEND, positioned at the end of what is there.
        let fd = open(file, O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        lseek(fd, off_t(prefix.count), SEEK_SET)
        return fd
    }

    private func contents() -> [UInt8] { FixtureTree.read(folder.path("partial")) ?? [] }

    /// Fails with the sizes and the first byte that differs (not megabytes of bytes) unless the partial file
    /// holds exactly `expected`.
    private func assertContents(_ expected: [UInt8], _ message: String = "", line: UInt = #line) {
        let actual = contents()
        guard actual != expected else { return }
        let differs = zip(actual, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        XCTFail("the file holds \(actual.count) bytes, \(expected.count) expected, first difference at \(differs.map(String.init) ?? "the end"); \(message)",
                line: line)
    }

    /// Writes `data` in chunks of `chunk` bytes, as a connection's callback hands them over.
    private func feed(_ sink: DownloadSink, _ data: ArraySlice<UInt8>, chunk: Int) throws {
        var at = data.startIndex
        while at < data.endIndex {
            let end = min(at + chunk, data.endIndex)
            try data[at..<end].withUnsafeBytes { try sink.write($0) }
            at = end
        }
    }

    func testALargeFileGoesPastThePageCacheAndArrivesExact() throws {
        let data = bytes(5 << 20 + 4_321)
        let fd = try openPartial()
        defer { close(fd) }
        let sink = DownloadSink.forTesting(fileDescriptor: fd, offset: 0, expectedSize: Int64(data.count), directIO: true, path: path)
        try feed(sink, data[..<100_003], chunk: 7_919)
        XCTAssertTrue(sink.writesDirectly)
        try feed(sink, data[100_003...], chunk: 65_536)
        XCTAssertEqual(sink.offset, Int64(data.count))
        XCTAssertEqual(sink.bytesTransferred, Int64(data.count))
        try sink.finish()
        XCTAssertFalse(sink.writesDirectly, "the tail is written through the page cache, and the file left so")
        assertContents(data)
    }

    func testASmallFileStaysInThePageCache() throws {
        let data = bytes(1 << 20)
        let fd = try openPartial()
        defer { close(fd) }
        let sink = DownloadSink.forTesting(fileDescriptor: fd, offset: 0, expectedSize: Int64(data.count), directIO: true, path: path)
        try feed(sink, data[...], chunk: 16_384)
        XCTAssertFalse(sink.writesDirectly)
        assertContents(data, "written as it arrives, before any finish")
        try sink.finish()
        assertContents(data)
    }

    /// A resumed download continues where the partial file ends: direct I/O only from an aligned offset.
    func testAResumedFileContinuesExactFromAnyOffset() throws {
        let data = bytes(6 << 20 + 99, seed: 11)
        for (prefix, direct) in [(1_000_001, false), (1 << 20, true)] {
            let fd = try openPartial(prefix: Array(data[..<prefix]))
            defer { close(fd) }
            let sink = DownloadSink.forTesting(fileDescriptor: fd, offset: Int64(prefix), expectedSize: Int64(data.count), directIO: true, path: path)
            try feed(sink, data[prefix..<(prefix + 12_345)], chunk: 12_345)
            XCTAssertEqual(sink.writesDirectly, direct, "resumed at \(prefix)")
            try feed(sink, data[(prefix + 12_345)...], chunk: 12_345)
            XCTAssertEqual(sink.bytesTransferred, Int64(data.count - prefix))
            try sink.finish()
            assertContents(data, "resumed at \(prefix)")
        }
    }

    /// A file system that turns down the first direct write (EINVAL) gets the bytes through the page cache, and
    /// writes that stop short write the rest, never a byte twice.
    func testARefusedDirectWriteFallsBackAndShortWritesLoseNothing() throws {
        let data = bytes(4 << 20 + 1_111, seed: 5)
        let fd = try openPartial()
        defer { close(fd) }
        // The first direct write stops a quarter of the way, the second is refused; the page cache takes the rest,
        // in short writes.
        let directCalls = Locked(0)
        let sink = DownloadSink(fileDescriptor: fd, offset: 0, expectedSize: Int64(data.count), directIO: true, path: path, progress: TransferProgress(),
                                writeCall: { fd, bytes, count in
                                    let direct = folio_is_direct_io(fd) == 1
                                    switch direct ? directCalls.withLock({ $0 += 1; return $0 }) : 0 {
                                    case 1: return Glibc.write(fd, bytes, min(count, 256 << 10))
                                    case 2: errno = EINVAL; return -1
                                    default: return Glibc.write(fd, bytes, min(count, 300_001))
                                    }
                                })
        try feed(sink, data[...], chunk: 65_536)
        XCTAssertEqual(directCalls.withLock { $0 }, 2, "one direct write refused, none tried after")
        XCTAssertFalse(sink.writesDirectly)
        try sink.finish()
        assertContents(data)
    }

    /// A write that fails after writing part of the staged MiB (the disk filled up, say) keeps only the rest:
    /// the download's `finish` then writes every byte that arrived exactly once, for the next run to resume.
    func testAFailedStagedWriteKeepsEachByteOnce() throws {
        let data = bytes(6 << 20, seed: 9)
        let fd = try openPartial()
        defer { close(fd) }
        // The first write goes a quarter of the way, the second finds the disk full, later ones work again.
        let calls = Locked(0)
        let sink = DownloadSink(fileDescriptor: fd, offset: 0, expectedSize: Int64(data.count), directIO: true, path: path, progress: TransferProgress(),
                                writeCall: { fd, bytes, count in
                                    switch calls.withLock({ $0 += 1; return $0 }) {
                                    case 1: return Glibc.write(fd, bytes, min(count, 256 << 10))
                                    case 2: errno = ENOSPC; return -1
                                    default: return Glibc.write(fd, bytes, count)
                                    }
                                })
        // The write of the first full MiB fails a quarter of the way in; the rest of that chunk never arrives.
        XCTAssertThrowsError(try feed(sink, data[..<(1 << 20 + 70_000)], chunk: 70_000)) { error in
            XCTAssertEqual((error as? SourceError)?.code, .localIO)
            XCTAssertTrue("\(error)".contains("No space left on device"), "\(error)")
        }
        XCTAssertEqual(sink.offset, 1 << 20, "every byte taken is counted")
        XCTAssertEqual(contents().count, 256 << 10, "the part of the MiB that was written")
        try sink.finish()
        assertContents(Array(data[..<(1 << 20)]), "each byte once, in order")
    }

    /// Direct I/O only where it is known to pay: a destination in memory (tmpfs) keeps the page cache.
    func testATmpfsDestinationKeepsThePageCache() throws {
        guard fileSystemType("/dev/shm") == 0x0102_1994, access("/dev/shm", W_OK) == 0 else { throw XCTSkip("no writable tmpfs at /dev/shm") }
        let path = "/dev/shm/folio-sink-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: path) }
        XCTAssertFalse(try Destination(path: path, create: true).takesDirectIO)
        let localDisk: Set<UInt> = [0xEF53, 0x5846_5342, 0x9123_683E, 0xF2F5_2010]
        XCTAssertEqual(try Destination(path: folder.path("dest"), create: true).takesDirectIO, localDisk.contains(fileSystemType(folder.path)),
                       "the temporary folder's file system decides")
    }

    private func fileSystemType(_ path: String) -> UInt {
        let fd = open(path, O_RDONLY | O_DIRECTORY)
        defer { if fd >= 0 { close(fd) } }
        return fd >= 0 ? folio_file_system_type(fd) : 0
    }

    /// A download that stops half-way keeps every byte that arrived, for the next run to resume from.
    func testFinishingAnInterruptedDownloadKeepsWhatArrived() throws {
        let data = bytes(6 << 20, seed: 3)
        let fd = try openPartial()
        defer { close(fd) }
        let sink = DownloadSink.forTesting(fileDescriptor: fd, offset: 0, expectedSize: Int64(data.count), directIO: true, path: path)
        try feed(sink, data[..<(2 << 20 + 5_000)], chunk: 50_000)
        XCTAssertEqual(contents().count, 2 << 20, "whole MiBs go to the disk as they fill")
        try sink.finish()
        assertContents(Array(data[..<(2 << 20 + 5_000)]))
    }
}
