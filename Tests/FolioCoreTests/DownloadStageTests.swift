@testable import FolioCore
import XCTest

/// How the download stage sizes its workers and jobs.
final class DownloadStageTests: XCTestCase {
    private func downloads(_ sizes: [Int64]) -> [SyncPlan.Download] {
        sizes.enumerated().map { index, size in
            SyncPlan.Download(entry: Entry(path: try! RelativePath(validating: "f\(index)"), kind: .file, size: size, mtime: FileTime(nanoseconds: 0)),
                              replacing: nil, hasLocalChanges: false)
        }
    }

    func testCostlyConnectionsOpenOnePerLargeFileOrFullBatch() {
        let costly = SourceFeatures(mtimePrecision: .second, batchDownloads: true, costlyConnections: true)
        // 1,000 small files, 4.6 MB in all: one worker (the listing's session), not eight logins.
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(Array(repeating: 4_600, count: 1_000)), workers: 8, features: costly, nearLink: true), 1)
        // Three large files and small ones filling just over one batch: five.
        let mixed = Array(repeating: DownloadBatch.maxFileSize + 1, count: 3) + Array(repeating: 200_000, count: 90)
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(mixed), workers: 8, features: costly, nearLink: true), 5)
        // Never more than asked for.
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(Array(repeating: 8 << 20, count: 30)), workers: 4, features: costly, nearLink: true), 4)
        XCTAssertEqual(DownloadStage.workerCount(for: [], workers: 4, features: costly, nearLink: true), 1)
    }

    func testCheapConnectionsUseEveryWorkerTheFilesAllow() {
        let cheap = SourceFeatures(mtimePrecision: .second, batchDownloads: true)
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(Array(repeating: 4_600, count: 1_000)), workers: 8, features: cheap, nearLink: true), 8)
        XCTAssertEqual(DownloadStage.workerCount(for: downloads([1, 2, 3]), workers: 8, features: cheap, nearLink: true), 3)
    }

    func testParallelBatchesOverAFarLinkTakeOneWorkerPerLargeFileOrFullBatch() {
        let http = SourceFeatures(mtimePrecision: .second, batchDownloads: true, parallelBatches: true)
        // 1,000 small files: one batch, which by itself keeps as many GETs in flight as the server takes.
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(Array(repeating: 4_600, count: 1_000)), workers: 8, features: http, nearLink: false), 1)
        XCTAssertEqual(DownloadStage.jobs(for: downloads(Array(repeating: 4_600, count: 1_000)), workers: 1, batching: true), [0..<1_000])
        // Large files still get a worker each.
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(Array(repeating: 8 << 20, count: 30)), workers: 4, features: http, nearLink: false), 4)
    }

    func testParallelBatchesOverANearLinkUseEveryWorker() {
        let http = SourceFeatures(mtimePrecision: .second, batchDownloads: true, parallelBatches: true)
        // The same 1,000 small files: two batches a worker, so the files' own work runs on every core.
        XCTAssertEqual(DownloadStage.workerCount(for: downloads(Array(repeating: 4_600, count: 1_000)), workers: 4, features: http, nearLink: true), 4)
        XCTAssertEqual(DownloadStage.jobs(for: downloads(Array(repeating: 4_600, count: 1_000)), workers: 4, batching: true).count, 8)
        XCTAssertEqual(DownloadStage.workerCount(for: downloads([1, 2]), workers: 4, features: http, nearLink: true), 2)
    }
}
