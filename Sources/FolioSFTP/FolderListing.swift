import FolioCore

/// A folder still to be listed by readdir.
struct FolderJob: Sendable {
    var path: RelativePath
    /// The folder's real path on the server (no symlinks in it).
    var remote: [UInt8]
    /// Real paths of the followed symlink targets above this folder, for loop detection.
    var chain: [[UInt8]]
}

/// What listing one folder (or the exec pass) found: entries, issues, and folders to list next.
struct FolderListing: Sendable {
    var entries: [Entry] = []
    var issues: [ListingIssue] = []
    var folders: [FolderJob] = []

    mutating func merge(_ other: FolderListing) {
        entries.append(contentsOf: other.entries)
        issues.append(contentsOf: other.issues)
        folders.append(contentsOf: other.folders)
    }
}
