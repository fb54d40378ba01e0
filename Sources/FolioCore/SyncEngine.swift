import CFolioSys
import Dispatch
import Foundation

/// Runs one target through the four stages of DESIGN.md: gather (done by the caller), check, sync, finish.
///
/// The engine never knows which transport is behind the `Source`. Every guarantee that concerns the
/// destination lives here: nothing is removed on an incomplete listing or past `max-delete`, removed and
/// replaced files go to the trash, files appear under their final names only when complete.
public struct SyncEngine: Sendable {
    /// Where runs and what they wrote are recorded (the state database).
    public let state: any StateStore
    /// Receives every run's events: progress display, NDJSON, the daemon's log.
    public let events: any SyncEventSink

    /// An engine that records in `state` and reports to `events`.
    public init(state: any StateStore, events: any SyncEventSink) {
        self.state = state
        self.events = events
    }

    /// Options of one run.
    public struct RunOptions: Sendable {
        /// What started the run; recorded with it.
        public var trigger: TargetConfig.Trigger
        /// Plans and reports only: nothing is written to the destination or the state database.
        public var dryRun: Bool
        /// Lets a run past the `max-delete` and empty-source guards.
        public var force: Bool

        /// Options for one run; neither a dry run nor forced unless asked.
        public init(trigger: TargetConfig.Trigger, dryRun: Bool = false, force: Bool = false) {
            self.trigger = trigger
            self.dryRun = dryRun
            self.force = force
        }
    }

    /// Runs one target. Never throws: every outcome is a `RunReport`. Cancelling the task (or `progress`)
    /// stops the workers between chunks and leaves partial files for the next run; cancelling the task also has
    /// the source cut short what waits on its server (`Source.interrupt`).
    public func run(_ target: TargetConfig, source: any Source, options: RunOptions, progress: TransferProgress = TransferProgress()) async -> RunReport {
        var report = RunReport(target: target.name)
        report.dryRun = options.dryRun
        let started = Date()
        report.startedAt = started
        events.emit(.started(target: target.name, source: source.displayName, destination: target.destination, trigger: options.trigger))
        let events = self.events, name = target.name
        source.sendNotices { line in events.emit(.notice(target: name, message: line)) }
        var runID: Int64?
        if !options.dryRun {
            do {
                runID = try state.beginRun(target: target.name, source: source.displayName, destination: target.destination,
                                           trigger: options.trigger, startedAt: started)
                report.runID = runID
            } catch {
                report.result = .failed
                report.error = "\(error)"
                await source.finishRun()
                return finish(report, runID: nil, started: started, digest: nil, hooked: false)
            }
        }
        let digest: UInt64?
        var memo: String?
        do {
            digest = try await withTaskCancellationHandler {
                try await sync(target, source: source, options: options, progress: progress, report: &report, memo: &memo)
            } onCancel: {
                progress.cancel()
                source.interrupt()
            }
        } catch let error as SourceError {
            report.result = error.code == .cancelled ? .interrupted : .failed
            report.error = error.message
            report.errorCode = error.code
            digest = nil
        } catch let error as StateError {
            report.result = .failed
            report.error = error.message
            digest = nil
        } catch is CancellationError {
            // Task.checkCancellation between stages: a stop (SIGTERM, Ctrl-C), not a failure of the run.
            report.result = .interrupted
            report.error = "stopped before the run finished"
            digest = nil
        } catch {
            report.result = .failed
            report.error = "\(error)"
            digest = nil
        }
        // Said with the stop: "0 B" alone read as if a large file's megabytes so far were lost.
        if report.result == .interrupted { report.bytesInPartialFiles = max(0, progress.bytesDone - report.bytes) }
        // Why beside the record, not before it: what the source closes (a listing's idle connections, the SSH
        // sessions it kept) is a few milliseconds that neither the record nor the summary waits for; the run
        // still returns only once it is closed.
        async let closed: Void = source.finishRun()
        let finished = finish(report, runID: runID, started: started, digest: digest, memo: memo, hooked: !target.onChange.isEmpty)
        await closed
        return finished
    }

