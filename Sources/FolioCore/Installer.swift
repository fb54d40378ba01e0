import Foundation
import Synchronization

/// Puts downloaded files in place in batches (group commit): one `syncfs` before each batch of renames, which
/// also makes the batch before's names durable, and one after the last, instead of two fsyncs per file; then
/// hands their records to the `StateCommitter`.
///
/// Why it stays safe: a file is renamed only after the flush that made its data durable; a crash before the
/// rename reached the disk leaves a complete partial file that the next run installs without fetching it again.
final class Installer: Sendable {
    struct Sealed: Sendable {
        var download: SyncPlan.Download
        var partialName: String
        var inode: UInt64
        var mtime: FileTime
        var bytes: Int64
    }

    /// What the installed files add up to; read once the workers are done.
    struct Tally: Sendable {
        var downloaded = 0
        var updated = 0
        var trashed = 0
        var bytes: Int64 = 0
        var localChanges: [RelativePath] = []
        var changedPaths: [RelativePath] = []
        var failures: [(path: RelativePath, message: String)] = []
        var keepPartials: Set<String> = []
    }

    private let target: String
    private let destination: Destination
    private let runID: String?
    private let committer: StateCommitter
    private let events: any SyncEventSink
    private let progress: TransferProgress
    private let pending = Locked<Pending>(Pending())
    /// Written only on `queue`; the mutex makes it safe to share.
    private let tally = Mutex<Tally>(Tally())
    /// Whether files were renamed into place since the last flush (each batch's flush makes the batch before's
    /// names durable); written only on `queue`.
    private let namesUnflushed = Mutex<Bool>(false)
    /// Why its own serial queue: installing waits on the disk (`syncfs`) and renames file by file; a download
    /// worker that did it would stop its transfer meanwhile, and a lone stream (SFTP's tar) would stall. Being
    /// serial, it installs one batch at a time, and `finish` on it comes after every batch before it.
    private let queue = DispatchQueue(label: "folio.installer")

    private struct Pending: Sendable {
        var items: [Sealed] = []
        /// When the oldest waiting file was queued. Monotonic, like the queue's timers: a wall clock set back
        /// would make waiting files look younger than they are.
        var since = DispatchTime.now()
        /// Whether a large file waits (it is installed at once: it is a long download's whole result).
        var holdsLargeFile = false
        /// Whether the installer queue has a drain scheduled or running.
        var draining = false
        /// How many waiting files start the next install: `firstBatch`, then twice the largest batch taken so
        /// far, up to `mostWaiting`.
        var installAt = Installer.firstBatch

        /// When the oldest waiting file is due however few wait.
        var dueTime: DispatchTime { since + Installer.longestWait }

        /// Whether the waiting files should be installed now rather than wait for more.
        var isDue: Bool {
            !items.isEmpty && (items.count >= installAt || holdsLargeFile || DispatchTime.now() >= dueTime)
        }

        mutating func add(_ sealed: Sealed) {
            if items.isEmpty { since = .now() }
            items.append(sealed)
            if sealed.bytes >= 8 << 20 { holdsLargeFile = true }
        }

        /// Takes the waiting files for an install. Why grow from the size taken: a batch of one (a large file,
        /// or one the timer found alone) says nothing about the run's pace and must not end the small batches.
        mutating func takeBatch() -> [Sealed] {
            defer {
                installAt = min(max(installAt, items.count * 2), Installer.mostWaiting)
                items = []
                holdsLargeFile = false
            }
            return items
        }
    }

    init(target: String, destination: Destination, runID: String?, committer: StateCommitter, events: any SyncEventSink, progress: TransferProgress) {
        self.target = target
        self.destination = destination
        self.runID = runID
        self.committer = committer
        self.events = events
        self.progress = progress
    }

    /// How many waiting files start a run's first install; each later batch is twice the one before, up to
    /// `mostWaiting`. Why start small: the flush then overlaps the downloads instead of following them (1,000
    /// small local files: 0.116 -> 0.108 s, median of 20 runs each). Why grow: each install costs two `syncfs`
    /// (a device cache flush each, and the folders' and inode tables' blocks written again), so a long run needs
    /// large batches (100,000 small files: batches of 256 took 10-11 s, of 2,048 7-7.5 s).
    static let firstBatch = 64
    /// The longest a downloaded file waits for others before it is installed (so a long download does not
    /// hold back the small files finished beside it).
    static let longestWait = DispatchTimeInterval.milliseconds(250)

    /// How many files may wait while an install runs before the workers that add more wait for it (a batch is
    /// then at most this plus one per worker). Why a bound: workers that seal files faster than the disk takes
    /// them would otherwise pile up files (and their records) without end: 100,000 small local files peaked at
    /// 56 MB instead of 43.
    static let mostWaiting = 2_048

