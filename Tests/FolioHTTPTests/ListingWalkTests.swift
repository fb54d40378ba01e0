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
        _ = try await ListingWalk.run(workers: workers, root: .folder(.root), handles: IdleHandles()) { job, easy, walk, _ in
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

    /// Workers take their handles from the pool they are given before making new ones; at the end, a handle goes
    /// back there only with a connection for the downloads, and these, which sent no request, have none.
    func testWorkersTakeHandlesFromThePoolAndLeaveThemThere() async throws {
        let pool = IdleHandles()
        let given = Set(try (0..<2).map { _ in
            let handle = try CurlEasy()
            pool.put(handle)
            return ObjectIdentifier(handle)
        })
        let used = Mutex<Set<ObjectIdentifier>>([])
        let folders = try (0..<24).map { try RelativePath(validating: "folder \($0)") }
        _ = try await ListingWalk.run(workers: ListingWalk.Workers(most: 4, near: 4, roundTrip: { nil }), root: .folder(.root),
                                      handles: pool) { job, easy, walk, _ in
            used.withLock { _ = $0.insert(ObjectIdentifier(easy)) }
            if case .folder(let folder) = job, folder.isRoot { folders.forEach { walk.push(.folder($0)) } }
            Thread.sleep(forTimeInterval: 0.002)
        }
        let usedHandles = used.withLock { $0 }
        XCTAssertTrue(given.isSubset(of: usedHandles), "a worker made a handle while the pool had one")
        XCTAssertNil(pool.take(), "a handle without a connection was kept for the downloads")
    }

    // MARK: Folders listed ahead

    /// A tree for the walk: each folder's children, a trailing "/" marking a subfolder.
    private typealias Tree = [String: [String]]

    /// Walks `tree` with `known` folders listed ahead; returns the snapshot's paths (folders with a "/") and how
    /// many times each folder was listed. `before` runs at the start of each folder's job, `after` at the end of
    /// each that succeeded; a folder missing from
    /// `tree`, or in `failOnce` on its first listing, throws as a vanished folder does.
    private func walk(_ tree: Tree, known: [String], workers: Int = 4, failOnce: Set<String> = [],
                      before: @escaping @Sendable (String) -> Void = { _ in },
                      after: @escaping @Sendable (String) -> Void = { _ in }) async throws -> (paths: [String], listed: [String: Int]) {
        let listed = Mutex<[String: Int]>([:])
        let knownPaths = try known.map { try RelativePath(validating: $0) }
        let builder = try await ListingWalk.run(workers: ListingWalk.Workers(most: workers, near: workers, roundTrip: { nil }),
                                                root: .folder(.root), known: knownPaths,
                                                handles: IdleHandles()) { job, _, walk, _ in
            guard case .folder(let folder) = job else { return }
            let name = folder.description
            before(name)
            let count = listed.withLock { $0[name, default: 0] += 1; return $0[name]! }
            guard let children = tree[name], !(failOnce.contains(name) && count == 1) else {
                throw SourceError(.notFound, "\(name) is gone", path: folder)
            }
            var entries: [Entry] = []
            for child in children {
                let isFolder = child.hasSuffix("/")
                let path = try folder.appending(name: Array(child.utf8.filter { $0 != UInt8(ascii: "/") }))
                entries.append(Entry(path: path, kind: isFolder ? .folder : .file, size: 1, mtime: .unknown, precision: .second))
                if isFolder { walk.push(.folder(path)) }
            }
            walk.add(entries)
            after(name)
        }
        var snapshot = builder
        let paths = snapshot.finish().entries.map { "\($0.path)\($0.kind == .folder ? "/" : "")" }
        return (paths, listed.withLock { $0 })
    }

    private let tree: Tree = ["": ["a/", "b/", "top.txt"], "a": ["a1.txt", "deep/"], "a/deep": ["d.txt"], "b": ["b1.txt"]]
    private let treeListing = ["a/", "a/a1.txt", "a/deep/", "a/deep/d.txt", "b/", "b/b1.txt", "top.txt"]

    /// A `before` hook that holds the root's job until `count` other folders' jobs have started, which a walk one
    /// level at a time never does (the wait then gives up after 10 s and fails the test).
    private func rootWaits(forJobs count: Int) -> @Sendable (String) -> Void {
        let started = Mutex<Set<String>>([])
        let allStarted = DispatchSemaphore(value: 0)
        return { name in
            if name.isEmpty {
                XCTAssertEqual(allStarted.wait(timeout: .now() + 10), .success, "known folders waited for the root")
            } else if started.withLock({ $0.insert(name).inserted && $0.count == count }) {
                allStarted.signal()
            }
        }
    }

    /// The known folders are asked while the root's listing is still out.
    func testKnownFoldersAreListedWhileTheRootIsOut() async throws {
        let result = try await walk(tree, known: ["a", "a/deep", "b"], before: rootWaits(forJobs: 3))
        XCTAssertEqual(result.paths, treeListing)
        XCTAssertEqual(result.listed, ["": 1, "a": 1, "a/deep": 1, "b": 1], "each folder listed once")
    }

    /// With one worker the root goes first and confirms the known folders before any has started: each is then
    /// listed once, as a plain job, and its place among the known folders is passed over.
    func testKnownFoldersConfirmedBeforeTheyStartAreListedOnce() async throws {
        let result = try await walk(tree, known: ["a", "a/deep", "b", "a"], workers: 1)
        XCTAssertEqual(result.paths, treeListing)
        XCTAssertEqual(result.listed, ["": 1, "a": 1, "a/deep": 1, "b": 1])
    }

    /// A known folder whose listing ahead fails after its parent named it is asked again: a's listing (which
    /// names a/deep) waits until a/deep's first listing has started, and that listing waits until a's is done,
    /// then fails.
    func testAListingAheadThatFailsAfterItsParentNamedItIsAskedAgain() async throws {
        let deepStarted = DispatchSemaphore(value: 0)
        let parentDone = DispatchSemaphore(value: 0)
        let firstDeep = Mutex(true)
        let result = try await walk(tree, known: ["a/deep"], failOnce: ["a/deep"], before: { name in
            if name == "a" { XCTAssertEqual(deepStarted.wait(timeout: .now() + 10), .success) }
            if name == "a/deep", firstDeep.withLock({ first in defer { first = false }; return first }) {
                deepStarted.signal()
                XCTAssertEqual(parentDone.wait(timeout: .now() + 10), .success)
            }
        }, after: { name in
            if name == "a" { parentDone.signal() }
        })
        XCTAssertEqual(result.paths, treeListing)
        XCTAssertEqual(result.listed["a/deep"], 2)
    }

    /// Known folders that are gone, or were never folders of the tree, leave nothing in the snapshot; a folder
    /// not known is listed as its parent names it.
    func testOnlyFoldersTheirParentsNameAreKept() async throws {
        var changed = tree
        changed["a"] = ["a1.txt"]                 // a/deep removed (its listing still answers, from a stale server)
        changed[""] = ["a/", "b", "c/", "top.txt"] // b is now a file, c is new
        changed["c"] = ["c1.txt"]
        let result = try await walk(changed, known: ["a", "a/deep", "b", "gone"])
        XCTAssertEqual(result.paths, ["a/", "a/a1.txt", "b", "c/", "c/c1.txt", "top.txt"])
    }

    /// A known folder whose listing ahead failed is asked again once its parent names it, and its entries count.
    func testAFailedListingAheadIsAskedAgainWhenItsParentNamesIt() async throws {
        let result = try await walk(tree, known: ["a", "a/deep", "b"], failOnce: ["a/deep"], before: rootWaits(forJobs: 3))
        XCTAssertEqual(result.paths, treeListing)
        XCTAssertEqual(result.listed["a/deep"], 2)
    }

    /// A source reorganised since the last run: once most listings ahead fail, the rest are not asked.
    func testListingAheadStopsWhenMostKnownFoldersAreGone() async throws {
        let stale = (0..<100).map { "old \($0)" }
        let result = try await walk(tree, known: stale, workers: 1)
        XCTAssertEqual(result.paths, treeListing)
        let asked = stale.filter { result.listed[$0] != nil }.count
        XCTAssertGreaterThanOrEqual(asked, 8)
        XCTAssertLessThan(asked, 20, "every stale folder was asked")
    }
}

