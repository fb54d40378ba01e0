/// Something a listing could not fully do.
public struct ListingIssue: Sendable, Hashable, CustomStringConvertible {
    /// What kind of issue, with the reason (or, for a normalisation clash, the other name).
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

    /// Whether this issue holds back removals: true for `.unreadable`, whose contents are unknown.
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
    static func notices(_ issues: [ListingIssue]) -> [String] {
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

    /// One line for people, e.g. `cannot list photos/2019: permission denied` or `skipped a/b: …`.
    public var description: String {
        switch kind {
        case .unreadable(let why): "cannot list \(path): \(why)"
        case .skipped(let why): "skipped \(path): \(why)"
        case .normalizationClash(let other): "\(path) and \(other) differ only in Unicode normalisation; both kept"
        case .warning(let text): "\(path): \(text)"
        }
    }
}
