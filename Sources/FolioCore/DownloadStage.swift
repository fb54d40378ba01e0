import Dispatch
import Foundation
import Glibc
import Synchronization

/// The download stage: `workerCount` workers to start with, and up to `workers` for files batches leave, each on
/// its own thread with its own source connection, draining one shared list of files; bridged to async code
/// with a `DispatchGroup` notification.
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
        let queue = JobQueue(count: jobs.count)
        let outcome = Locked(Outcome())
        let installer = Installer(target: target, destination: destination, runID: runID, committer: committer, events: events, progress: progress)
        let group = DispatchGroup()
        let most = max(1, min(workers, downloads.count))
        // A new worker for every this many files a batch leaves: what its log-in costs in files fetched one by one
        // (three round trips each). Far, an SSH log-in is about a dozen round trips; near, it is the server's own
        // work (sshd's fork and key exchange, tens of ms), dozens of files' worth.
        let filesPerWorker = nearLink ? 32 : 4
        @Sendable func start(_ indices: Range<Int>, forLeftovers: Bool) {
            for index in indices {
                // Why one thread per worker: a connection (a libssh2 session, a curl handle) must only ever be
                // used from one thread, and here it never leaves the thread that opened it. Why a running worker
                // may start more after `notify` below: the group is never empty while it does.
                WorkerThread.start("folio-get-\(index)", in: group) {
                    self.work(jobs: jobs, batchWorkers: batchWorkers, queue: queue, outcome: outcome, installer: installer,
                              lookFirst: forLeftovers) { leftOver in
                        start(queue.moreWorkers(upTo: most, for: leftOver / filesPerWorker), forLeftovers: true)
                    }
                }
            }
        }
        start(queue.moreWorkers(upTo: workerCount), forLeftovers: false)
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
        // Files no worker got to are failures of this run when every connection failed; when the run was stopped
        // (Ctrl-C, SIGTERM) they are only not done yet, and counting them as failed would tell a user who pressed
        // Ctrl-C that their files are broken. The stop itself becomes the stage's error, so the run ends
        // "interrupted" (after its records are flushed) even when no worker met it in a transfer: a stop seen
        // through the progress alone leaves workers between files to just leave their loop.
        let stopped = progress.isCancelled || result.runError?.code == .cancelled
        if stopped, result.runError == nil {
            result.runError = SourceError(.cancelled, "stopped before the run finished")
        }
        var unattempted = result.unattempted
        while let item = queue.next() {
            switch item {
            case .job(let job): unattempted += jobs[job]
            case .file(let index): unattempted.append(index)
            }
        }
        for index in unattempted {
            let download = downloads[index]
            result.keepPartials.insert(Destination.partialName(for: download.entry))
            if !stopped { result.failures.append((download.entry.path, result.runError?.message ?? "not attempted")) }
        }
        return result
    }

    /// How many workers (each with its own connection) the downloads are worth to start with: at most `workers`,
    /// one per file, and where connections are costly, or a batch is parallel by itself and the link far, one per
    /// large file or full batch of small ones. Why: an SSH login is a dozen round trips, longer than a batch of
    /// small files takes to stream over a session already open (the listing's, which the first worker reuses);
    /// and over a far link, workers splitting the host's requests in flight between their batches leave slots
    /// idle at the end of each batch. Over a near link the files' own work (a partial file created, written and
    /// sealed each) is what takes the time, and one worker does it on one core: 1,000 small files over loopback
    /// WebDAV took 102-108 ms with one worker, 83-90 with four. Files a batch leaves start more (see `run`).
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

    /// One worker: takes jobs until none is left. `leftOver` gets how many files a batch left to fetch one by one
    /// (now in the queue for any worker), so more workers can start for them. With `lookFirst` (a worker started for
    /// such files), the worker connects only if work is still waiting: the others may have taken it all meanwhile,
    /// and a log-in then would only delay the end of the stage.
    private func work(jobs: [Range<Int>], batchWorkers: Int, queue: JobQueue, outcome: Locked<Outcome>, installer: Installer,
                      lookFirst: Bool, leftOver: (Int) -> Void) {
        var connection: (any SourceConnection)?
        /// The current job's downloads not fetched yet.
        var pending: ArraySlice<Int> = []
        /// The download whose connection dropped under it, tried again once the worker has reconnected.
        var interrupted: (index: Int, error: SourceError)?
        /// Set once this worker told the queue it gave up (which counts it out).
        var countedOut = false
        defer {
            if !countedOut { queue.workerEnded() }
            connection?.close()
            if !pending.isEmpty { outcome.withLock { $0.unattempted += pending } }
            // A file whose connection dropped and that a stop kept from its second try is not done yet, not failed.
            if let interrupted { record(interrupted.error, for: downloads[interrupted.index], in: outcome, stopped: progress.isCancelled) }
        }
        var reconnects = 0
        /// Whether a connection of this worker was lost while other workers were running, and whether this worker
        /// has since been let to connect again as the last one running (see below).
        var lostBesideOthers = false, retriedAlone = false
        while !progress.isCancelled, outcome.withLock({ $0.runError == nil }) {
            if connection == nil {
                if lookFirst, interrupted == nil, pending.isEmpty, queue.endIfIdle() {
                    countedOut = true
                    return
                }
                do {
                    connection = try source.makeConnection()
                } catch {
                    let sourceError = error as? SourceError ?? SourceError(.unreachable, "\(source.displayName): \(error)")
                    // Other workers may still be connected; only when none is does the run fail.
                    countedOut = true
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
                switch queue.nextOrEnd() {
                case nil:
                    countedOut = true
                    return
                case .file(let index):
                    pending = [index]
                case .job(let job):
                    pending = ArraySlice(jobs[job])
                    if pending.count > 1 {
                        // Why the files a batch left go back to the queue, not to this worker: when the batch failed
                        // as a whole (a server without tar, an SFTP-only account), one worker fetching the whole
                        // tree one file at a time, three round trips each, would take the run's time alone.
                        let left = transferBatch(Array(pending), batchWorkers: batchWorkers, with: connection!, installer: installer, outcome: outcome)
                        pending = []
                        if !left.isEmpty {
                            queue.putBack(left)
                            leftOver(left.count)
                        }
                        continue
                    }
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
                    if queue.hasOtherWorkers { lostBesideOthers = true }
                    if reconnects > 1, queue.handOver(index) {
                        // Other workers are still running: the file is theirs to fetch. A server that caps each
                        // user's connections (proftpd's MaxClientsPerUser) lets a session in and then drops it.
                        countedOut = true
                        return
                    }
                    if reconnects > 1, lostBesideOthers, !retriedAlone {
                        // The last one running, though others ran when this worker's sessions were dropped: they
                        // ended while it held this file (their queue looked empty), and a server that capped the
                        // user's connections for their sake admits this one now. One more try, alone; without it
                        // the run failed on such a server now and then, by the order in which workers ended.
                        retriedAlone = true
                        reconnects = 1
                        interrupted = (index, sourceError)
                        continue
                    }
                    if reconnects > 1 {
                        record(sourceError, for: download, in: outcome)
                        countedOut = true
                        if queue.workerGaveUp() { outcome.withLock { if $0.runError == nil { $0.runError = sourceError } } }
                        return
                    }
                    interrupted = (index, sourceError)
                    continue
                }
                let failsRun = switch sourceError.code {
                case .authentication, .cancelled: true
                // A full disk, or a filesystem gone or made read-only under the run (a drive unplugged, a FUSE mount
                // ended, a share dropped): every file after would fail alike, one line each.
                case .localIO: Self.filesystemGoneOrFull.contains { sourceError.underlying == "errno \($0)" }
                default: false
                }
                // An error that ends the run is said once, by the run's own line, not also as this file's.
                record(sourceError, for: download, in: outcome, announce: !failsRun)
                if failsRun {
                    outcome.withLock { if $0.runError == nil { $0.runError = sourceError } }
                    return
                }
            }
        }
    }

    /// The errors of a local filesystem (the destination's, or a mounted source's) that end the run.
    static let filesystemGoneOrFull = [ENOSPC, EDQUOT, EROFS, ENOTCONN, ECONNABORTED, ENODEV, ESTALE, ESHUTDOWN]

    /// Reports one file that could not be fetched or installed, keeping its partial file for the next run.
    /// A file cut off by a stop (Ctrl-C, SIGTERM: its error is `.cancelled`, or `stopped`) keeps its partial file
    /// but is no failure: it is not done yet. Any other error during a stop is still the file's failure.
    private func record(_ error: SourceError, for download: SyncPlan.Download, in outcome: Locked<Outcome>, announce: Bool = true,
                        stopped: Bool = false) {
        let stopped = stopped || error.code == .cancelled
        if announce && !stopped { events.emit(.fileFailed(target: target, path: download.entry.path, message: error.message)) }
        outcome.withLock { result in
            if !stopped { result.failures.append((download.entry.path, error.message)) }
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
                    let sealed = try destination.seal(sink, partialName: names[index], as: entries[index])
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
        let (fd, held) = try destination.openPartial(named: name, expectedSize: entry.size, resumable: source.features.resumable)
        progress.started(entry.path)
        defer { progress.ended(entry.path) }
        let overlap = Self.overlap(of: fd, before: held)
        var sink = DownloadSink(fileDescriptor: fd, offset: overlap == nil ? 0 : held, expectedSize: entry.size, directIO: destination.takesDirectIO,
                                path: entry.path, progress: progress, overlap: overlap ?? [])
        do {
            // An empty file has nothing to fetch: the listing's size and time are all it is. (Fetched, it needed
            // the server's SFTP: a bare shell account whose small files come by tar failed it on every run.)
            if entry.size > 0 {
                do {
                    try connection.download(entry, into: sink, from: sink.offset)
                } catch where sink.metOtherVersion {
                    // The partial file began with another version of the same size and time: it starts over.
                    guard ftruncate(fd, 0) == 0, lseek(fd, 0, SEEK_SET) == 0 else {
                        throw Destination.error(errno, "cannot empty the partial file for \(entry.path)", path: entry.path)
                    }
                    sink = DownloadSink(fileDescriptor: fd, offset: 0, expectedSize: entry.size, directIO: destination.takesDirectIO, path: entry.path,
                                        progress: progress)
                    try connection.download(entry, into: sink, from: 0)
                }
            }
        } catch {
            // What arrived stays in the partial file for the next run to resume from...
            try? sink.finish()
            close(fd)
            // ...but for bytes of a version the source no longer has (it said so: changed while it was copied, a
            // resume refused with 416). Kept, a listing that still names the old version had them resumed and
            // joined to another's, a whole torn file installed as complete, or the 416 met again on every run.
            if (error as? SourceError)?.code == .changed { destination.discardPartial(named: name) }
            throw error
        }
        let sealed = try destination.seal(sink, partialName: name, as: entry)
        return Installer.Sealed(download: download, partialName: name, inode: sealed.inode, mtime: sealed.mtime, bytes: sink.bytesTransferred)
    }

    /// The most of a partial file's bytes a resume asks for again, to compare (`overlap(of:before:)`).
    static let overlapLength: Int64 = 64 << 10

    /// The last bytes (up to `overlapLength`) of a partial file before `offset`, which a resume asks the source
    /// for again and compares before it appends. Why: a partial file is named after its version's size, time and
    /// tag, and a source whose times are whole seconds (nginx's WebDAV, an SFTP-only account) can have a file
    /// rewritten within the second, same size, after a run stopped mid-file. Resumed blindly, the old version's
    /// first part was joined to the new one's rest and installed, exit 0. A rewrite that leaves those bytes as
    /// they were and changes only earlier ones is not seen; 64 KiB is a few milliseconds of most links. A
    /// partial file left complete (a crash between its flush and its rename) is compared the same way. Empty
    /// when there is nothing to resume; nil when the bytes cannot be read, and the file is then emptied, to be
    /// fetched whole.
    static func overlap(of fd: Int32, before offset: Int64) -> [UInt8]? {
        guard offset > 0 else { return [] }
        let length = Int(min(offset, overlapLength))
        var bytes = [UInt8](repeating: 0, count: length)
        let read = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, length, off_t(offset) - off_t(length)) }
        guard read == length else {
            _ = ftruncate(fd, 0)
            _ = lseek(fd, 0, SEEK_SET)
            return nil
        }
        return bytes
    }
}

