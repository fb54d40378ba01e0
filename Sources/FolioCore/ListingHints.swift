/// What the last run of a target left for the next listing of its source, from the state database.
///
/// Only hints: a source that uses them must list the same tree as without them, since the source may have
/// changed in any way since.
public struct ListingHints: Sendable, Equatable {
    /// The folders of the last run's record, in path order: a source that pays a round trip per folder can ask
    /// for them all at once instead of one level at a time.
    public var folders: [RelativePath]
    /// What the source said about its server in the last listing (`Snapshot.memo`), in the source's own words.
    public var memo: String?

    /// Hints with `folders` and `memo`; none by default (a first run).
    public init(folders: [RelativePath] = [], memo: String? = nil) {
        self.folders = folders
        self.memo = memo
    }
}
