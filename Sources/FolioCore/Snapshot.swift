import Dispatch

/// A listing of a source tree at one moment: entries sorted in `RelativePath` order, plus what could not be listed.
///
/// Memory grows with the number of entries only: one `Entry` per entry (40 bytes, plus its path: a heap object of
/// about 80 bytes for a 36-byte path, shared with the record and the destination listing).
public struct Snapshot: Sendable {
    /// Sorted by path, no duplicates.
    public let entries: [Entry]
    /// Folders that could not be read, names that were skipped, names that clash once normalised.
    public let issues: [ListingIssue]
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

    /// False when some part of the tree could not be listed; such a snapshot must never drive a removal.
    public var isComplete: Bool { !issues.contains { $0.blocksRemovals } }

    /// The entry at a path, by binary search.
    public func entry(at path: RelativePath) -> Entry? {
        path.withBytes { bytes in entries.index(ofPath: bytes) { $0.path } }.map { entries[$0] }
    }
}

/// Something a listing could not fully do.
public struct ListingIssue: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// A folder (or the entry itself) could not be read: nothing may be removed on its account.
        case unreadable(String)
        /// An entry deliberately left out (bad name, special file, symlink by policy, outside the root).
        case skipped(String)
        /// Two names in one folder differ only in Unicode normalisation; both are kept as distinct names.
        case normalizationClash(String)
        /// Something the operator should know about every run (e.g. `insecure-tls = true`); blocks nothing.
        case warning(String)
    }
    /// Where, as display text (the path may not be a valid `RelativePath`).
    public var path: String
    public var kind: Kind

    public init(path: String, kind: Kind) {
        self.path = path
        self.kind = kind
    }

    /// A followed symbolic link that leads outside the source root or to nothing (a missing target, a loop the
    /// server reports as missing): skipped, as a link the policy skips.
    public static func linkLeadsNowhere(_ path: RelativePath) -> ListingIssue {
        ListingIssue(path: path.description, kind: .skipped("symbolic link leads outside the source root or nowhere"))
    }

    /// A followed symbolic link that could not be resolved, for `reason` (permission denied on the way, a failing
    /// disk). Why unreadable, which blocks removals: what the link leads to is unknown, and taking it for gone
    /// would trash everything mirrored through it.
    public static func unresolvedLink(_ path: RelativePath, reason: String) -> ListingIssue {
        ListingIssue(path: path.description, kind: .unreadable("cannot resolve the symbolic link: \(reason)"))
    }

    public var blocksRemovals: Bool {
        if case .unreadable = kind { return true }
        return false
    }

    /// The most entries skipped for one reason that are each given their own notice line.
    static let skippedListedAlone = 3

    /// The lines to show for `issues`, in their order: one per issue, except that entries skipped for one reason
    /// (every symbolic link under `symlinks = "skip"`, say) share one line once there are more than
    /// `skippedListedAlone`, naming the first few. Why: the same skips recur every run, and a tree with hundreds of
    /// links would otherwise print hundreds of lines each time, to a terminal or the daemon's log.
    public static func notices(_ issues: [ListingIssue]) -> [String] {
        var skippedFor: [String: [String]] = [:]
        for issue in issues { if case .skipped(let why) = issue.kind { skippedFor[why, default: []].append(issue.path) } }
        var lines: [String] = []
        var folded: Set<String> = []
        for issue in issues {
            guard case .skipped(let why) = issue.kind, let paths = skippedFor[why], paths.count > skippedListedAlone else {
                lines.append(issue.description)
                continue
            }
            // The group's line goes where its first entry was; the others add nothing.
            guard folded.insert(why).inserted else { continue }
            let named = paths.prefix(skippedListedAlone).joined(separator: ", ")
            lines.append("skipped \(named) and \(paths.count - skippedListedAlone) more: \(why)")
        }
        return lines
    }

    public var description: String {
        switch kind {
        case .unreadable(let why): "cannot list \(path): \(why)"
        case .skipped(let why): "skipped \(path): \(why)"
        case .normalizationClash(let other): "\(path) and \(other) differ only in Unicode normalisation; both kept"
        case .warning(let text): "\(path): \(text)"
        }
    }
}

/// Collects entries in any order (from several listing threads, merged) and produces a sorted `Snapshot`.
public struct SnapshotBuilder: Sendable {
    private var entries: [Entry] = []
    private var issues: [ListingIssue] = []

    public init(reservingCapacity capacity: Int = 0) { entries.reserveCapacity(capacity) }

    public mutating func append(_ entry: Entry) { entries.append(entry) }
    public mutating func note(_ issue: ListingIssue) { issues.append(issue) }
    public mutating func note(contentsOf more: [ListingIssue]) { issues.append(contentsOf: more) }
    public mutating func merge(_ other: SnapshotBuilder) {
        entries.append(contentsOf: other.entries)
        issues.append(contentsOf: other.issues)
    }

    /// Sorts, drops exact duplicates (reporting them) and reports names that clash after normalisation.
    /// Works in place: the entries are never held twice.
    public mutating func finish() -> Snapshot {
        // Taken out of the builder, so this is the only reference and the sort below works in place instead of
        // copying every entry first (at 100,000 entries, 6 MB).
        var entries = self.entries
        var issues = self.issues
        self = SnapshotBuilder()
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
