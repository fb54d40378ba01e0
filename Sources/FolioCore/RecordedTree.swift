/// What Folio wrote at a target's destination, as the state database holds it: one `RecordedEntry` per path,
/// kept sorted in path order.
///
/// Why a sorted array and not a dictionary: at 100,000 entries a dictionary's buckets (kept under three-quarters
/// full, doubled as it grows) cost more than twice the entries themselves, and the planner reads the record
/// only by path lookups, which a binary search answers in 17 steps.
public struct RecordedTree: Sendable, Sequence {
    private let entries: [RecordedEntry]

    /// Sorts `entries` by path, in place. Paths are unique in the state database (its key); were one listed
    /// twice, one of the two would be kept.
    public init(_ entries: consuming [RecordedEntry]) {
        // Consumed, so the caller's array is sorted where it lies instead of copied first.
        var sorted = consume entries
        sorted.withUnsafeMutableBufferPointer { $0.sortByPath(\.path) }
        if zip(sorted, sorted.dropFirst()).contains(where: { $0.path == $1.path }) {
            var unique: [RecordedEntry] = []
            for entry in sorted where unique.last?.path != entry.path { unique.append(entry) }
            sorted = unique
        }
        self.entries = sorted
    }

    /// The number of recorded entries.
    public var count: Int { entries.count }
    /// Whether nothing is recorded (a first run, or a target that starts over).
    public var isEmpty: Bool { entries.isEmpty }

    /// The recorded entry at `path`, if any.
    public subscript(path: RelativePath) -> RecordedEntry? {
        path.withBytes { bytes in entries.index(ofPath: bytes) { $0.path } }.map { entries[$0] }
    }

    /// The records in path order.
    public func makeIterator() -> IndexingIterator<[RecordedEntry]> { entries.makeIterator() }
}
