/// What one run will do to a destination: pure data, computed by `SyncPlanner` and carried out by `SyncEngine`.
public struct SyncPlan: Sendable {
    /// Something on the destination to move to the trash (with everything below it), deepest first.
    public struct Removal: Sendable, Hashable {
        /// Why something is removed.
        public enum Reason: Sendable, Hashable {
            /// The source no longer has it.
            case goneFromSource
            /// The source has something of another kind at this path.
            case typeChange
        }
        /// The local file, folder or link to remove, as the scan found it.
        public var item: LocalItem
        /// Why it goes.
        public var reason: Reason
        /// Entries this removal takes away: 1, or the folder and everything below it.
        public var entryCount: Int
        /// True when Folio did not write this, or it changed since Folio wrote it.
        public var hasLocalChanges: Bool
    }

    /// A file to copy from the source.
    public struct Download: Sendable, Hashable {
        /// The source entry to fetch.
        public var entry: Entry
        /// What the download replaces, boxed: most downloads of a big run replace nothing, and an inline
        /// `LocalItem?` doubled each element (88 bytes, 8.8 MB at 100,000 files, at the run's memory peak).
        private var replacement: Replacement?

        /// A download that replaces `replacing` (nil for a new file); `hasLocalChanges` counts only with a replacement.
        public init(entry: Entry, replacing: LocalItem?, hasLocalChanges: Bool) {
            self.entry = entry
            replacement = replacing.map { Replacement(item: $0, hasLocalChanges: hasLocalChanges) }
        }

        /// The file it replaces (moved to the trash as it is replaced), if any.
        public var replacing: LocalItem? { replacement?.item }
        /// True when the replaced file was not written by Folio or changed since.
        public var hasLocalChanges: Bool { replacement?.hasLocalChanges ?? false }

        private final class Replacement: Sendable, Hashable {
            let item: LocalItem
            let hasLocalChanges: Bool

            init(item: LocalItem, hasLocalChanges: Bool) {
                self.item = item
                self.hasLocalChanges = hasLocalChanges
            }

            static func == (lhs: Replacement, rhs: Replacement) -> Bool {
                lhs.item == rhs.item && lhs.hasLocalChanges == rhs.hasLocalChanges
            }

            func hash(into hasher: inout Hasher) {
                hasher.combine(item)
                hasher.combine(hasLocalChanges)
            }
        }
    }

    /// Things to move to the trash, deepest first.
    public var removals: [Removal] = []
    /// Folders to create, shallowest first.
    public var folders: [Entry] = []
    /// Files to copy from the source.
    public var downloads: [Download] = []
    /// Files whose content is known equal but whose mtime differs: only the time is set.
    public var mtimeFixes: [(entry: Entry, local: LocalItem)] = []
    /// Folders whose mtime to set once everything below them is in place, deepest first.
    public var folderTimes: [Entry] = []
    /// Records to write without touching the destination (identical files adopted, records out of date).
    public var recordUpdates: [RecordedEntry] = []
    /// Records of paths that exist on neither side any more.
    public var recordDeletions: [RelativePath] = []
    /// Removals (and the type changes that need them) left out because the listing was incomplete.
    public var withheldRemovals = 0
    /// Source entries left out (a name Folio keeps for itself, a file meeting an excluded folder), and folders
    /// kept because they hold entries Folio leaves alone.
    public var skipped: [ListingIssue] = []
    /// Entries the destination holds, the base of the `max-delete` percentage.
    public var localEntryCount = 0
    /// Files already in step.
    public var unchangedFiles = 0

    /// An empty plan.
    public init() {}

    /// Entries the removals take away in total.
    public var removedEntryCount: Int { removals.reduce(0) { $0 + $1.entryCount } }

    /// True when the destination already matches (records may still need writing).
    public var changesNothing: Bool {
        removals.isEmpty && folders.isEmpty && downloads.isEmpty && mtimeFixes.isEmpty && folderTimes.isEmpty
    }

    /// The downloads' total size in bytes (whole files, resumed ones included).
    public var downloadBytes: Int64 {
        // Held at Int64.max: each size is at most `Entry.maximumFileSize`, but thousands of them need not be.
        downloads.reduce(0) { total, download in
            let (sum, overflow) = total.addingReportingOverflow(download.entry.size)
            return overflow ? .max : sum
        }
    }
}

extension SyncPlan.Download {
    /// A download of a new file, replacing nothing.
    public init(entry: Entry) {
        self.init(entry: entry, replacing: nil, hasLocalChanges: false)
    }
}
