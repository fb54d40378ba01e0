import Dispatch
import Foundation
import Glibc
import Synchronization

/// The download stage: `transfers` workers, each on its own serial queue with its own source connection,
/// draining one shared list of files; bridged to async code with a `DispatchGroup` notification.
struct DownloadStage: Sendable {
    struct Outcome: Sendable {
        var downloaded = 0
        var updated = 0
        var trashed = 0
        var bytes: Int64 = 0
        var failures: [(path: RelativePath, message: String)] = []
        var localChanges: [RelativePath] = []
        var changedPaths: [RelativePath] = []
        /// Partial files to keep for the next run (downloads that did not finish).
        var keepPartials: Set<String> = []
        /// Set when the run cannot go on (nothing reachable, disk full, cancelled).
        var runError: SourceError?
    }

    let target: String
    let source: any Source
    let destination: Destination
    let downloads: [SyncPlan.Download]
    let workers: Int
    let runID: String?
    let progress: TransferProgress
    let events: any SyncEventSink
    let committer: StateCommitter

    func run() async -> Outcome {
        let workerCount = max(1, min(workers, downloads.count))
        let queue = JobQueue(count: downloads.count, workers: workerCount)
        let outcome = Locked(Outcome())
        let installer = Installer(target: target, destination: destination, runID: runID, committer: committer, events: events, progress: progress)
        let group = DispatchGroup()
        for index in 0..<workerCount {
            // Why one serial queue per worker: a connection (a libssh2 session, a curl handle) must only ever
            // be used from one thread, and here it never leaves the queue that opened it.
            DispatchQueue(label: "folio.download.\(index)").async(group: group) {
                self.work(queue: queue, outcome: outcome, installer: installer)
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            group.notify(queue: .global()) { continuation.resume() }
        }
        let tally = await SyncEngine.offPool { installer.finish() }
        var result = outcome.withLock { $0 }
        result.downloaded = tally.downloaded
        result.updated = tally.updated
        result.trashed = tally.trashed
        result.bytes = tally.bytes
        result.localChanges = tally.localChanges
        result.changedPaths = tally.changedPaths
        result.failures += tally.failures
        result.keepPartials.formUnion(tally.keepPartials)
        // Files no worker got to (every connection failed, or the run was stopped) are failures of this run.
        while let index = queue.next() {
            let download = downloads[index]
            result.keepPartials.insert(Destination.partialName(for: download.entry))
            result.failures.append((download.entry.path, result.runError?.message ?? "not attempted"))
        }
        return result
    }

    private func work(queue: JobQueue, outcome: Locked<Outcome>, installer: Installer) {
        var connection: (any SourceConnection)?
        defer { connection?.close() }
        var reconnects = 0
        while !progress.isCancelled, outcome.withLock({ $0.runError == nil }) {
            if connection == nil {
                do {
                    connection = try source.makeConnection()
                } catch {
                    let sourceError = error as? SourceError ?? SourceError(.unreachable, "\(source.displayName): \(error)")
                    // Other workers may still be connected; only when none is does the run fail.
                    if queue.workerGaveUp() || sourceError.code == .authentication {
                        outcome.withLock { if $0.runError == nil { $0.runError = sourceError } }
                    }
                    return
                }
            }
            guard let index = queue.next() else { return }
            let download = downloads[index]
            do {
                installer.add(try transfer(download, with: connection!))
            } catch {
                let sourceError = error as? SourceError ?? SourceError(.localIO, "\(download.entry.path): \(error)")
                let name = Destination.partialName(for: download.entry)
                events.emit(.fileFailed(target: target, path: download.entry.path, message: sourceError.message))
                outcome.withLock { result in
                    result.failures.append((download.entry.path, sourceError.message))
                    result.keepPartials.insert(name)
                }
                switch sourceError.code {
                case .unreachable:
                    // The connection is gone: reconnect once; a second loss ends this worker.
                    connection?.close()
                    connection = nil
                    reconnects += 1
                    if reconnects > 1 {
                        if queue.workerGaveUp() { outcome.withLock { if $0.runError == nil { $0.runError = sourceError } } }
                        return
                    }
                case .authentication, .cancelled:
                    outcome.withLock { if $0.runError == nil { $0.runError = sourceError } }
                    return
                case .localIO where sourceError.underlying == "errno \(ENOSPC)" || sourceError.underlying == "errno \(EDQUOT)":
                    outcome.withLock { if $0.runError == nil { $0.runError = sourceError } }
                    return
                default:
                    break
                }
            }
        }
    }

    /// Copies one file into its partial file and seals it for the installer.
    private func transfer(_ download: SyncPlan.Download, with connection: any SourceConnection) throws -> Installer.Sealed {
        let entry = download.entry
        let name = Destination.partialName(for: entry)
        let (fd, offset) = try destination.openPartial(named: name, expectedSize: entry.size, resumable: source.features.resumable)
        progress.started(entry.path)
        defer { progress.ended(entry.path) }
        let sink = DownloadSink(fileDescriptor: fd, offset: offset, path: entry.path, progress: progress)
        do {
            // A partial file that is already complete (a crash between flush and rename) needs no transfer.
            if offset < entry.size || entry.size == 0 {
                try connection.download(entry, into: sink, from: offset)
            }
        } catch {
            close(fd)
            throw error
        }
        let sealed = try destination.seal(partialFD: fd, partialName: name, as: entry)
        return Installer.Sealed(download: download, partialName: name, inode: sealed.inode, mtime: sealed.mtime, bytes: sink.bytesTransferred)
    }
}

/// The shared list of downloads: an index handed out under a lock, and a count of workers still alive.
final class JobQueue: Sendable {
    private let state: Mutex<(next: Int, count: Int, workersLost: Int, workers: Int)>

    init(count: Int, workers: Int) { state = Mutex((0, count, 0, workers)) }

    func next() -> Int? {
        state.withLock { state in
            guard state.next < state.count else { return nil }
            defer { state.next += 1 }
            return state.next
        }
    }

    /// Records that one worker stopped for good; true when that was the last one able to connect.
    func workerGaveUp() -> Bool {
        state.withLock { state in
            state.workersLost += 1
            return state.next < state.count && state.workersLost >= state.workers
        }
    }
}
