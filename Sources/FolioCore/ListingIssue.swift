/// Something a listing could not fully do.
public struct ListingIssue: Sendable, Hashable, CustomStringConvertible {
    /// What kind of issue, with the reason (or, for a normalisation clash, the other name).
    public enum Kind: Sendable, Hashable {
        /// A folder (or the entry itself) could not be read: nothing may be removed on its account.
        case unreadable(String)
        /// A file the listing named but gave no usable size for (none, an impossible one, or, where it had to be
        /// asked for apart, the asking failed): blocks removals as `unreadable` does.
        case unreadableFile(String)
        /// An entry deliberately left out (bad name, special file, symlink by policy, outside the root, a file whose
        /// place a folder Folio leaves alone holds).
        case skipped(String)
        /// Two names in one folder differ only in Unicode normalisation; both are kept as distinct names.
        case normalizationClash(String)
        /// Something the operator should know about every run (e.g. `insecure-tls = true`); blocks nothing.
        case warning(String)
        /// A destination folder the source no longer has, kept because it holds entries Folio leaves alone.
        case kept(String)
    }
    /// Where, as display text (the path may not be a valid `RelativePath`).
    public var path: String
    /// What happened there.
    public var kind: Kind

    /// An issue at `path`.
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

    /// Whether this issue holds back removals: true for `.unreadable` and `.unreadableFile`, whose contents are
    /// unknown.
    public var blocksRemovals: Bool {
        switch kind {
        case .unreadable, .unreadableFile: true
        default: false
        }
    }

    /// The most issues of one group (see `noticeGroup`) that are each given their own notice line.
    static let listedAlone = 3

    /// The lines to show for `issues`, in their order: one per issue, except that a group of more than
    /// `listedAlone` issues that recur every run shares one line naming the first few: entries skipped for one
    /// reason (every symbolic link under `symlinks = "skip"`, say), and names that differ only in Unicode
    /// normalisation. Why: a tree with hundreds of links (or a library copied from a Mac beside its own copy)
    /// would otherwise print hundreds of lines each run, to a terminal or the daemon's log.
    static func notices(_ issues: [ListingIssue]) -> [String] {
        var groups: [String: [ListingIssue]] = [:]
        for issue in issues { if let key = issue.noticeGroup { groups[key, default: []].append(issue) } }
        var lines: [String] = []
        var folded: Set<String> = []
        for issue in issues {
            guard let key = issue.noticeGroup, let group = groups[key], group.count > listedAlone else {
                lines.append(issue.description)
                continue
            }
            // The group's line goes where its first issue was; the others add nothing.
            guard folded.insert(key).inserted else { continue }
            lines.append(groupLine(group))
        }
        return lines
    }

    /// Which shared notice line this issue may be folded into; nil for one that always has its own.
    private var noticeGroup: String? {
        switch kind {
        case .skipped(let why): "skipped: " + why
        case .kept(let why): "kept: " + why
        case .normalizationClash: "normalisation"
        case .unreadable, .unreadableFile, .warning: nil
        }
    }

    /// One line for a group of more than `listedAlone` issues, naming the first few.
    private static func groupLine(_ group: [ListingIssue]) -> String {
        let named = group.prefix(listedAlone), more = group.count - listedAlone
        switch group[0].kind {
        case .skipped(let why): return "skipped \(named.map(\.path).joined(separator: ", ")) and \(more) more: \(why)"
        case .kept(let why): return "kept \(named.map(\.path).joined(separator: ", ")) and \(more) more: \(why)"
        default: break
        }
        // Otherwise a group of normalisation pairs (`noticeGroup` puts nothing else in one).
        let pairs = named.map { issue in
            if case .normalizationClash(let other) = issue.kind { "\(issue.path) and \(other)" } else { issue.path }
        }
        return "\(pairs.joined(separator: ", ")), and \(more) more pairs differ only in Unicode normalisation; all kept"
    }

    /// One line for people, e.g. `cannot list photos/2019: permission denied` or `skipped a/b: …`.
    public var description: String {
        switch kind {
        case .unreadable(let why): "cannot list \(path): \(why)"
        case .unreadableFile(let why): "cannot mirror \(path): \(why)"
        case .skipped(let why): "skipped \(path): \(why)"
        case .normalizationClash(let other): "\(path) and \(other) differ only in Unicode normalisation; both kept"
        case .warning(let text): "\(path): \(text)"
        case .kept(let why): "kept \(path): \(why)"
        }
    }
}