    /// Records the run's end; without `hooked` (the target has an `on-change` hook), the paths kept for a hook of
    /// the target are forgotten (it has none any more).
    private func finish(_ report: RunReport, runID: Int64?, started: Date, digest: UInt64?, memo: String? = nil, hooked: Bool) -> RunReport {
        var report = report
        report.seconds = Date().timeIntervalSince(started)
        if let runID {
            do {
                try state.finishRun(id: runID, target: report.target, report: report, sourceDigest: report.isClean ? digest : nil, listingMemo: memo,
                                    keepingChangesForHook: hooked)
            } catch {
                if report.error == nil { report.error = "cannot record the run in the state database: \(error)" }
                report.result = .failed
            }
        }
        events.emit(.finished(report))
        return report
    }

    /// Check and sync. Returns the snapshot's digest when the run reached the end, and sets `memo` to the
    /// listing's.
    private func sync(_ target: TargetConfig, source: any Source, options: RunOptions, progress: TransferProgress, report: inout RunReport,
                      memo: inout String?) async throws -> UInt64 {
        let name = target.name
        events.emit(.stage(target: name, stage: .listing))
        // Guarantee 3, for the destination: a folder that holds nothing of the runs the record remembers is a
        // drive not mounted or a share not attached, not a copy to make again on the disk beneath it. Why here,
        // before the source is asked anything: the answer does not depend on it. The record is counted only when
        // the folder shows no earlier run, so a run into its usual folder pays three system calls for the check.
        // (A destination that is missing altogether is refused before the lock would make it: `TargetLock`.)
        if !options.force, !Destination.showsEarlierRuns(at: target.destination) {
            let remembered = try state.recordedEntryCount(from: source.displayName, in: target.destination)
            if remembered > 0 {
                report.result = .refused
                report.error = Destination.notMountedRefusal(target.destination, remembered: remembered)
                return 0
            }
        }
        // A target pointed at another source or folder plans as a first run, and starts its record over only once
        // the run goes on to change the destination (below): a run that fails or is refused before then leaves
        // the old record, and the guard above that counts it, as they were. Else one mistyped source (missing, or
        // empty and refused) was enough to turn the guard off for the usual one.
        let startsOver = try state.recordsAnotherTree(target: name, source: source.displayName, destination: target.destination)
        let destination = try Self.openDestination(target.destination, dryRun: options.dryRun)
        var listing = ListingOptions(symlinks: target.symlinks, exclude: ExcludeFilter(target.exclude), parallelism: max(TargetConfig.nearTransfers, target.transfers ?? 0))
        // Why not in a dry run: it starts no run, so a target pointed at another source still holds the old one's hints.
        if !options.dryRun, !startsOver {
            if source.features.listsAhead {
                listing.hints = try state.listingHints(of: name)
                listing.hints.dropFolders(excludedBy: listing.exclude)
            } else if source.features.readsMemo {
                listing.hints.memo = try state.listingMemo(of: name)
            }
        }
        listing.destinationIdentity = destination.flatMap { TreeWalker.identity(of: $0.rootFD) }
        var (snapshot, local) = try await Self.list(source, options: listing, destination: destination)
        try Self.checkStopped(progress)
        if let destination, destination.ignoresCase {
            snapshot = CaseClashes.resolve(snapshot, local: local.items, destination: target.destination)
            snapshot = UnholdableNames.resolve(snapshot, refusing: destination.refusedNameBytes, refusesNonUTF8: destination.refusesNonUTF8Names,
                                               destination: target.destination)
        }
        // Kept with the record it goes with: not before the record is this source's.
        let listedMemo = snapshot.memo
        if !startsOver { memo = listedMemo }

        report.issues = snapshot.issues + local.issues.filter(\.blocksRemovals)
        for line in ListingIssue.notices(report.issues) { events.emit(.notice(target: name, message: line)) }
        if !local.issues.filter(\.blocksRemovals).isEmpty {
            throw SourceError(.localIO, "cannot read the destination \(target.destination): \(local.issues.first { $0.blocksRemovals }!); fix its permissions")
        }
        // A folder below the root that the scan could not read fails alone, as rsync's does: the planner leaves it
        // and what is below it as they are (`LeftAlone.hides`), and the rest of the mirror goes on.
        for (path, why) in local.leftAlone.unreadable.sorted(by: { RelativePath.compare($0.key, $1.key) < 0 }) {
            failed(path, Destination.unreadableLine(path, in: target.destination, why: why), target: name, report: &report)
        }

        // Guarantee 3: an empty source root is a doubt, not an instruction to delete everything.
        if snapshot.entries.isEmpty, snapshot.isComplete, !local.items.isEmpty, !options.force {
            report.result = .refused
            report.error = "source \(source.displayName) is empty; refusing to remove the \(local.items.count == 1 ? "1 entry" : "\(local.items.count) entries") in \(target.destination) (is the share mounted?); run with --force if it really is empty"
            return 0
        }

        let digest = TreeDigest.of(snapshot)
        let localPrecision = destination?.timePrecision ?? .nanosecond, localTimeRange = destination?.timeRange
        if snapshot.isComplete, !options.dryRun, !startsOver, try state.sourceDigest(of: name) == digest,
           Self.matches(snapshot, local.items, localPrecision: localPrecision, localTimeRange: localTimeRange) {
            report.result = .unchanged
            if let destination { tell(await Blocking.run { destination.tidy(trashDays: target.trashDays) }, target: target) }
            return digest
        }

        events.emit(.stage(target: name, stage: .planning))
        Self.sharePaths(of: &local.items, with: snapshot)
        _ = folio_return_free_pages_to_system()
        // A record of another tree still tells which local files Folio wrote (by inode, size and time): without it,
        // a target pointed at another source reported every file it replaced there as a local change.
        let record = try state.record(of: name, sharingPathsWith: snapshot)
        let plan = SyncPlanner.plan(remote: snapshot, local: local.items, record: record, recordIsOfAnotherTree: startsOver,
                                    removalsAllowed: snapshot.isComplete, localPrecision: localPrecision, localTimeRange: localTimeRange,
                                    leftAlone: local.leftAlone)
        // The plan holds all the run needs from here. Why end the rest now: an initial run's transfers would
        // otherwise hold the listing beside the plan's copy of it (at 100,000 files, 6 MB of the run's peak).
        _ = consume snapshot
        _ = consume local
        _ = consume record
        report.withheldRemovals = plan.withheldRemovals
        report.issues += plan.skipped
        for line in ListingIssue.notices(plan.skipped) { events.emit(.notice(target: name, message: line)) }
        if plan.withheldRemovals > 0 {
            events.emit(.notice(target: name, message: "the listing was incomplete, so nothing was removed (\(plan.withheldRemovals == 1 ? "1 removal" : "\(plan.withheldRemovals) removals") held back until a complete listing)"))
        }
        events.emit(.planned(target: name, summary: SyncEvent.PlanSummary(
            downloads: plan.downloads.count, downloadBytes: plan.downloadBytes, removals: plan.removedEntryCount,
            folders: plan.folders.count, mtimeFixes: plan.mtimeFixes.count)))

        let limit = target.maxDelete.limit(forEntryCount: plan.localEntryCount)
        if plan.removedEntryCount > limit, !options.force {
            let tooMany = "would remove \(plan.removedEntryCount) of \(plan.localEntryCount) entries in \(target.destination), more than max-delete (\(target.maxDelete))"
            report.result = .refused
            if options.dryRun {
                // Why a refused dry run still lists the plan: what the guard holds back is what the user has to
                // read before deciding on --force, and a dry run is where they look for it.
                describe(plan, target: name, destination: target.destination, trashDays: target.trashDays, report: &report)
                report.error = "\(tooMany), so a run stops before changing anything; the \"would\" lines are what it would do with --force"
            } else {
                // Both sides named: a destination that already held other files (the wrong folder, or a first
                // run into an old copy) trips the guard as surely as a source that lost them.
                report.error = "\(tooMany); nothing was changed; check that the source is complete and that the destination is the right folder, then run with --force to allow it"
            }
            return digest
        }

        if options.dryRun {
            describe(plan, target: name, destination: target.destination, trashDays: target.trashDays, report: &report)
            // As the run would end: one that only adopts files already here, or forgets records, is "synced".
            report.result = plan.changesNothing && plan.recordUpdates.isEmpty && plan.recordDeletions.isEmpty ? .unchanged : .synced
            return digest
        }
        guard let destination else { throw SourceError(.localIO, "destination \(target.destination) cannot be opened") }
        if startsOver {
            try state.startOver(target: name, source: source.displayName, destination: target.destination)
            memo = listedMemo
        }
        if plan.changesNothing && plan.recordUpdates.isEmpty && plan.recordDeletions.isEmpty {
            report.result = .unchanged
            tell(await Blocking.run { destination.tidy(trashDays: target.trashDays) }, target: target)
            return digest
        }
        try await apply(plan, target: target, source: source, destination: destination, progress: progress, report: &report)
        return digest
    }

