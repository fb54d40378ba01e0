/// The diff: from the source's snapshot, the state record and the destination's stat pass, a `SyncPlan`.
///
/// A pure function of its inputs, so every case is a table test. The inputs are sorted in `RelativePath`
/// order and merged in one pass; memory is the plan itself.
public enum SyncPlanner {
    /// The name Folio keeps at the destination's root for its partial files and trash.
    public static let reservedName: [UInt8] = Array(".folio".utf8)

    /// - Parameters:
    ///   - remote: the source's snapshot.
    ///   - local: the destination's entries, sorted, without `.folio`.
    ///   - record: what the state database remembers, by path.
    ///   - recordIsOfAnotherTree: the record is of the target's runs from another source or into another folder
    ///     (the run starts it over): its versions say nothing of this source's, so the plan is a first run's, but
    ///     a local file it names, still as Folio left it, is still Folio's (not a local change).
    ///   - removalsAllowed: false when the listing was incomplete: then nothing is removed or replaced by
    ///     another kind, and those cases are counted in `withheldRemovals`.
    ///   - localPrecision: how finely the destination's filesystem keeps times (`Destination.timePrecision`):
    ///     a time it cut down is not a difference.
    ///   - leftAlone: what the destination's scan left in place unlisted: the folders holding it stay, and no
    ///     source file takes the place of an excluded folder.
    public static func plan(remote: Snapshot, local: [LocalItem], record: RecordedTree, recordIsOfAnotherTree: Bool = false,
                            removalsAllowed: Bool, localPrecision: TimePrecision = .nanosecond, localTimeRange: KeptTimeRange? = nil,
                            leftAlone: LeftAlone = LeftAlone()) -> SyncPlan {
        var merge = Merge(record: record, recordIsOfAnotherTree: recordIsOfAnotherTree, removalsAllowed: removalsAllowed,
                          localPrecision: localPrecision, localTimeRange: localTimeRange, leftAlone: leftAlone)
        merge.run(remote: remote.entries, local: local)
        return merge.finish(remote: remote, local: local)
    }
}

/// The state of one merge pass.
private struct Merge {
    let record: RecordedTree
    let recordIsOfAnotherTree: Bool
    let removalsAllowed: Bool
    let localPrecision: TimePrecision
    let localTimeRange: KeptTimeRange?
    let leftAlone: LeftAlone
    var plan = SyncPlan()
    /// Index in `plan.removals` of the folder whose subtree the local cursor is in, if any.
    var removingSubtree: Int?
    /// A local subtree left alone because its removal is withheld.
    var keptSubtree: RelativePath?
    /// The last folder kept for what it holds (see `remove`): the folders kept inside it need no line of their own.
    var keptHolder: RelativePath?

    init(record: RecordedTree, recordIsOfAnotherTree: Bool, removalsAllowed: Bool, localPrecision: TimePrecision, localTimeRange: KeptTimeRange?,
         leftAlone: LeftAlone) {
        self.record = record
        self.recordIsOfAnotherTree = recordIsOfAnotherTree
        self.removalsAllowed = removalsAllowed
        self.localPrecision = localPrecision
        self.localTimeRange = localTimeRange
        self.leftAlone = leftAlone
    }

