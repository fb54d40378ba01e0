/// What a destination scan found and left in place without listing it: entries that `exclude` leaves alone, and
/// names Folio cannot mirror (a newline in a name, say). The planner keeps every folder holding one, rather than
/// moving it whole (which would take them along, uncounted by `max-delete`, unreported, and deleted at once with
/// `trash-days = 0`), and copies no source file onto an excluded folder.
public struct LeftAlone: Sendable {
    /// The excluded entries, by path.
    public private(set) var excluded: Set<RelativePath> = []
    /// Every folder with such an entry somewhere below it (the root aside, which always stays).
    public private(set) var holders: Set<RelativePath> = []

    /// Nothing left alone.
    public init() {}

    /// From the `excluded` entries' paths and the folders `holdingUnlisted` a name that could not be listed.
    public init(excluded: [RelativePath], holdingUnlisted: [RelativePath]) {
        self.excluded = Set(excluded)
        for path in excluded { addHolders(from: path.parent) }
        for folder in holdingUnlisted { addHolders(from: folder) }
    }

    /// Whether `path` is an excluded entry the scan met, or lies inside one. Its record stays: the file is still
    /// the one Folio wrote, and when the exclude goes it is Folio's to update, not a local file to set aside.
    public func covers(_ path: RelativePath) -> Bool {
        if excluded.isEmpty { return false }
        var current: RelativePath? = path
        while let candidate = current, !candidate.isRoot {
            if excluded.contains(candidate) { return true }
            current = candidate.parent
        }
        return false
    }

    /// Adds `folder` and the folders above it; stops at one already there, whose own are there too.
    private mutating func addHolders(from folder: RelativePath?) {
        var folder = folder
        while let current = folder, !current.isRoot, holders.insert(current).inserted {
            folder = current.parent
        }
    }
}
