@testable import FolioCore
import XCTest

/// The record and the destination's listing take the snapshot's paths, so a large tree holds each name once;
/// and the record, a sorted array, answers lookups like the dictionary it replaced.
final class PathSharingTests: XCTestCase {
    func testTheRecordSortsAndFindsEveryPath() throws {
        let names = ["b", "a/x", "a", "a b", "a/x/y", "café"]
        let tree = RecordedTree(try names.map { try recorded($0) })
        XCTAssertEqual(tree.count, names.count)
        XCTAssertEqual(tree.map(\.path.description), ["a", "a/x", "a/x/y", "a b", "b", "café"], "component order: a folder's children follow it")
        for name in names {
            XCTAssertEqual(tree[try RelativePath(validating: name)]?.path.description, name)
        }
        XCTAssertNil(tree[try RelativePath(validating: "a/y")])
        XCTAssertTrue(RecordedTree([]).isEmpty)
    }

    func testARecordListingAPathTwiceKeepsOne() throws {
        let tree = RecordedTree([try recorded("a"), try recorded("b"), try recorded("a")])
        XCTAssertEqual(tree.map(\.path.description), ["a", "b"])
    }

    func testTheSnapshotLendsItsPathByBytes() throws {
        let snapshot = try snapshotOf(["a", "a/b", "c"])
        let bytes = Array("a/b".utf8)
        let found = bytes.withUnsafeBufferPointer { snapshot.path(matching: $0) }
        XCTAssertEqual(found?.description, "a/b")
        XCTAssertTrue(sameStorage(try XCTUnwrap(found), snapshot.entries[1].path), "the snapshot's own bytes, not a copy")
        XCTAssertNil(Array("a/c".utf8).withUnsafeBufferPointer { snapshot.path(matching: $0) })
        XCTAssertNil(Array("a/b".utf8).withUnsafeBufferPointer { Snapshot.empty.path(matching: $0) })
    }

    func testLocalItemsTakeTheSnapshotsPaths() throws {
        let snapshot = try snapshotOf(["a", "a/b", "c", "e"])
        // Packed as the destination walk packs them.
        var arena = PathArena()
        var items: [LocalItem] = []
        for name in ["a", "a/b", "d", "e", "f"] {
            var path = RelativePath.root
            for component in name.split(separator: "/") { path = try path.appending(name: Array(component.utf8), in: &arena) }
            items.append(LocalItem(path: path, kind: .file, size: 0, mtime: FileTime(nanoseconds: 0), inode: 1))
        }
        let packed = items.map { $0.path.withBytes { $0.baseAddress! } }
        SyncEngine.sharePaths(of: &items, with: snapshot)
        XCTAssertEqual(items.map(\.path.description), ["a", "a/b", "d", "e", "f"], "names and order unchanged")
        XCTAssertTrue(sameStorage(items[0].path, snapshot.entries[0].path))
        XCTAssertTrue(sameStorage(items[1].path, snapshot.entries[1].path))
        XCTAssertTrue(sameStorage(items[3].path, snapshot.entries[3].path))
        XCTAssertFalse(sameStorage(items[2].path, snapshot.entries[2].path), "d is not in the snapshot")
        for (item, address) in zip(items, packed) {
            XCTAssertNotEqual(item.path.withBytes { $0.baseAddress! }, address, "\(item.path) left the walk's block, which can be freed")
        }
    }

    func testAWalkPacksItsPathsAndTheyCompareByBytes() throws {
        var arena = PathArena()
        let folder = try RelativePath.root.appending(name: Array("d".utf8), in: &arena)
        let first = try folder.appending(name: Array("é x".utf8), in: &arena)
        let second = try folder.appending(name: Array("f".utf8), in: &arena)
        XCTAssertEqual(first.description, "d/é x")
        XCTAssertEqual(second.description, "d/f")
        XCTAssertEqual(first.parent, folder)
        XCTAssertEqual(first, try RelativePath(validating: "d/é x"), "equal bytes are equal paths, wherever they live")
        XCTAssertEqual(Set([first, second, try RelativePath(validating: "d/f")]).count, 2)
        XCTAssertTrue(first.isWithin(folder) && !folder.isWithin(first))
        XCTAssertTrue(first.parent == second.parent && first.parent != folder.parent)
        XCTAssertEqual(first.withBytes { $0.baseAddress! } + first.byteCount, second.withBytes { $0.baseAddress! }, "packed back to back")
        XCTAssertThrowsError(try folder.appending(name: Array("..".utf8), in: &arena))
        XCTAssertEqual(try folder.appending(name: Array("xab".utf8)[1...], in: &arena).description, "d/ab", "a share of an array, not from its start")
        XCTAssertThrowsError(try folder.appending(name: Array("x..".utf8)[1...], in: &arena))
        let long = String(repeating: "n", count: 255)
        let deep = try (0..<14).reduce(RelativePath.root) { path, _ in try path.appending(name: Array(long.utf8), in: &arena) }
        XCTAssertEqual(deep.byteCount, 14 * 256 - 1, "a path of more than 1 KiB gets a block of its own")
        XCTAssertEqual(deep.parent?.byteCount, 13 * 256 - 1)
    }

    private func recorded(_ name: String) throws -> RecordedEntry {
        RecordedEntry(path: try RelativePath(validating: name), kind: .file, size: 1, mtime: FileTime(nanoseconds: 1),
                      validator: nil, checksum: nil, localInode: 1, localMtime: FileTime(nanoseconds: 1))
    }

    private func snapshotOf(_ names: [String]) throws -> Snapshot {
        var builder = SnapshotBuilder()
        for name in names { builder.append(Entry(path: try RelativePath(validating: name), kind: .file, mtime: FileTime(nanoseconds: 1))) }
        return builder.finish()
    }

    /// Whether two paths hold the very same bytes in memory (not merely equal ones).
    private func sameStorage(_ a: RelativePath, _ b: RelativePath) -> Bool {
        a.withBytes { left in b.withBytes { right in left.baseAddress == right.baseAddress } }
    }
}
