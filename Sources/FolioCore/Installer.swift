import Foundation
import Synchronization

/// Puts downloaded files in place in batches (group commit): one `syncfs` before and after a batch of renames
/// instead of two fsyncs per file, then one state-database commit for the batch.
///
/// Why it stays safe: a file is renamed only after the flush that made its data durable; a crash before the
/// rename leaves a complete partial file that the next run installs without fetching it again.
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
    private let pending = Locked<(items: [Sealed], since: Date)>(([], Date()))
    /// Why a separate lock: one batch is flushed at a time, while other workers keep downloading.
    private let flushing = Mutex<Tally>(Tally())

    init(target: String, destination: Destination, runID: String?, committer: StateCommitter, events: any SyncEventSink, progress: TransferProgress) {
        self.target = target
        self.destination = destination
        self.runID = runID
        self.committer = committer
        self.events = events
        self.progress = progress
    }

    /// The most files one batch installs. Each batch costs two `syncfs` (a device cache flush each): at 100,000
    /// small files, batches of 256 took 10-11 s and batches of 2,048 7-7.5 s (8,192 gained nothing more). A
    /// quarter of a second still bounds a batch on slower sources, so progress and the record keep up.
    static let batchFiles = 2_048

    /// Queues a sealed file; the worker that fills a batch (or finds it old) installs it.
    func add(_ sealed: Sealed) {
        let due = pending.withLock { state in
            if state.items.isEmpty { state.since = Date() }
            state.items.append(sealed)
            return state.items.count >= Self.batchFiles || Date().timeIntervalSince(state.since) >= 0.25 || sealed.bytes >= 8 << 20
        }
        if due { flush() }
    }

    /// Installs everything queued. Blocking; called from worker threads and once at the end.
    func flush() {
        flushing.withLock { tally in
            let batch = pending.withLock { state in
                defer { state.items = [] }
                return state.items
            }
            guard !batch.isEmpty else { return }
            let results = destination.moveIntoPlace(batch.map { ($0.partialName, $0.download.entry.path, $0.download.replacing != nil) }, runID: runID)
            for (sealed, error) in zip(batch, results) {
                let entry = sealed.download.entry
                if let error {
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
                if sealed.download.replacing == nil {
                    tally.downloaded += 1
                } else if sealed.download.hasLocalChanges {
                    tally.trashed += 1
                    tally.localChanges.append(entry.path)
                } else {
                    tally.updated += 1
                }
            }
        }
    }

    /// Flushes what is left and returns the totals.
    func finish() -> Tally {
        flush()
        return flushing.withLock { $0 }
    }
}
