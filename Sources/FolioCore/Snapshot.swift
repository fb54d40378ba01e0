/// A listing of a source tree at one moment: entries sorted in `RelativePath` order, plus what could not be listed.
///
/// Memory grows with the number of entries only: one `Entry` per entry (48 bytes in the array, plus its path's
/// bytes, packed with other paths in a `PathArena` block and shared with the record and the destination listing).
public struct Snapshot: Sendable {
    /// Sorted by path, no duplicates.
    public let entries: [Entry]
    /// Folders that could not be read, names that were skipped, names that clash once normalised, and warnings
    /// about the source as a whole (added with `warn`).
    public private(set) var issues: [ListingIssue]
    /// What the source learned about its server that the next listing can use (`ListingHints.memo`); kept in
    /// the state database at the end of every run whose listing finished.
    public var memo: String?

    init(sortedEntries: [Entry], issues: [ListingIssue]) {
        self.entries = sortedEntries
        self.issues = issues
    }

    /// An empty, complete snapshot.
    public static let empty = Snapshot(sortedEntries: [], issues: [])

    /// The path of this snapshot's entry whose bytes are `bytes`, if there is one.
    ///
    /// Why: the record and the destination's listing name mostly the same paths as the snapshot; taking the
    /// snapshot's path instead of building an equal one keeps one copy of each name in memory, not three.
    public func path(matching bytes: UnsafeBufferPointer<UInt8>) -> RelativePath? {
        entries.index(ofPath: bytes) { $0.path }.map { entries[$0].path }
    }

    /// Adds a warning about the source as a whole: said every run, it holds nothing back.
    public mutating func warn(_ text: String, about source: String) {
        issues.append(ListingIssue(path: source, kind: .warning(text)))
    }

    /// False when some part of the tree could not be listed; such a snapshot must never drive a removal.
    public var isComplete: Bool { !issues.contains { $0.blocksRemovals } }

    /// The entry at a path, by binary search.
    public func entry(at path: RelativePath) -> Entry? {
        path.withBytes { bytes in entries.index(ofPath: bytes) { $0.path } }.map { entries[$0] }
    }
}
