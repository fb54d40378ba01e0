import Dispatch

/// Collects entries in any order (from several listing threads, merged) and produces a sorted `Snapshot`.
public struct SnapshotBuilder: Sendable {
    /// The entries, in chunks that never grow past the room they were made with. Why chunks, not one array: an
    /// array grown by doubling holds its old and new storage at once while it copies, and at 100,000 entries a
    /// WebDAV listing's peak held 9.6 MB for 5.6 MB of entries. `finish` moves them into one array of the exact
    /// size, freeing each chunk as it goes.
    private var chunks: [[Entry]] = []
    private var issues: [ListingIssue] = []

    /// The most entries a chunk has room for: 4,096 take over 128 KiB, so such a chunk comes from mmap and goes
    /// back to the system once `finish` has moved it (see `folio_return_large_blocks_to_system`). Chunks start at
    /// 16 and double up to it, so a builder for one folder's few entries stays small.
    static let chunkSize = 4_096

    /// An empty builder with room for `capacity` entries (more go into further chunks).
    public init(reservingCapacity capacity: Int = 0) {
        if capacity > 0 { chunks = [Self.chunk(capacity)] }
    }

    /// Adds one listed entry, in any order. A file whose size is negative or past `Entry.maximumFileSize` is an
    /// unreadable file instead: what it holds is not known, so nothing may be removed on its account either.
    public mutating func append(_ entry: Entry) {
        if entry.kind == .file, !(0...Entry.maximumFileSize).contains(entry.size) {
            issues.append(ListingIssue(path: entry.path.description, kind: .unreadableFile("the source gave it an impossible size (\(entry.size) bytes)")))
            return
        }
        if chunks.isEmpty || chunks[chunks.count - 1].count == chunks[chunks.count - 1].capacity {
            chunks.append(Self.chunk(min(Self.chunkSize, max(16, 2 * (chunks.last?.capacity ?? 0)))))
        }
        chunks[chunks.count - 1].append(entry)
    }
    /// Adds one listing issue.
    public mutating func note(_ issue: ListingIssue) { issues.append(issue) }
    /// Adds several listing issues.
    public mutating func note(contentsOf more: [ListingIssue]) { issues.append(contentsOf: more) }
    /// Takes in another builder's entries and issues (one listing thread's share, one folder's).
    public mutating func merge(_ other: SnapshotBuilder) {
        for chunk in other.chunks {
            // A large chunk joins as it is, shared, not copied: an SFTP listing's whole tree is merged into an
            // empty builder at once, and copying entry by entry held it twice (5 MB more at 100,000 entries). A
            // small one (one folder's) is copied, so its spare room does not stay in the snapshot's chunks.
            if chunk.count >= Self.chunkSize / 4 {
                chunks.append(chunk)
            } else {
                for entry in chunk { append(entry) }
            }
        }
        issues.append(contentsOf: other.issues)
    }

    private static func chunk(_ capacity: Int) -> [Entry] {
        var chunk: [Entry] = []
        chunk.reserveCapacity(capacity)
        return chunk
    }

