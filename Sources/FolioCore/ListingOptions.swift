/// How a source lists its tree for one target.
public struct ListingOptions: Sendable {
    /// What to do with symbolic links found on the source.
    public enum SymlinkPolicy: String, Sendable, CaseIterable {
        /// Leave links out (noted in the listing).
        case skip
        /// List what a link points to, only when it resolves inside the source root; loops are detected.
        case follow
    }

    /// Whether symbolic links on the source are left out or followed.
    public var symlinks: SymlinkPolicy
    /// The target's `exclude` globs: matching entries are left out of the listing.
    public var exclude: ExcludeFilter
    /// How many folders a source may list at once.
    public var parallelism: Int
    /// What the last run left for this listing (empty on a first run); used by sources with
    /// `SourceFeatures.listsAhead`.
    public var hints = ListingHints()
    /// The target's destination folder, by identity, for a source that can meet it inside its own tree (a local
    /// folder): it is skipped there. Set by the engine.
    var destinationIdentity: DirectoryIdentity?

    /// Options for one listing; `hints` start empty.
    public init(symlinks: SymlinkPolicy = .skip, exclude: ExcludeFilter = ExcludeFilter(), parallelism: Int = 4) {
        self.symlinks = symlinks
        self.exclude = exclude
        self.parallelism = parallelism
    }
}
