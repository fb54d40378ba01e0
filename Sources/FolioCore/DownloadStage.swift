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
        /// Downloads a worker had taken but did not get to before it stopped.
        var unattempted: [Int] = []
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
        let nearLink = !TargetConfig.isFar(roundTrip: source.roundTrip)
        let workerCount = Self.workerCount(for: downloads, workers: workers, features: source.features, nearLink: nearLink)
        // Over a near link every worker takes batches, each with its share of the host's requests; over a far
        // one a batch takes every request free, as another worker's batch is rarely running beside it.
        let batchWorkers = nearLink ? workerCount : 1
        let jobs = Self.jobs(for: downloads, workers: workerCount, batching: source.features.batchDownloads)
        let queue = JobQueue(count: jobs.count, workers: workerCount)
        let outcome = Locked(Outcome())
        let installer = Installer(target: target, destination: destination, runID: runID, committer: committer, events: events, progress: progress)
        let group = DispatchGroup()
        for index in 0..<workerCount {
            // Why one serial queue per worker: a connection (a libssh2 session, a curl handle) must only ever
            // be used from one thread, and here it never leaves the queue that opened it.
            DispatchQueue(label: "folio.download.\(index)").async(group: group) {
                self.work(jobs: jobs, batchWorkers: batchWorkers, queue: queue, outcome: outcome, installer: installer)
            }
        }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            group.notify(queue: .global()) { continuation.resume() }
        }
        let tally = await Blocking.run { installer.finish() }
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
        var unattempted = result.unattempted
        while let job = queue.next() { unattempted += jobs[job] }
        for index in unattempted {
            let download = downloads[index]
            result.keepPartials.insert(Destination.partialName(for: download.entry))
            result.failures.append((download.entry.path, result.runError?.message ?? "not attempted"))
        }
        return result
    }

    /// How many workers (each with its own connection) the downloads are worth: at most `workers`, one per file,
    /// and where connections are costly, or a batch is parallel by itself and the link far, one per large file or
    /// full batch of small ones. Why: an SSH login is a dozen round trips, longer than a batch of small files
    /// takes to stream over a session already open (the listing's, which the first worker reuses); and over a
    /// far link, workers splitting the host's requests in flight between their batches leave slots idle at the
    /// end of each batch. Over a near link the files' own work (a partial file created, written and sealed each)
    /// is what takes the time, and one worker does it on one core: 1,000 small files over loopback WebDAV took
    /// 102-108 ms with one worker, 83-90 with four.
    static func workerCount(for downloads: [SyncPlan.Download], workers: Int, features: SourceFeatures, nearLink: Bool) -> Int {
        let most = max(1, min(workers, downloads.count))
        guard features.batchDownloads, features.costlyConnections || (features.parallelBatches && !nearLink) else { return most }
        var large = 0
        var smallBytes: Int64 = 0
        for download in downloads {
            if download.entry.size > DownloadBatch.maxFileSize { large += 1 } else { smallBytes += download.entry.size }
        }
        let smallBatches = Int((smallBytes + DownloadBatch.maxBytes - 1) / DownloadBatch.maxBytes)
        return max(1, min(most, large + smallBatches))
    }

    /// Splits the downloads into jobs: runs of small files fetched as one batch when the source can, so that
    /// every worker of several still gets a few jobs; one file per job otherwise.
    static func jobs(for downloads: [SyncPlan.Download], workers: Int, batching: Bool) -> [Range<Int>] {
        guard batching else { return downloads.indices.map { $0..<($0 + 1) } }
        let small = downloads.lazy.filter { $0.entry.size <= DownloadBatch.maxFileSize }.count
        // Why two jobs per worker when there are several: one worker holding the whole tree in one batch would
        // leave the others idle. A lone worker (a costly connection, few bytes) idles no one: it takes one batch,
        // as each batch costs a request (three round trips over SFTP).
        let perWorker = workers == 1 ? 1 : 2
        let batchFiles = max(2, min(DownloadBatch.maxFiles, (small + perWorker * workers - 1) / (perWorker * workers)))
        var jobs: [Range<Int>] = []
        var start = 0
        var bytes: Int64 = 0
        for (index, download) in downloads.enumerated() {
            let size = download.entry.size
            if size > DownloadBatch.maxFileSize {
                if start < index { jobs.append(start..<index) }
                jobs.append(index..<(index + 1))
                start = index + 1
                bytes = 0
                continue
            }
            if index - start == batchFiles || bytes + size > DownloadBatch.maxBytes {
                jobs.append(start..<index)
                start = index
                bytes = 0
            }
            bytes += size
        }
        if start < downloads.count { jobs.append(start..<downloads.count) }
        return jobs
    }

    private func work(jobs: [Range<Int>], batchWorkers: Int, queue: JobQueue, outcome: Locked<Outcome>, installer: Installer) {
        var connection: (any SourceConnection)?
        /// The current job's downloads not fetched yet.
        var pending: ArraySlice<Int> = []
        /// The download whose connection dropped under it, tried again once the worker has reconnected.
        var interrupted: (index: Int, error: SourceError)?
        defer {
            connection?.close()
            if !pending.isEmpty { outcome.withLock { $0.unattempted += pending } }
            if let interrupted { record(interrupted.error, for: downloads[interrupted.index], in: outcome) }
        }
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
                if let retry = interrupted {
                    pending.insert(retry.index, at: pending.startIndex)
                    interrupted = nil
                }
            }
            if pending.isEmpty {
                guard let job = queue.next() else { return }
                pending = ArraySlice(jobs[job])
                if pending.count > 1 {
                    pending = ArraySlice(transferBatch(Array(pending), batchWorkers: batchWorkers, with: connection!, installer: installer, outcome: outcome))
                    continue
                }
            }
            let index = pending.removeFirst()
            let download = downloads[index]
            do {
                installer.add(try transfer(download, with: connection!))
            } catch {
                let sourceError = error as? SourceError ?? SourceError(.localIO, "\(download.entry.path): \(error)")
                if sourceError.code == .unreachable {
                    // The connection is gone: reconnect once and try this file again (a connection that dropped
                    // is no fault of the file); a second loss ends this worker and fails the file.
                    connection?.close()
                    connection = nil
                    reconnects += 1
                    if reconnects > 1 {
                        record(sourceError, for: download, in: outcome)
                        if queue.workerGaveUp() { outcome.withLock { if $0.runError == nil { $0.runError = sourceError } } }
                        return
                    }
                    interrupted = (index, sourceError)
                    continue
                }
                record(sourceError, for: download, in: outcome)
                switch sourceError.code {
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

    /// Reports one file that could not be fetched or installed, keeping its partial file for the next run.
    private func record(_ error: SourceError, for download: SyncPlan.Download, in outcome: Locked<Outcome>) {
        events.emit(.fileFailed(target: target, path: download.entry.path, message: error.message))
        outcome.withLock { result in
            result.failures.append((download.entry.path, error.message))
            result.keepPartials.insert(Destination.partialName(for: download.entry))
        }
    }

    /// Fetches a job's small files in one request and hands the ones that arrived whole to the installer;
    /// returns the indices left to fetch one by one (all of them when the batch failed as a whole).
    private func transferBatch(_ indices: [Int], batchWorkers: Int, with connection: any SourceConnection, installer: Installer, outcome: Locked<Outcome>) -> [Int] {
        let entries = indices.map { downloads[$0].entry }
        let names = entries.map(Destination.partialName(for:))
        let batch = DownloadBatch(
            entries: entries, workers: batchWorkers, progress: progress,
            openPartial: { index throws(SourceError) in
                try destination.openPartial(named: names[index], expectedSize: entries[index].size, resumable: false).fd
            },
            seal: { index, sink in
                Result { () throws(SourceError) in
                    let sealed = try destination.seal(partialFD: sink.fileDescriptor, partialName: names[index], as: entries[index])
                    return Installer.Sealed(download: downloads[indices[index]], partialName: names[index], inode: sealed.inode, mtime: sealed.mtime,
                                            bytes: sink.bytesTransferred)
                }
            },
            discard: { index in destination.discardPartial(named: names[index]) })
        // Why the error is dropped: each file left over is fetched again on its own, which reports its own
        // error (or the connection's) with the file's name.
        try? connection.download(batch: batch)
        var left: [Int] = []
        for (position, index) in indices.enumerated() {
            switch batch.takeComplete(position) {
            case nil: left.append(index)
            case .success(let sealed)?: installer.add(sealed)
            case .failure(let error)?: record(error, for: downloads[index], in: outcome)
            }
        }
        batch.discardRest()
        return left
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