    /// Sorts, keeps the first of entries listed twice at one path (reporting the others), reports names that
    /// clash after normalisation, and puts the issues in path order.
    /// Works in place: the entries are never held twice.
    public mutating func finish() -> Snapshot {
        // Taken out of the builder, so this is the only reference and the sort below works in place instead of
        // copying every entry first (at 100,000 entries, 6 MB).
        var chunks = self.chunks
        var issues = self.issues
        self = SnapshotBuilder()
        var entries: [Entry]
        if chunks.count == 1 {
            entries = chunks.removeLast()
        } else {
            // The pages of room not yet written are not resident: the tree is held twice over for one chunk.
            entries = []
            entries.reserveCapacity(chunks.reduce(0) { $0 + $1.count })
            for index in chunks.indices {
                entries.append(contentsOf: chunks[index])
                chunks[index] = []
            }
        }
        // The normalisation check runs while the entries are sorted: on two cores a large listing pays for the
        // longer of the two, not both. It reads its own list of the (few) non-ASCII paths, not the entries.
        let nonASCII = entries.compactMap { entry in entry.path.withBytes { $0.contains { $0 >= 0x80 } } ? entry.path : nil }
        nonisolated(unsafe) var clashes: [ListingIssue] = []
        // A local walk hands its entries over already in order: one pass over neighbours sees that (and that no
        // path is listed twice), where a sort would chase every path again.
        let sorted = zip(entries, entries.dropFirst()).allSatisfy { $0.path < $1.path }
        if sorted {
            clashes = Self.normalizationClashes(among: nonASCII)
        } else {
            entries.withUnsafeMutableBufferPointer { buffer in
                // Why nonisolated(unsafe) is sound, here and for `clashes`: of the two iterations, only the first
                // touches the entries and only the second writes `clashes`, which is read once both have returned.
                nonisolated(unsafe) let sortable = buffer
                DispatchQueue.concurrentPerform(iterations: 2) { part in
                    if part == 0 {
                        sortable.sortByPath(\.path)
                    } else {
                        clashes = Self.normalizationClashes(among: nonASCII)
                    }
                }
            }
        }
        if !sorted, entries.count > 1, zip(entries, entries.dropFirst()).contains(where: { $0.path == $1.path }) {
            var unique: [Entry] = []
            unique.reserveCapacity(entries.count)
            for entry in entries {
                if let last = unique.last, last.path == entry.path {
                    issues.append(ListingIssue(path: entry.path.description, kind: .skipped("listed twice by the source; kept the first")))
                    continue
                }
                unique.append(entry)
            }
            entries = unique
        }
        issues.append(contentsOf: clashes)
        // In path order, as the entries: listing threads note issues in whatever order they finish, and the same
        // tree should print the same lines, in the same order, every run.
        issues.sort { a, b in
            a.path != b.path ? a.path.utf8.lexicographicallyPrecedes(b.path.utf8) : a.description.utf8.lexicographicallyPrecedes(b.description.utf8)
        }
        return Snapshot(sortedEntries: entries, issues: issues)
    }

    /// Takes the paths with non-ASCII bytes (only those can clash), in any order. Swift's `String` compares and
    /// hashes by canonical equivalence, so it finds NFC/NFD twins without a normalisation pass. Reports each
    /// later twin against the first one listed, the smaller path first, in path order.
    static func normalizationClashes(among paths: [RelativePath]) -> [ListingIssue] {
        // Hashes and indexes, not a [String: RelativePath]: this runs at the listing's memory peak, where a
        // dictionary of 100,000 names held 4.7 MB of strings. One UInt64 a name here (the high half of its
        // Unicode-aware hash, then its index), so a plain sort groups equal hashes; a name's text is rebuilt only
        // when its hash is shared.
        var keys: [UInt64] = []
        keys.reserveCapacity(paths.count)
        for (index, path) in paths.enumerated() {
            guard let text = String(validating: path.bytes, as: UTF8.self) else { continue }
            keys.append((UInt64(truncatingIfNeeded: UInt(bitPattern: text.hashValue)) & 0xFFFF_FFFF_0000_0000) | UInt64(index))
        }
        keys.sort()
        var pairs: [(RelativePath, RelativePath)] = []
        var start = 0
        while start < keys.count {
            var end = start + 1
            while end < keys.count, keys[end] >> 32 == keys[start] >> 32 { end += 1 }
            if end - start > 1 {
                let group = keys[start..<end].map { paths[Int($0 & 0xFFFF_FFFF)] }
                let texts = group.map { String(decoding: $0.bytes, as: UTF8.self) }
                for later in 1..<group.count {
                    guard let first = texts[..<later].firstIndex(of: texts[later]) else { continue }
                    let (a, b) = (group[first], group[later])
                    if a != b { pairs.append(a < b ? (a, b) : (b, a)) }
                }
            }
            start = end
        }
        // A path the source listed twice would pair with its twin twice; one report each.
        pairs.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
        return pairs.indices.filter { $0 == 0 || pairs[$0 - 1] != pairs[$0] }
            .map { ListingIssue(path: pairs[$0].0.description, kind: .normalizationClash(pairs[$0].1.description)) }
    }
}