/// The shared list of downloads: jobs (one file, or a run of small files for one batch) handed out in order
/// under a lock, after the files batches left over, one at a time; and how many workers are running.
final class JobQueue: Sendable {
    enum Item {
        /// An index into the stage's jobs.
        case job(Int)
        /// A download a batch left over, to fetch on its own.
        case file(Int)
    }

    private struct State {
        var next = 0
        let count: Int
        /// Left-over downloads, the next one last.
        var files: [Int] = []
        /// Workers started so far (their threads are named `folio-get-N`), and those not ended yet.
        var started = 0
        var running = 0

        var hasWork: Bool { next < count || !files.isEmpty }
    }

    // Why a Mutex: every download worker's thread takes its next file here, and gives back what a batch left.
    private let state: Mutex<State>

    init(count: Int) { state = Mutex(State(count: count)) }

    func next() -> Item? {
        state.withLock { state in
            if let file = state.files.popLast() { return .file(file) }
            guard state.next < state.count else { return nil }
            defer { state.next += 1 }
            return .job(state.next)
        }
    }

    /// Whether a job or a left-over file is waiting.
    var hasWork: Bool { state.withLock { $0.hasWork } }

    /// A worker's next item; nil when none is left, and then the worker is counted out in the same step. Why
    /// together: a worker handing its file over (`handOver`) must know that some worker still running will ask
    /// again, and one that found the queue empty but was not yet counted out would leave the file behind.
    func nextOrEnd() -> Item? {
        state.withLock { state in
            if let file = state.files.popLast() { return .file(file) }
            guard state.next < state.count else {
                state.running -= 1
                return nil
            }
            defer { state.next += 1 }
            return .job(state.next)
        }
    }