    mutating func run(remote: [Entry], local: [LocalItem]) {
        plan.localEntryCount = local.count
        // Room for every remote entry up front: grown by doubling, the array held its old and new buffers at once
        // (22 MB at 100,000 downloads, the peak of an initial run). Capacity a run leaves unused is never
        // written, so its pages never become resident.
        plan.downloads.reserveCapacity(remote.count)
        var r = 0, l = 0
        while r < remote.count || l < local.count {
            // A destination entry the scan could not read is left as it is, with what is below it, on both sides:
            // what is there is unknown, so nothing may be removed, replaced or written into it (the run says so
            // once per entry, as a failure).
            if l < local.count, leftAlone.hides(local[l].path) {
                l += 1
                continue
            }
            if r < remote.count, leftAlone.hides(remote[r].path) {
                r += 1
                continue
            }
            if l < local.count, absorbedIntoSubtree(local[l]) {
                l += 1
                continue
            }
            let order: Int
            if r == remote.count { order = 1 } else if l == local.count { order = -1 } else {
                order = RelativePath.compare(remote[r].path, local[l].path)
            }
            if order < 0 {
                let entry = remote[r]
                r += 1
                if entry.path.components.first.map({ Array($0) == SyncPlanner.reservedName }) == true {
                    // One line for the folder, none for what it holds (a source that is itself a Folio mirror has
                    // its trash there: "and 33 more" counted every entry of it).
                    if entry.path.depth == 1 {
                        plan.skipped.append(ListingIssue(path: entry.path.description, kind: .skipped(".folio is where Folio keeps its own files at the destination")))
                    }
                    continue
                }
                if leftAlone.excluded.contains(entry.path) {
                    // Only a file can meet an excluded entry the scan left out: a pattern that excludes a folder
                    // here but not this entry is a folders-only one (`cache/`), and the source's folder would
                    // be excluded too. Copying it would move the excluded folder to the trash to make room.
                    plan.skipped.append(ListingIssue(path: entry.path.description, kind: .skipped("the destination has a folder here that exclude leaves alone; rename one of them, or change exclude")))
                    continue
                }
                add(entry)
            } else if order > 0 {
                remove(local[l], reason: .goneFromSource)
                l += 1
            } else {
                compare(remote[r], local[l])
                r += 1
                l += 1
            }
        }
    }

    mutating func finish(remote: Snapshot, local: [LocalItem]) -> SyncPlan {
        // A record of another tree too: its rows outlive `StateStore.startOver`, for which files Folio wrote.
        if removalsAllowed {
            // Records of paths on neither side; those of removed local entries go with their removal. Those of
            // excluded entries still at the destination stay (`LeftAlone.covers`).
            plan.recordDeletions = record.lazy.map(\.path).filter { path in
                remote.entry(at: path) == nil && !Self.contains(local, path) && !leftAlone.covers(path)
            }
        }
        addParentTimes(remote: remote)
        plan.removals.sort { $0.item.path.depth > $1.item.path.depth }
        plan.folders.sort { $0.path.depth < $1.path.depth }
        plan.folderTimes.sort { $0.path.depth > $1.path.depth }
        return plan
    }

    /// Adding, replacing or removing an entry moves its folder's mtime on the destination: those folders get the
    /// source's time back at the end of the run too, or the next run would find them changed.
    private mutating func addParentTimes(remote: Snapshot) {
        var parents = Set(plan.folderTimes.map(\.path))
        // Walked one list at a time, not concatenated: at 100,000 downloads a joined copy of the paths was 2.4 MB
        // at the run's memory peak. Siblings come together (each list is in path order), so most are skipped by
        // comparing with the last parent (a parent shares its child's bytes: no copy, no hashing).
        var lastParent: RelativePath?
        func note(_ path: RelativePath) {
            guard let parent = path.parent, parent != lastParent else { return }
            lastParent = parent
            guard !parent.isRoot, !parents.contains(parent),
                  let folder = remote.entry(at: parent), folder.kind == .folder, folder.mtime.isKnown else { return }
            parents.insert(parent)
            plan.folderTimes.append(folder)
        }
        for download in plan.downloads { note(download.entry.path) }
        for removal in plan.removals { note(removal.item.path) }
        for folder in plan.folders { note(folder.path) }
    }

    private static func contains(_ local: [LocalItem], _ path: RelativePath) -> Bool {
        var low = 0, high = local.count
        while low < high {
            let mid = (low + high) / 2
            let order = RelativePath.compare(local[mid].path, path)
            if order == 0 { return true }
            if order < 0 { low = mid + 1 } else { high = mid }
        }
        return false
    }

