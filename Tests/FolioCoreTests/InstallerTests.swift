import FolioCore
import FolioTestSupport
import Foundation
import Synchronization
import XCTest

/// When downloaded files are put in place: as they finish, not when the run ends.
final class InstallerTests: XCTestCase {
    func testFilesFinishedBesideALongDownloadAreInPlaceBeforeItEnds() async throws {
        // 100 files: more than the first batch (64), so at least one install starts because enough files wait.
        try await checkInPlaceBeforeTheLongDownloadEnds(smallFiles: 100)
    }

    func testAFewFilesAreInstalledAfterAQuarterSecondWithoutMoreComing() async throws {
        // 5 files: too few to start an install; only the quarter-second timer puts them in place.
        try await checkInPlaceBeforeTheLongDownloadEnds(smallFiles: 5)
    }

    private func checkInPlaceBeforeTheLongDownloadEnds(smallFiles count: Int) async throws {
        let destination = TemporaryDirectory("installer-dest")
        let memory = MemorySource()
        let small = (0..<count).map { String(format: "small/%03d.txt", $0) }
        for path in small { memory.setFile(path, "content of \(path)") }
        memory.setFile("long.bin", "the long download")
        // long.bin waits (up to 60 s: a pass needs only a few flushes, which a busy shared disk can make slow)
        // until every small file is in place, and records whether they were.
        let sawOthersInPlace = Mutex<Bool?>(nil)
        let source = HookedSource(memory: memory, before: "long.bin") {
            let inPlace = { small.allSatisfy { FileManager.default.fileExists(atPath: destination.path($0)) } }
            let deadline = Date() + 60
            var met = inPlace()
            while !met && Date() < deadline {
                usleep(10_000)
                met = inPlace()
            }
            sawOthersInPlace.withLock { $0 = met }
        }
        var target = TargetConfig(name: "t", source: "memory://", destination: destination.path)
        target.transfers = 3

        let report = await SyncEngine(state: MemoryStateStore(), events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual))

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.downloaded, count + 1)
        XCTAssertEqual(sawOthersInPlace.withLock { $0 }, true, "the \(count) small files were in place while long.bin was still downloading")
        XCTAssertEqual(FixtureTree.read(destination.path("long.bin")).map { String(decoding: $0, as: UTF8.self) }, "the long download")
        let last = small[count - 1]
        XCTAssertEqual(FixtureTree.read(destination.path(last)).map { String(decoding: $0, as: UTF8.self) }, "content of \(last)")
    }
}
