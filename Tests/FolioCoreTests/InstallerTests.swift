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
        let source = HeldSource(memory: memory, held: "long.bin") {
            small.allSatisfy { FileManager.default.fileExists(atPath: destination.path($0)) }
        }
        var target = TargetConfig(name: "t", source: "memory://", destination: destination.path)
        target.transfers = 3

        let report = await SyncEngine(state: MemoryStateStore(), events: EventRecorder()).run(target, source: source, options: .init(trigger: .manual))

        XCTAssertEqual(report.result, .synced)
        XCTAssertEqual(report.downloaded, count + 1)
        XCTAssertEqual(source.sawOthersInPlace, true, "the \(count) small files were in place while long.bin was still downloading")
        XCTAssertEqual(FixtureTree.read(destination.path("long.bin")).map { String(decoding: $0, as: UTF8.self) }, "the long download")
        let last = small[count - 1]
        XCTAssertEqual(FixtureTree.read(destination.path(last)).map { String(decoding: $0, as: UTF8.self) }, "content of \(last)")
    }
}

/// A `MemorySource` whose download of one file waits (up to 60 s: a pass needs only a few flushes, which a busy
/// shared disk can make slow) until a condition holds, and records whether it did.
private final class HeldSource: Source {
    let memory: MemorySource
    let held: String
    let condition: @Sendable () -> Bool
    private let outcome = Mutex<Bool?>(nil)

    init(memory: MemorySource, held: String, until condition: @escaping @Sendable () -> Bool) {
        self.memory = memory
        self.held = held
        self.condition = condition
    }

    var displayName: String { memory.displayName }
    var features: SourceFeatures { memory.features }
    /// Whether the condition held before the held download went on (nil: it never started).
    var sawOthersInPlace: Bool? { outcome.withLock { $0 } }

    func snapshot(options: ListingOptions) async throws -> Snapshot { try await memory.snapshot(options: options) }

    func makeConnection() throws -> any SourceConnection {
        HeldConnection(inner: try memory.makeConnection(), source: self)
    }

    fileprivate func waitIfHeld(_ entry: Entry) {
        guard entry.path.description == held else { return }
        let deadline = Date() + 60
        var met = condition()
        while !met && Date() < deadline {
            usleep(10_000)
            met = condition()
        }
        outcome.withLock { $0 = met }
    }
}

private final class HeldConnection: SourceConnection {
    let inner: any SourceConnection
    let source: HeldSource

    init(inner: any SourceConnection, source: HeldSource) {
        self.inner = inner
        self.source = source
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        source.waitIfHeld(entry)
        try inner.download(entry, into: sink, from: offset)
    }

    func close() { inner.close() }
}
