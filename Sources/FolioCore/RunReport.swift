import Foundation

/// The outcome of one run of one target: what the summary line, the NDJSON `target-done` event, the exit code
/// and the state database's run row are made of.
public struct RunReport: Sendable {
    /// How a run ended. The raw value is what NDJSON and the state database's run row say.
    public enum Result: String, Sendable {
        /// The destination now matches the source.
        case synced
        /// It already did; nothing was written.
        case unchanged
        /// The run could not finish (unreachable, authentication, local disk); the destination is consistent.
        case failed
        /// A safety guard stopped it before anything was changed.
        case refused
        /// Stopped by a signal; partial files stay for the next run.
        case interrupted
    }

    /// The target's name.
    public var target: String
    /// The run's id in the state database; nil for a dry run, or one that could not be recorded.
    public var runID: Int64?
    /// How the run ended; `.synced` until something says otherwise.
    public var result: Result = .synced
    /// New files.
    public var downloaded = 0
    /// Files replaced by a newer version (the old one went to the trash), plus mtime-only fixes.
    public var updated = 0
    /// Entries removed because the source no longer has them (moved to the trash unless `trash-days = 0`).
    public var removed = 0
    /// Local files that Folio did not write or that changed since, moved to the trash before being replaced.
    public var trashed = 0
    /// Folders created (in a dry run, folders that would be).
    public var createdFolders = 0
    /// Folders whose time was set to the source's, beside the folders created (not counted in `updated`).
    public var retimedFolders = 0
    /// Bytes copied this run.
    public var bytes: Int64 = 0
    /// Of an interrupted run: bytes received into partial files not installed yet, which the next run resumes from.
    public var bytesInPartialFiles: Int64 = 0
    /// Files that failed and are retried next run.
    public var failures: [(path: RelativePath, message: String)] = []
    /// The run-level error or the guard that refused, one line.
    public var error: String?
    /// The kind of source error behind `error`, when one failed the run. The daemon gives a failure that is not
    /// `isRetryable` (a refusal: credentials, host key, certificate) no quick retries.
    public var errorCode: SourceError.Code?
    /// Local files with changes that went to the trash (listed in the summary).
    public var localChanges: [RelativePath] = []
    /// Of `localChanges`, the folders (each went to the trash whole, with what it held).
    public var localChangedFolders: Set<RelativePath> = []
    /// Paths that changed (for `on-change` hooks).
    public var changedPaths: [RelativePath] = []
    /// What the listing could not do or skipped.
    public var issues: [ListingIssue] = []
    /// Removals held back because the listing was incomplete.
    public var withheldRemovals = 0
    /// When the run started (wall clock).
    public var startedAt = Date()
    /// How long the run took, in seconds; set when it finishes.
    public var seconds: Double = 0
    /// Where removed and replaced files went, if anywhere.
    public var trashFolder: String?
    /// Whether this was a `--dry-run`: the counts say what a run would do; nothing was written or recorded.
    public var dryRun = false

    /// A report for the target named `target`, before anything has happened.
    public init(target: String) { self.target = target }

    /// Files that failed, plus, in a run that went to its end, the parts of the source the listing could not read
    /// (nothing in them was fetched or removed): the `failed` of `target-done` and of `folio status`, so that a
    /// run that exits 3 never reads as clean there. (A run that failed as a whole, e.g. on a destination it could
    /// not read, says so in its error, not as a count.)
    public var failed: Int {
        failures.count + (result == .synced || result == .unchanged ? issues.filter(\.blocksRemovals).count : 0)
    }

    /// Whether an `on-change` hook runs after this run: it changed something, or it reached its end and may
    /// deliver what an earlier run kept (`HookBacklog`). Not after a run that could not start or found the folder
    /// busy: the process that holds the folder runs its own hook.
    public var reachesHook: Bool {
        !dryRun && (!changedPaths.isEmpty || result == .synced || result == .unchanged)
    }

    /// Whether this run leaves the target in step (exit 0 when all targets are). A listing that could not read
    /// everything does not: what it missed was neither fetched nor removed.
    public var isClean: Bool {
        (result == .synced || result == .unchanged) && failures.isEmpty && withheldRemovals == 0 && !issues.contains(where: \.blocksRemovals)
    }
}
