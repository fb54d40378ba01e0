import FolioCore

/// A folder still to be listed by readdir.
struct FolderJob: Sendable {
    var path: RelativePath
    /// The folder's real path on the server (no symlinks in it).
    var remote: [UInt8]
    /// Real paths of the followed symlinks' targets above this folder, and of the folders holding those links, for
    /// loop detection.
    var chain: [[UInt8]]
}

/// What listing one folder (or the exec pass) found: entries and issues, and folders to list next.
struct FolderListing: Sendable {
    /// The entries and issues, gathered as the snapshot's (see `SnapshotBuilder` for why in chunks).
    var found = SnapshotBuilder()
    var folders: [FolderJob] = []

    init() {}

    init(issues: [ListingIssue]) { found.note(contentsOf: issues) }

    mutating func merge(_ other: FolderListing) {
        found.merge(other.found)
        folders.append(contentsOf: other.folders)
    }
}