    /// Queues a sealed file; the installer queue puts the waiting files in place once enough have come (or a
    /// large one, or once the oldest has waited `longestWait`), while the workers go on downloading. Blocks
    /// while `mostWaiting` files wait for an install already under way.
    func add(_ sealed: Sealed) {
        let (start, wakeAt, mustWait) = pending.withLock { state -> (Bool, DispatchTime?, Bool) in
            state.add(sealed)
            guard !state.draining else { return (false, nil, state.items.count >= Self.mostWaiting) }
            if state.isDue {
                state.draining = true
                return (true, nil, false)
            }
            // Why only the first: while files wait and no drain is under way, one timer is always set, by the
            // add that found the list empty or by the drain that left files behind.
            return (false, state.items.count == 1 ? state.dueTime : nil, false)
        }
        if start { queue.async { self.drain() } }
        if let wakeAt { wake(at: wakeAt) }
        if mustWait {
            // Waits for the drain under way to end (it takes what waits before it ends). Workers run on their
            // own queues, never on this one, so this cannot wait for itself.
            dispatchPrecondition(condition: .notOnQueue(queue))
            queue.sync {}
        }
    }

    /// Installs batches while they are due; then, if files still wait, comes back when the oldest is due.
    /// Runs on the installer queue.
    private func drain() {
        while true {
            let (batch, wakeAt) = pending.withLock { state -> ([Sealed]?, DispatchTime?) in
                if state.isDue { return (state.takeBatch(), nil) }
                state.draining = false
                return (nil, state.items.isEmpty ? nil : state.dueTime)
            }
            guard let batch else {
                if let wakeAt { wake(at: wakeAt) }
                return
            }
            tally.withLock { install(batch, into: &$0) }
        }
    }

    private func wake(at time: DispatchTime) {
        queue.asyncAfter(deadline: time) {
            let start = self.pending.withLock { state -> Bool in
                guard !state.draining, !state.items.isEmpty else { return false }
                state.draining = true
                return true
            }
            if start { self.drain() }
        }
    }

    private func install(_ batch: [Sealed], into tally: inout Tally) {
        if let held = committer.keepForHook(batch.map(\.download.entry.path)) {
            // The partial files stay, complete, for the next run: it resumes them, or fetches them again when they
            // go in a batch (small files over HTTP, or SFTP's tar), whose files always start from nothing.
            for sealed in batch {
                tally.failures.append((sealed.download.entry.path, held))
                tally.keepPartials.insert(sealed.partialName)
                events.emit(.fileFailed(target: target, path: sealed.download.entry.path, message: held))
            }
            return
        }
        let results = destination.moveIntoPlace(batch.map { ($0.partialName, $0.download.entry.path, $0.download.replacing) }, runID: runID)
        namesUnflushed.withLock { $0 = true }
        for (sealed, placement) in zip(batch, results) {
            let entry = sealed.download.entry
            if case .failed(let error) = placement {
                tally.failures.append((entry.path, error.message))
                tally.keepPartials.insert(sealed.partialName)
                events.emit(.fileFailed(target: target, path: entry.path, message: error.message))
                continue
            }
            committer.add(RecordedEntry(entry, localInode: sealed.inode, localMtime: sealed.mtime))
            progress.fileFinished()
            events.emit(.fileDone(target: target, path: entry.path, bytes: sealed.bytes))
            tally.bytes += sealed.bytes
            tally.changedPaths.append(entry.path)
            // A local change found at install time (written during the run) counts like one the scan found.
            let changedHere = if case .placedOverLocalChange = placement { true } else { sealed.download.hasLocalChanges }
            // A file that replaced a local change is updated too, as the dry run counts it (and as a removal of
            // one is removed): the summary then says what the run did, beside the line naming the change.
            if sealed.download.replacing == nil {
                tally.downloaded += 1
            } else {
                tally.updated += 1
            }
            if changedHere {
                tally.trashed += 1
                tally.localChanges.append(entry.path)
            }
        }
    }

    /// Installs what is left, after any batch already under way, and returns the totals. Blocking.
    func finish() -> Tally {
        dispatchPrecondition(condition: .notOnQueue(queue))
        return queue.sync {
            let rest = pending.withLock { $0.takeBatch() }
            let totals = tally.withLock { tally in
                if !rest.isEmpty { install(rest, into: &tally) }
                return tally
            }
            // One flush for the last batch's names, not one after every batch (initial mirror of small local
            // files: 20,000 took 1.13 -> 1.00 s, median of 9 runs each; 100,000 took 5.13 -> 4.41 s, of 4).
            if namesUnflushed.withLock({ $0 }) { destination.makeNamesDurable() }
            return totals
        }
    }
}
