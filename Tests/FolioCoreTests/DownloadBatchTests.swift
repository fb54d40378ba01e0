@testable import FolioCore
import FolioTestSupport
import Foundation
import Glibc
import XCTest

/// The bookkeeping a source leans on when it fetches a batch.
final class DownloadBatchTests: XCTestCase {
    /// A batch has started once any file's partial exists, and stays started: a source that gave up on one way of
    /// fetching it (tar missing) must not then write the same files another way on top of what arrived.
    func testABatchHasStartedOnceAnyFileBeganToArrive() throws {
        let folder = TemporaryDirectory("batch")
        let entries = try ["a", "b"].map { Entry(path: try RelativePath(validating: $0), kind: .file, size: 1, mtime: FileTime(seconds: 1)) }
        let batch = DownloadBatch(
            entries: entries, progress: TransferProgress(),
            openPartial: { index in open(folder.path("\(index)"), O_RDWR | O_CREAT | O_TRUNC, 0o644) },
            seal: { _, sink in
                close(sink.fileDescriptor)
                return .failure(SourceError(.localIO, "not installed in this test"))
            },
            discard: { index in unlink(folder.path("\(index)")) })
        XCTAssertFalse(batch.hasStarted)
        let sink = try batch.sink(for: 1)
        try [UInt8(ascii: "b")].withUnsafeBytes { try sink.write($0) }
        XCTAssertTrue(batch.hasStarted)
        batch.fileEnded(1)
        XCTAssertTrue(batch.hasStarted, "a file ended is still a file that arrived")
        batch.discardRest()
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder.path("1")))
    }
}