    /// Counts a worker out when nothing is waiting; false (and it stays counted) when something is.
    func endIfIdle() -> Bool {
        state.withLock { state in
            guard !state.hasWork else { return false }
            state.running -= 1
            return true
        }
    }

    /// Whether a worker besides the caller is running.
    var hasOtherWorkers: Bool { state.withLock { $0.running > 1 } }

    /// Gives `file` to the other workers and counts this one out, when another is still running (which will
    /// ask `nextOrEnd` again before it ends); false, with nothing changed, for the last one.
    func handOver(_ file: Int) -> Bool {
        state.withLock { state in
            guard state.running > 1 else { return false }
            state.files.insert(file, at: 0)
            state.running -= 1
            return true
        }
    }

    /// Queues downloads a batch did not fetch, in their order.
    func putBack(_ files: [Int]) {
        state.withLock { $0.files.insert(contentsOf: files.reversed(), at: 0) }
    }

    /// Counts `extra` more workers as running, as many as keep `most` running at most (at least one when none
    /// is); returns their indices, for the caller to start.
    func moreWorkers(upTo most: Int, for extra: Int = .max) -> Range<Int> {
        state.withLock { state in
            let count = max(state.running == 0 ? 1 : 0, min(extra, most - state.running))
            let first = state.started
            state.started += count
            state.running += count
            return first..<state.started
        }
    }

    /// Records that one worker ended for any reason but a lost connection (the queue empty, the run stopped).
    func workerEnded() {
        state.withLock { $0.running -= 1 }
    }

    /// Records that one worker stopped for good with its connection lost; true when it was the last one running
    /// and downloads are left.
    func workerGaveUp() -> Bool {
        state.withLock { state in
            state.running -= 1
            return state.running == 0 && state.hasWork
        }
    }
}