    /// Local entries below a folder that goes to the trash (or is kept whole) are accounted to it.
    private mutating func absorbedIntoSubtree(_ item: LocalItem) -> Bool {
        if let index = removingSubtree {
            if item.path.isWithin(plan.removals[index].item.path) {
                plan.removals[index].entryCount += 1
                if hasLocalChanges(item) { plan.removals[index].hasLocalChanges = true }
                return true
            }
            removingSubtree = nil
        }
        if let kept = keptSubtree {
            if item.path.isWithin(kept) { return true }
            keptSubtree = nil
        }
        return false
    }

    private func hasLocalChanges(_ item: LocalItem) -> Bool {
        guard let recorded = record[item.path] else { return true }
        return !recorded.isLeftAsWritten(item, timeRange: localTimeRange)
    }

    /// Whether the local file still has the time Folio left on it, as the destination keeps it.
    private func keepsWrittenTime(_ recorded: RecordedEntry, _ item: LocalItem) -> Bool {
        item.mtime == recorded.localMtime || localTimeRange?.keeps(recorded.localMtime, as: item.mtime) == true
    }

    /// Whether the local item has the source entry's time, as the destination keeps it: at its precision, and
    /// clamped to its range.
    private func hasSourceTime(_ entry: Entry, _ item: LocalItem) -> Bool {
        KeptTimeRange.matches(entry.mtime, entry.precision, kept: item.mtime, precision: localPrecision, range: localTimeRange)
    }

    @discardableResult
    private mutating func remove(_ item: LocalItem, reason: SyncPlan.Removal.Reason) -> Bool {
        guard removalsAllowed else {
            plan.withheldRemovals += 1
            if item.kind == .folder { keptSubtree = item.path }
            return false
        }
        if item.kind == .folder, leftAlone.holders.contains(item.path) {
            // Why kept rather than moved whole: it holds entries Folio leaves alone, which the move would take
            // along unreported and uncounted by max-delete. What else is in it is removed entry by entry as the
            // merge reaches it (those items are not absorbed: no subtree is marked).
            if let keptHolder, item.path.isWithin(keptHolder) { return false }
            keptHolder = item.path
            plan.skipped.append(reason == .goneFromSource
                ? ListingIssue(path: item.path.description, kind: .kept("gone from the source, but it holds entries Folio leaves alone (excluded, unreadable, or names it cannot mirror); remove it by hand if they are not needed"))
                : ListingIssue(path: item.path.description, kind: .skipped("the source has a file here, and the destination's folder here holds entries Folio leaves alone (excluded, unreadable, or names it cannot mirror); move them, or change exclude")))
            return false
        }
        plan.removals.append(SyncPlan.Removal(item: item, reason: reason, entryCount: 1, hasLocalChanges: hasLocalChanges(item)))
        if item.kind == .folder { removingSubtree = plan.removals.count - 1 }
        return true
    }

    private mutating func add(_ entry: Entry) {
        switch entry.kind {
        case .folder:
            plan.folders.append(entry)
            if entry.mtime.isKnown { plan.folderTimes.append(entry) }
        case .file:
            plan.downloads.append(SyncPlan.Download(entry: entry))
        case .symlink:
            break  // sources resolve or skip links before listing them
        }
    }