    /// The sync stage: removals to the trash, folders, downloads, times, records.
    private func apply(_ plan: SyncPlan, target: TargetConfig, source: any Source, destination: Destination,
                       progress: TransferProgress, report: inout RunReport) async throws {
        let name = target.name
        let committer = StateCommitter(store: state, target: name, hookRun: target.onChange.isEmpty ? nil : report.runID)
        let trashID = target.trashDays > 0 ? Destination.runID(at: report.startedAt, suffix: "-" + String(UInt32.random(in: 0...UInt32.max), radix: 36)) : nil
        report.trashFolder = trashID.map { "\(target.destination)/.folio/trash/\($0)" }

        // Before anything is written: earlier runs' trash past `trash-days` and partial files no download of this
        // run resumes go first, so that a destination left full by a run that failed (a file too big for it, a
        // trash kept too long) has that room again. Blocking: off the cooperative pool.
        tell(await Blocking.run {
            destination.removePartials(notResumedBy: plan.downloads)
            return destination.purgeTrash(olderThan: target.trashDays)
        }, target: target)

        // Removals: deepest first, each a whole subtree, to the trash.
        if !plan.removals.isEmpty { events.emit(.stage(target: name, stage: .removing)) }
        // Kept for the hook before they change (a flush: off the cooperative pool), as installs are by the installer.
        let removedPaths = plan.removals.map(\.item.path)
        let removalsHeld = removedPaths.isEmpty ? nil : await Blocking.run { committer.keepForHook(removedPaths) }
        var failedRemovals: [RelativePath] = []
        for removal in plan.removals {
            try Self.checkStopped(progress)
            if let removalsHeld {
                failedRemovals.append(removal.item.path)
                failed(removal.item.path, removalsHeld, target: name, report: &report)
                continue
            }
            do {
                let changedSinceScan = try destination.discard(removal.item, runID: trashID)
                committer.forget(removal.item.path)
                report.removed += removal.entryCount
                report.changedPaths.append(removal.item.path)
                if removal.hasLocalChanges || changedSinceScan {
                    report.localChanges.append(removal.item.path)
                    if removal.item.kind == .folder { report.localChangedFolders.insert(removal.item.path) }
                    report.trashed += 1
                }
            } catch {
                failedRemovals.append(removal.item.path)
                failed(removal.item.path, error.message, target: name, report: &report)
            }
        }
        for path in plan.recordDeletions where !failedRemovals.contains(where: { path.isWithin($0) }) {
            committer.forget(path)
        }

        // Folders, shallowest first.
        if !plan.folders.isEmpty { events.emit(.stage(target: name, stage: .creating)) }
        for folder in plan.folders {
            try Self.checkStopped(progress)
            do {
                try destination.createFolder(folder.path)
                report.createdFolders += 1
            } catch {
                failed(folder.path, error.message, target: name, report: &report)
            }
        }

        // Downloads, on `transfers` workers.
        if !plan.downloads.isEmpty {
            events.emit(.stage(target: name, stage: .downloading))
            progress.limitBandwidth(target.bandwidthLimit)
            let outcome = await DownloadStage(target: name, source: source, destination: destination, downloads: plan.downloads,
                                              workers: target.downloadWorkers(roundTrip: source.roundTrip), runID: trashID, progress: progress, events: events,
                                              committer: committer).run()
            report.downloaded += outcome.downloaded
            report.updated += outcome.updated
            report.trashed += outcome.trashed
            report.bytes += outcome.bytes
            report.failures += outcome.failures
            report.localChanges += outcome.localChanges
            report.changedPaths += outcome.changedPaths
            destination.removePartials(keeping: outcome.keepPartials)
            if let error = outcome.runError {
                await Blocking.run { committer.flush() }
                throw error
            }
        } else {
            destination.removePartials(keeping: [])
        }
        try Self.checkStopped(progress)

        // Times: files whose content is unchanged, then folders deepest first (their content is final now).
        events.emit(.stage(target: name, stage: .finishing))
        let retimedPaths = plan.mtimeFixes.map(\.entry.path)
        let retimesHeld = retimedPaths.isEmpty ? nil : await Blocking.run { committer.keepForHook(retimedPaths) }
        for (entry, local) in plan.mtimeFixes {
            if let retimesHeld {
                failed(entry.path, retimesHeld, target: name, report: &report)
                continue
            }
            do {
                // Rewritten here since the scan: left as it is, and unrecorded, so the next run keeps it in the trash.
                guard try destination.setFileMtime(entry.path, entry.mtime, ifStill: local) else { continue }
                let now = try destination.identity(of: entry.path)
                committer.add(RecordedEntry(entry, localInode: now.inode, localMtime: now.mtime))
                report.updated += 1
                report.changedPaths.append(entry.path)
            } catch {
                failed(entry.path, error.message, target: name, report: &report)
            }
        }
        for folder in plan.folderTimes {
            do {
                try destination.setMtime(folder.path, folder.mtime)
                report.retimedFolders += 1
            } catch {
                failed(folder.path, error.message, target: name, report: &report)
            }
        }
        // Folders created or retimed are recorded as they are now (their inode tells a later run they are Folio's).
        var recordedFolders = Set<RelativePath>()
        for folder in plan.folders + plan.folderTimes where recordedFolders.insert(folder.path).inserted {
            if let now = try? destination.identity(of: folder.path) {
                committer.add(RecordedEntry(folder, localInode: now.inode, localMtime: now.mtime))
            }
        }
        for update in plan.recordUpdates { committer.add(update) }
        await Blocking.run { committer.flush() }
        if let error = committer.error { throw StateError(error) }
        report.result = .synced
    }

