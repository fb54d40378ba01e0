import FolioCore
@testable import FolioHTTP
import Foundation
import Synchronization
import XCTest

/// How many workers a listing walk runs: the near count until a request timed on the link shows it far, then as
/// many as the host takes. The link's turn is given, so what is tested is the rule, not this machine's speed
/// (a loaded machine can take more than the 5 ms that makes a link far to answer over loopback).
final class ListingWalkTests: XCTestCase {
    /// Walks a root holding 24 folders, each job taking 2 ms so that every worker running gets one, and returns
    /// how many workers (each its own handle) took jobs.
    private func workersUsed(roundTrip: Duration?) async throws -> Int {
        let handles = Mutex<Set<ObjectIdentifier>>([])
        let folders = try (0..<24).map { try RelativePath(validating: "folder \($0)") }
        let workers = ListingWalk.Workers(most: 16, near: 4, roundTrip: { roundTrip })
        _ = try await ListingWalk.run(workers: workers, root: .folder(.root)) { job, easy, walk in
            handles.withLock { _ = $0.insert(ObjectIdentifier(easy)) }
            if case .folder(let folder) = job, folder.isRoot { folders.forEach { walk.push(.folder($0)) } }
            Thread.sleep(forTimeInterval: 0.002)
        }
        return handles.withLock { $0.count }
    }

    func testANearLinkIsListedByTheNearCountOfWorkers() async throws {
        let used = try await workersUsed(roundTrip: .microseconds(300))
        XCTAssertLessThanOrEqual(used, 4)
        XCTAssertGreaterThan(used, 1, "the folders were listed one at a time")
    }

    func testALinkNotTimedKeepsTheNearCount() async throws {
        let used = try await workersUsed(roundTrip: nil)
        XCTAssertLessThanOrEqual(used, 4)
    }

    func testAFarLinkGetsAsManyWorkersAsTheHostTakes() async throws {
        let used = try await workersUsed(roundTrip: .milliseconds(20))
        XCTAssertGreaterThan(used, 4)
    }
}