    /// Both sides have the path.
    private mutating func compare(_ entry: Entry, _ item: LocalItem) {
        let written = record[entry.path]
        // The version Folio copied, when it was this source's: another source's size, time or ETag matching this
        // one's is no sign of the same content.
        let recorded = recordIsOfAnotherTree ? nil : written
        switch (entry.kind, item.kind) {
        case (.folder, .folder):
            if entry.mtime.isKnown, !hasSourceTime(entry, item) {
                plan.folderTimes.append(entry)
            } else if recorded == nil || recorded?.describesSameVersion(as: entry) == false || recorded?.localInode != item.inode {
                plan.recordUpdates.append(RecordedEntry(entry, local: item))
            }
        case (.file, .file):
            let sameShape = entry.size == item.size && hasSourceTime(entry, item)
            let leftAsWritten = written?.isLeftAsWritten(item, timeRange: localTimeRange) ?? false
            if sameShape {
                if let recorded, leftAsWritten, Self.sourceMovedOn(entry, from: recorded) {
                    // Same size and time here, but the source is not at the version Folio wrote: a new ETag or
                    // checksum, or a new time this destination cannot show (a same-size edit within the second
                    // of a filesystem that keeps whole seconds).
                    if Self.sameContent(entry, recorded) {
                        plan.mtimeFixes.append((entry: entry, local: item))
                    } else {
                        plan.downloads.append(SyncPlan.Download(entry: entry, replacing: item, hasLocalChanges: false))
                    }
                } else if let recorded, recorded.describesSameVersion(as: entry), leftAsWritten {
                    plan.unchangedFiles += 1
                } else if let recorded, recorded.describesSameVersion(as: entry), !keepsWrittenTime(recorded, item) {
                    // Folio wrote this version, and the file's time here moved since: an edit (here within the
                    // second of a source that keeps whole seconds, so its size and that time still match). Adopted,
                    // it stayed as the user left it, "unchanged" run after run. One whose time is as written
                    // (a copy restored, a filesystem whose inodes change at each mount) is adopted below.
                    plan.downloads.append(SyncPlan.Download(entry: entry, replacing: item, hasLocalChanges: true))
                } else {
                    plan.unchangedFiles += 1
                    plan.recordUpdates.append(RecordedEntry(entry, local: item))  // adopted: identical already
                }
            } else if let recorded, leftAsWritten, recorded.describesSameVersion(as: entry) {
                // The version Folio wrote, as it left it: a time here unlike the source's is what the filesystem
                // kept of it (ext4 keeps 1901 to 2446 and clamps a time outside to the nearer end), not a change.
                // Taken for one, such a file was fetched again, or its time set again, on every run.
                plan.unchangedFiles += 1
            } else if entry.mtime.isKnown, let recorded, leftAsWritten, entry.size == recorded.size, Self.sameContent(entry, recorded) {
                // Why only a known time: a source that gives none (an HTTP server without Last-Modified) has no
                // time to set, and the "fix" was planned, counted as updated and handed to the hook every run.
                plan.mtimeFixes.append((entry: entry, local: item))
            } else if !entry.mtime.isKnown, let recorded, leftAsWritten, recorded.describesSameVersion(as: entry) {
                plan.unchangedFiles += 1
            } else {
                plan.downloads.append(SyncPlan.Download(entry: entry, replacing: item, hasLocalChanges: !leftAsWritten))
            }
        default:
            // A type change: the local entry goes to the trash, then the source's entry takes its place.
            if remove(item, reason: .typeChange) { add(entry) }
        }
    }

    /// Whether the source's entry is a later version than the recorded one, as far as the source can tell: its
    /// size, its time at its own precision (a listing that keeps less of the time is not a change), and the
    /// tokens both sides have.
    private static func sourceMovedOn(_ entry: Entry, from recorded: RecordedEntry) -> Bool {
        if entry.size != recorded.size { return true }
        if entry.mtime.isKnown, !FileTime.equal(entry.mtime, entry.precision, recorded.mtime, entry.precision) { return true }
        if let now = entry.validator, let before = recorded.validator, now != before { return true }
        if let now = entry.checksum, let before = recorded.checksum, now != before { return true }
        return false
    }

    /// Whether the source says the content is still what was copied, although the mtime moved.
    private static func sameContent(_ entry: Entry, _ recorded: RecordedEntry) -> Bool {
        if let now = entry.checksum, let before = recorded.checksum { return now == before }
        if let now = entry.validator, let before = recorded.validator { return now == before }
        return false
    }
}