    /// Counts a path that failed and says so, as a line of its own (`file-failed` in JSON): a failure only
    /// counted would show in the summary's number with no line naming it.
    private func failed(_ path: RelativePath, _ message: String, target: String, report: inout RunReport) {
        report.failures.append((path, message))
        events.emit(.fileFailed(target: target, path: path, message: message))
    }

    /// Says what a purge of the trash did, if anything: emptied earlier runs' trash, and what it could not.
    private func tell(_ purge: TrashPurge, target: TargetConfig) {
        for line in purge.notices(trash: "\(target.destination)/.folio/trash", trashDays: target.trashDays) {
            events.emit(.notice(target: target.name, message: line))
        }
    }

    /// Throws when the run was stopped, between stages: the task's cancellation (the daemon's SIGTERM; by hand,
    /// `SignalStopper` cancels the run's task) or the progress's (which `SignalStopper` cancels first, and a caller
    /// may cancel alone). Why both: with only the progress cancelled, the download workers leave their loop without
    /// an error of their own; without this check such a run went on to "synced".
    private static func checkStopped(_ progress: TransferProgress) throws {
        try Task.checkCancellation()
        if progress.isCancelled { throw SourceError(.cancelled, "stopped before the run finished") }
    }

    /// A dry run: one notice per planned action, and the counts the run would have.
    private func describe(_ plan: SyncPlan, target: String, destination: String, trashDays: Int, report: inout RunReport) {
        for removal in plan.removals {
            let extra = removal.entryCount > 1 ? " (\(removal.entryCount) entries)" : ""
            events.emit(.notice(target: target, message: "would remove \(removal.item.path)\(extra)\(removal.hasLocalChanges ? " [local changes]" : "")"))
        }
        for folder in plan.folders { events.emit(.notice(target: target, message: "would create folder \(folder.path)")) }
        for download in plan.downloads {
            let verb = download.replacing == nil ? "would download" : "would update"
            events.emit(.notice(target: target, message: "\(verb) \(download.entry.path) (\(ByteCount.format(download.entry.size)))\(download.hasLocalChanges ? " [local changes to trash]" : "")"))
        }
        for fix in plan.mtimeFixes { events.emit(.notice(target: target, message: "would set the time of \(fix.entry.path)")) }
        let adopted = plan.recordUpdates.lazy.filter { $0.kind == .file }.count
        if adopted > 0 {
            events.emit(.notice(target: target, message: "would adopt \(adopted == 1 ? "1 file" : "\(adopted) files") already here, the same size and time as the source's, without fetching \(adopted == 1 ? "it" : "them")"))
        }
        report.downloaded = plan.downloads.filter { $0.replacing == nil }.count
        report.updated = plan.downloads.count - report.downloaded + plan.mtimeFixes.count
        report.removed = plan.removedEntryCount
        report.createdFolders = plan.folders.count
        report.bytes = plan.downloadBytes
        // What the run would set aside, counted as the run counts it (one per removal or download).
        report.localChanges = plan.removals.filter(\.hasLocalChanges).map(\.item.path) + plan.downloads.filter(\.hasLocalChanges).map(\.entry.path)
        report.localChangedFolders = Set(plan.removals.filter { $0.hasLocalChanges && $0.item.kind == .folder }.map(\.item.path))
        report.trashed = report.localChanges.count
        report.trashFolder = trashDays > 0 ? "\(destination)/.folio/trash" : nil
    }

