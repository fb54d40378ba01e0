/// What a destination scan found and left in place without listing it: entries that `exclude` leaves alone, names
/// Folio cannot mirror (a newline in a name, say), and folders it could not read. The planner keeps every folder
/// holding one, rather than moving it whole (which would take them along, uncounted by `max-delete`, unreported,
/// and deleted at once with `trash-days = 0`), copies no source file onto an excluded folder, and plans nothing at
/// or below an unreadable one.
public struct LeftAlone: Sendable {
    /// The excluded entries, by path.
    public private(set) var excluded: Set<RelativePath> = []
    /// Every folder with such an entry somewhere below it (the root aside, which always stays).
    public private(set) var holders: Set<RelativePath> = []
    /// Entries the scan could not read (a folder it may not open, an entry it may not stat), with why: what is
    /// there is unknown, so nothing at or below them is removed, replaced or written.
    public private(set) var unreadable: [RelativePath: String] = [:]

    /// Nothing left alone.
    public init() {}

    /// From the `excluded` entries' paths, the folders `holdingUnlisted` a name that could not be listed, and the
    /// `unreadable` entries with why.
    public init(excluded: [RelativePath], holdingUnlisted: [RelativePath], unreadable: [(path: RelativePath, why: String)] = []) {
        self.excluded = Set(excluded)
        for path in excluded { addHolders(from: path.parent) }
        for folder in holdingUnlisted { addHolders(from: folder) }
        for (path, why) in unreadable where !path.isRoot {
            self.unreadable[path] = why
            addHolders(from: path.parent)
        }
    }

    /// Whether `path` is an entry the scan could not read, or lies below one: the planner leaves it as it is.
    public func hides(_ path: RelativePath) -> Bool {
        if unreadable.isEmpty { return false }
        var current: RelativePath? = path
        while let candidate = current, !candidate.isRoot {
            if unreadable[candidate] != nil { return true }
            current = candidate.parent
        }
        return false
    }

    /// Whether `path` is an excluded entry the scan met, or lies inside one, or is hidden by an unreadable one. Its
    /// record stays: the file is still the one Folio wrote, and when the exclude goes (or the folder can be read
    /// again) it is Folio's to update, not a local file to set aside.
    public func covers(_ path: RelativePath) -> Bool {
        if hides(path) { return true }
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
