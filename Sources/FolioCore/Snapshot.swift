/// A listing of a source tree at one moment: entries sorted in `RelativePath` order, plus what could not be listed.
///
/// Memory grows with the number of entries only: one `Entry` (about 90 bytes with its path) per entry.
public struct Snapshot: Sendable {
    /// Sorted by path, no duplicates.
    public let entries: [Entry]
    /// Folders that could not be read, names that were skipped, names that clash once normalised.
    public let issues: [ListingIssue]

    init(sortedEntries: [Entry], issues: [ListingIssue]) {
        self.entries = sortedEntries
        self.issues = issues
    }

    /// False when some part of the tree could not be listed; such a snapshot must never drive a removal.
    public var isComplete: Bool { !issues.contains { $0.blocksRemovals } }

    /// The entry at a path, by binary search.
    public func entry(at path: RelativePath) -> Entry? {
        var low = 0, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            let order = RelativePath.compare(entries[mid].path.bytes, path.bytes)
            if order == 0 { return entries[mid] }
            if order < 0 { low = mid + 1 } else { high = mid }
        }
        return nil
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

    public var blocksRemovals: Bool {
        if case .unreadable = kind { return true }
        return false
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
    public consuming func finish() -> Snapshot {
        entries.sort { RelativePath.compare($0.path.bytes, $1.path.bytes) < 0 }
        if entries.count > 1, zip(entries, entries.dropFirst()).contains(where: { $0.path == $1.path }) {
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
        issues.append(contentsOf: Self.normalizationClashes(in: entries))
        return Snapshot(sortedEntries: entries, issues: issues)
    }

    /// Only names with non-ASCII bytes can clash, so the common all-ASCII tree costs one scan. Swift's `String`
    /// compares and hashes by canonical equivalence, so it finds NFC/NFD twins without a normalisation pass.
    static func normalizationClashes(in entries: [Entry]) -> [ListingIssue] {
        var seen: [String: RelativePath] = [:]
        var clashes: [ListingIssue] = []
        for entry in entries where entry.path.bytes.contains(where: { $0 >= 0x80 }) {
            guard let text = String(validating: entry.path.bytes, as: UTF8.self) else { continue }
            if let other = seen[text] {
                clashes.append(ListingIssue(path: other.description, kind: .normalizationClash(entry.path.description)))
            } else {
                seen[text] = entry.path
            }
        }
        return clashes
    }
}