    /// Whether the destination already holds exactly the snapshot (paths, kinds, sizes, mtimes at the source's
    /// precision, or the destination's where coarser): with an unchanged source digest, this is a no-change run
    /// that needs no record.
    static func matches(_ snapshot: Snapshot, _ local: [LocalItem], localPrecision: TimePrecision, localTimeRange: KeptTimeRange? = nil) -> Bool {
        guard snapshot.entries.count == local.count else { return false }
        func sameTime(_ entry: Entry, _ item: LocalItem) -> Bool {
            KeptTimeRange.matches(entry.mtime, entry.precision, kept: item.mtime, precision: localPrecision, range: localTimeRange)
        }
        for (entry, item) in zip(snapshot.entries, local) {
            guard entry.path == item.path else { return false }
            switch (entry.kind, item.kind) {
            case (.file, .file):
                guard entry.size == item.size, sameTime(entry, item) else { return false }
            case (.folder, .folder):
                guard !entry.mtime.isKnown || sameTime(entry, item) else { return false }
            default:
                return false
            }
        }
        return true
    }

    /// Opens the destination; a dry run into a folder that does not exist yet gets nil (everything is new).
    private static func openDestination(_ path: String, dryRun: Bool) throws -> Destination? {
        if dryRun && access(path, F_OK) != 0 { return nil }
        return try Destination(path: path, create: !dryRun)
    }

