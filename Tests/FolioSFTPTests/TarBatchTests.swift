@testable import FolioCore
@testable import FolioSFTP
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// Small files fetched with one `tar` over exec from a real sshd: what counts as arrived, and what falls back.
final class TarBatchTests: SFTPTestCase {
    /// Names tar must carry byte for byte: a leading dash, a backslash, `#`, `%`, non-ASCII, a path over the
    /// 100 bytes of a tar header's name field, and an empty file.
    static let names = ["-dash", "back\\slash", "naïve #1 %20.txt", "empty",
                        String(repeating: "long folder name ", count: 4) + "/" + String(repeating: "n", count: 90) + ".bin"]

    func testFilesArriveExactlyAndAFileChangedSinceTheListingDoesNot() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("tar-served")
        var expected: [String: [UInt8]] = [:]
        for (index, name) in Self.names.enumerated() {
            let content = name == "empty" ? [] : FixtureTree.bytes(count: 1000 * index + 17, seed: UInt64(index))
            FixtureTree.write(served.path, name, content, mtime: (1_600_000_000 + index, 0))
            expected[name] = content
        }
        FixtureTree.write(served.path, "stale", "old", mtime: (1_600_000_000, 0))
        let source = try source(server, served.path, method: .execOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        // Changed after the listing (same size, new time): tar sends it, but not as listed.
        FixtureTree.write(served.path, "stale", "new", mtime: (1_700_000_000, 0))

        let fetched = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(fetched.count, Self.names.count + 1)
        for name in Self.names { XCTAssertEqual(fetched[name] ?? nil, expected[name], name) }
        XCTAssertEqual(fetched["stale"], .some(nil), "a file that changed since the listing is not taken from the batch")
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Starting session: command").count - 1, 1,
                       "one exec: the listing's, which leaves tar waiting for the batch's names")
    }

    /// The listing's tar serves the first batch only; the next batch starts its own, and a file named like the
    /// listing's end marker neither ends the listing early nor confuses the batch.
    func testTheSecondBatchStartsItsOwnTar() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("tar-served")
        FixtureTree.write(served.path, "folio-listing-end", "looks like the end\n")
        FixtureTree.write(served.path, "z", "last\n")
        let source = try source(server, served.path, method: .execOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description).sorted(), ["folio-listing-end", "z"])
        let first = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(first, ["folio-listing-end": Array("looks like the end\n".utf8), "z": Array("last\n".utf8)])
        let second = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(second, first)
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Starting session: command").count - 1, 2, "the listing's, then the second batch's")
    }

    /// A server with find but no tar: the tar the listing starts fails at once, which costs the listing nothing;
    /// the batch finds tar missing and comes over SFTP instead (`SFTPBatchFetch`), and the source stops asking
    /// for tar.
    func testWithoutTarTheBatchComesOverSFTPAndTarIsNotAskedAgain() async throws {
        let tools = TemporaryDirectory("tools-without-tar")
        for tool in ["find", "head"] { XCTAssertEqual(symlink("/usr/bin/\(tool)", tools.path(tool)), 0) }
        let server = try SSHServer(commandPath: tools.path)
        let served = TemporaryDirectory("tar-served")
        for name in ["a", "b"] { FixtureTree.write(served.path, name, name) }
        let source = try source(server, served.path, method: .execOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertEqual(snapshot.entries.map(\.path.description).sorted(), ["a", "b"])
        let fetched = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(fetched, ["a": Array("a".utf8), "b": Array("b".utf8)])
        XCTAssertFalse(source.tarBatchesAvailable)
        let log = try String(contentsOfFile: server.logPath, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: "Starting session: command").count - 1, 1, "the listing's, whose tar failed at once")
        XCTAssertEqual(log.components(separatedBy: "Starting session: subsystem 'sftp'").count - 1, 1, "the batch's channel")
    }

    /// tar exits non-zero when a file it was asked for is gone: then nothing in the batch is trusted, and the
    /// server keeps being asked for batches (tar itself works).
    func testAVanishedFileMakesTheBatchFallBack() async throws {
        let server = try SSHServer()
        let served = TemporaryDirectory("tar-served")
        for name in ["a", "b", "c"] { FixtureTree.write(served.path, name, name) }
        let source = try source(server, served.path, method: .execOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        unlink(served.path("b"))
        let fetched = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(fetched, ["a": nil, "b": nil, "c": nil])
        XCTAssertTrue(source.tarBatchesAvailable)
    }

    /// A tar that wrote its whole archive but then died of a signal (here SIGKILL, as the OOM killer sends) has
    /// no exit status: libssh2 reports 0 for it, which is not taken as success, and nothing in the batch is
    /// trusted. tar itself works, so the server keeps being asked for batches.
    func testATarKilledBySignalIsNotTrusted() async throws {
        let (server, tools) = try server(running: "/usr/bin/tar \"$@\"\nkill -KILL $$\n", as: "tar")
        defer { withExtendedLifetime(tools) {} }
        let served = TemporaryDirectory("tar-served")
        for name in ["a", "b"] { FixtureTree.write(served.path, name, name) }
        let source = try source(server, served.path, method: .execOnly)
        let snapshot = try await source.snapshot(options: ListingOptions())
        let fetched = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(fetched, ["a": nil, "b": nil])
        XCTAssertTrue(source.tarBatchesAvailable)
    }

    /// An SFTP-only account (`ForceCommand internal-sftp`): the listing's exec gets OpenSSH's "This service allows
    /// sftp connections only", not a listing. The listing takes that for a server without tar, before any batch,
    /// so a batch comes over SFTP at once (`SFTPBatchFetch`), asking for no exec: the server logs the listing's
    /// exec and its pipe (which resolved the root and listed), which the batch then uses too.
    func testAnSFTPOnlyServerIsAskedOnceThenNever() async throws {
        let server = try SSHServer(forceInternalSFTP: true)
        let served = TemporaryDirectory("tar-served")
        for name in ["a", "b"] { FixtureTree.write(served.path, name, name) }
        let source = try source(server, served.path)
        let snapshot = try await source.snapshot(options: ListingOptions())
        XCTAssertFalse(source.tarBatchesAvailable)
        XCTAssertTrue(source.features.batchDownloads)
        func sessions() throws -> Int {
            try String(contentsOfFile: server.logPath, encoding: .utf8).components(separatedBy: "Starting session: forced-command").count - 1
        }
        XCTAssertEqual(try sessions(), 2, "the listing's exec, then its pipe")
        let fetched = try await fetchBatch(source, files(snapshot))
        XCTAssertEqual(fetched, ["a": Array("a".utf8), "b": Array("b".utf8)])
        XCTAssertEqual(try sessions(), 2, "the batch goes through the listing's pipe, and asks for no exec")
    }

    /// The reader takes a real GNU tar archive in chunks of any size, and refuses what is not tar.
    func testReaderParsesGNUTarInAnyChunkingAndRefusesOtherBytes() throws {
        let folder = TemporaryDirectory("tar-reader")
        var expected: [(name: String, content: [UInt8])] = []
        for (index, name) in Self.names.enumerated() {
            let content = name == "empty" ? [] : FixtureTree.bytes(count: 700 * index + 3, seed: UInt64(index))
            FixtureTree.write(folder.path, name, content, mtime: (1_600_000_000 + index, 0))
            expected.append((name, content))
        }
        let archive = folder.path("archive.tar")
        let list = Self.names.joined(separator: "\0") + "\0"
        try list.write(toFile: folder.path("list"), atomically: false, encoding: .utf8)
        let tar = Process()
        tar.executableURL = URL(fileURLWithPath: "/bin/tar")
        tar.currentDirectoryURL = URL(fileURLWithPath: folder.path)
        tar.arguments = ["--format=gnu", "--no-recursion", "--null", "--verbatim-files-from", "-cf", archive, "-T", "list"]
        try tar.run()
        tar.waitUntilExit()
        XCTAssertEqual(tar.terminationStatus, 0)
        let bytes = try XCTUnwrap(FixtureTree.read(archive))

        for chunkSize in [1, 7, 511, 512, 513, 65536] {
            var reader = TarReader()
            var members: [(name: String, size: Int64, mtime: Int64, content: [UInt8])] = []
            var ends = 0
            try bytes.withUnsafeBytes { all in
                var offset = 0
                while offset < all.count {
                    let chunk = UnsafeRawBufferPointer(rebasing: all[offset..<min(all.count, offset + chunkSize)])
                    try reader.feed(chunk) { event in
                        switch event {
                        case let .member(member): members.append((String(decoding: member.name, as: UTF8.self), member.size, member.mtime, []))
                        case let .data(data): members[members.count - 1].content += data
                        case .memberEnd: ends += 1
                        }
                    }
                    offset += chunkSize
                }
            }
            XCTAssertTrue(reader.isFinished, "chunks of \(chunkSize)")
            XCTAssertEqual(ends, expected.count)
            XCTAssertEqual(members.map(\.name), expected.map(\.name), "chunks of \(chunkSize)")
            XCTAssertEqual(members.map(\.content), expected.map(\.content), "chunks of \(chunkSize)")
            XCTAssertEqual(members.map(\.size), expected.map { Int64($0.content.count) })
            XCTAssertEqual(members.map(\.mtime), (0..<expected.count).map { 1_600_000_000 + Int64($0) })
        }

        var reader = TarReader()
        let text = Array(String(repeating: "This account can only be used for SFTP.\n", count: 20).utf8)
        XCTAssertThrowsError(try text.withUnsafeBytes { try reader.feed($0) { _ in } })
        XCTAssertFalse(reader.sawValidBlock)
        var cut = TarReader()
        try bytes.withUnsafeBytes { try cut.feed(UnsafeRawBufferPointer(rebasing: $0[0..<1500])) { _ in } }
        XCTAssertTrue(cut.sawValidBlock)
        XCTAssertFalse(cut.isFinished, "a cut stream is never taken as complete")
    }

    /// A header whose size no file has (a hostile server's tar) is malformed: its size and padding overflowed, and
    /// the run crashed.
    func testAHeaderOfAnImpossibleSizeIsRefused() {
        var header = [UInt8](repeating: 0, count: 512)
        header.replaceSubrange(0..<5, with: Array("x.txt".utf8))
        // GNU's base-256 form: the high bit of the first byte, then the value big-endian.
        header[124] = 0x80
        let size = UInt64(Int64.max - 10)
        for index in 0..<8 { header[135 - index] = UInt8(truncatingIfNeeded: size >> (8 * UInt64(index))) }
        header.replaceSubrange(136..<148, with: Array("00000000001\u{0}".utf8))
        header[156] = UInt8(ascii: "x")
        let sum = header.enumerated().reduce(0) { $0 + ((148..<156).contains($1.offset) ? 32 : Int($1.element)) }
        let digits = String(sum, radix: 8)
        header.replaceSubrange(148..<156, with: Array((String(repeating: "0", count: 6 - digits.count) + digits).utf8) + [0, 32])
        var reader = TarReader()
        XCTAssertThrowsError(try header.withUnsafeBytes { try reader.feed($0) { _ in } })
        XCTAssertTrue(reader.sawValidBlock, "the checksum held: it is the size that is refused")
    }
}