    /// Gives each local item that the snapshot also lists the snapshot's path, and each other item a copy of
    /// its own, so that the blocks the destination walk packed its paths into are all freed: one copy of each
    /// name in memory while the run plans and syncs. (A path left in its block would keep the whole block,
    /// ~1,700 names: with 1% of the destination gone from the source, nearly every block.) Both lists are
    /// sorted, so one merge pass does it.
    static func sharePaths(of items: inout [LocalItem], with snapshot: Snapshot) {
        let entries = snapshot.entries
        var next = 0
        for index in items.indices {
            while next < entries.count, RelativePath.compare(entries[next].path, items[index].path) < 0 { next += 1 }
            if next < entries.count, entries[next].path == items[index].path {
                items[index].path = entries[next].path
            } else {
                items[index].path = items[index].path.detached()
            }
        }
    }

    /// Lists the source and the destination at once.
    ///
    /// Why a task group and not two `async let`s: an `async let` keeps its value until the end of the scope, so
    /// the destination's listing could never be changed in place (`sharePaths`) nor its names freed early.
    private static func list(_ source: any Source, options: ListingOptions, destination: Destination?) async throws -> (Snapshot, TreeWalker.Result) {
        enum Listed: Sendable {
            case remote(Snapshot)
            case local(TreeWalker.Result)
        }
        var snapshot: Snapshot?
        var local: TreeWalker.Result?
        try await withThrowingTaskGroup(of: Listed.self) { group in
            group.addTask { .remote(try await source.snapshot(options: options)) }
            group.addTask { .local(await scan(destination, exclude: options.exclude, threads: 2)) }
            for try await listed in group {
                switch listed {
                case .remote(let listing): snapshot = listing
                case .local(let listing): local = listing
                }
            }
        }
        guard let snapshot, let local else { throw CancellationError() }
        return (snapshot, local)
    }

    private static func scan(_ destination: Destination?, exclude: ExcludeFilter, threads: Int) async -> TreeWalker.Result {
        guard let destination else { return TreeWalker.Result(items: [], issues: []) }
        return await Blocking.run { destination.scan(exclude: exclude, threads: threads) }
    }
}
