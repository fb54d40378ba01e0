import FolioCore
import Foundation

/// Lists a tree with several worker threads, each owning one `CurlEasy` (one keep-alive connection), so many
/// folders (and HEAD requests) are in flight at once: `Workers.near` of them from the start, and `Workers.most`
/// once a request has shown the link far.
///
/// Folders the last run had (`ListingOptions.hints.folders`) are listed ahead, alongside the root,
/// instead of one level per round trip: a known folder's listing is held until its parent's listing names it as
/// a folder, and dropped if it never does (the folder was removed, renamed or excluded since), so the snapshot
/// holds only what the listings of the folders above each entry show, as a plain walk's does.
///
/// Workers run on threads of their own, never on the cooperative pool: libcurl blocks. The walk
/// ends when no job is queued and no worker is busy, or at the first run-level error.
final class ListingWalk: @unchecked Sendable {
    // Why @unchecked: every stored var is read and written only while `condition` is locked.
    enum Job: Sendable {
        /// List a folder's children.
        case folder(RelativePath)
        /// Complete a file's entry (size, time, ETag) with a HEAD: for index pages that do not give them.
        case head(RelativePath)
        /// List the root's children with `Depth: 1` while the root's worker asks for `Depth: infinity` (WebDAV).
        case rootDepthOne
    }

    /// How many workers list at once.
    struct Workers: Sendable {
        /// Workers over a far link: each folder is a round trip, and a level of a few dozen folders then costs
        /// one round of them, not several.
        var most: Int
        /// Workers while the link is near or not timed yet (the listing's parallelism: 4, or `transfers` if
        /// more). Why fewer: near, a request is more the server's work than the wire's, and each worker is one
        /// more thread and connection to start (no-change run of 1,000 files in 21 folders over loopback WebDAV:
        /// 22.2 ms with 16 workers, 20.9 with 8, 20.4 with 4; medians of 21). Why start with them over a far
        /// link too: the first request, the root, is alone.
        var near: Int
        /// The quickest turn the source has timed so far (nil before the first).
        var roundTrip: @Sendable () -> Duration?
    }

    /// What a job does; `scope` takes its results. A thrown `SourceError` fails the whole listing when it is
    /// about the root or when it fails the run (server unreachable, credentials refused); otherwise the
    /// folder or file becomes an `.unreadable` issue and the rest goes on. Any error from a folder listed ahead is
    /// set aside: the folder is asked again, and that answer's error reported, only if its parent names it.
    /// `paths` is the worker's own arena for the paths it lists (see `PathArena`).
    typealias Work = @Sendable (Job, CurlEasy, Scope, inout PathArena) throws -> Void

    /// Where one job's results go: straight into the walk, or, for a folder listed ahead, into a hold until its
    /// parent names it. Used by the one worker running the job.
    final class Scope {
        fileprivate let walk: ListingWalk
        /// What a folder listed ahead found, kept until its parent's listing confirms the folder.
        fileprivate var held: Held?

        fileprivate init(walk: ListingWalk, holding: Bool) {
            self.walk = walk
            held = holding ? Held() : nil
        }

        /// Queues a job: a subfolder to list or a file to complete.
        func push(_ job: Job) {
            if held != nil {
                held?.jobs.append(job)
            } else {
                walk.push(job)
            }
        }

        /// Adds entries and issues to the snapshot.
        func add(_ entries: [Entry], issues: [ListingIssue] = []) {
            if held != nil {
                held?.entries += entries
                held?.issues += issues
            } else {
                walk.add(entries, issues: issues)
            }
        }

        /// Whether workers should give up (a fatal error or cancellation); in-flight transfers poll it.
        var isStopped: Bool { walk.isStopped }
    }

    /// The results of a folder listed ahead of its parent.
    fileprivate struct Held {
        var entries: [Entry] = []
        var issues: [ListingIssue] = []
        var jobs: [Job] = []
    }

    /// Where a known folder listed ahead stands.
    private enum Ahead {
        /// Waiting in `known`, not started.
        case waiting
        /// Being listed; `confirmed` once its parent's listing has named it.
        case running(confirmed: Bool)
        /// Listed, held until its parent names it.
        case listed(Held)
        /// Its listing failed: asked again as any folder if its parent names it.
        case failed
    }

    private let condition = NSCondition()
    private var jobs: [Job] = []
    /// Known folders not yet started (or confirmed meanwhile and so moved to `jobs`, or a duplicate already
    /// started), taken after `jobs`: what is surely needed goes first.
    private var known: [RelativePath] = []
    private var ahead: [RelativePath: Ahead] = [:]
    /// Known folders listed ahead so far, and how many of those listings failed.
    private var aheadListed = 0
    private var aheadFailed = 0
    private var busy = 0
    private var builder = SnapshotBuilder()
    private var fatal: (any Error)?
    private var stopped = false
    private let workers: Workers
    private let work: Work
    /// Where each worker takes its handle from, and leaves it at the end with its connection alive.
    private let handles: IdleHandles
    private let group = DispatchGroup()
    /// Workers started so far.
    private var started = 0

    private init(workers: Workers, handles: IdleHandles, work: @escaping Work) {
        self.workers = workers
        self.handles = handles
        self.work = work
    }

    /// Lists from `root` with `workers`, and lists `known` folders ahead; returns everything the jobs added.
    /// Workers take their handles from `handles` when it has some, and leave them there at the end.
    static func run(workers: Workers, root: Job, known: [RelativePath] = [], handles: IdleHandles,
                    work: @escaping Work) async throws -> SnapshotBuilder {
        let walk = ListingWalk(workers: workers, handles: handles, work: work)
        // Why without the lock: no worker has started yet, and starting one (below, under the lock) publishes these.
        walk.jobs = [root]
        // Popped from the end: reversed, the known folders go in their listed order (a parent before its children).
        walk.known = known.filter { !$0.isRoot }.reversed()
        for folder in walk.known { walk.ahead[folder] = .waiting }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SnapshotBuilder, any Error>) in
                walk.condition.lock()
                walk.grow()
                walk.condition.unlock()
                // Why notify, not wait: the awaiting task must not block a cooperative thread.
                walk.group.notify(queue: DispatchQueue(label: "folio.http.list.done")) {
                    walk.condition.lock()
                    defer { walk.condition.unlock() }
                    if let fatal = walk.fatal {
                        continuation.resume(throwing: fatal)
                    } else {
                        continuation.resume(returning: walk.builder)
                    }
                }
            }
        } onCancel: {
            walk.stop(SourceError(.cancelled, "listing cancelled"))
        }
    }

    /// Whether workers should give up (a fatal error or cancellation); in-flight transfers poll it.
    var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    private func push(_ job: Job) {
        condition.lock()
        queue(job)
        grow()
        condition.broadcast()
        condition.unlock()
    }

    /// Starts workers for the jobs in sight: up to `Workers.near`, and up to `Workers.most` once the link shows
    /// far. Called with `condition` locked. Every job but the root's and `.rootDepthOne` (pushed before the
    /// root's request) is queued after a worker's request was answered, so the link is timed by then.
    private func grow() {
        guard !stopped else { return }
        let far = TargetConfig.isFar(roundTrip: workers.roundTrip())
        startWorkers(upTo: far ? workers.most : min(workers.near, workers.most))
    }

    /// Queues a job whose folder is confirmed (the root's, or one a confirmed listing named); a folder already
    /// listed ahead is taken from there instead of asked again. Called with `condition` locked.
    private func queue(_ job: Job) {
        guard case .folder(let folder) = job, let state = ahead[folder] else {
            jobs.append(job)
            return
        }
        switch state {
        case .waiting:
            // Left in `known`, where `pop` skips it now that it has no `ahead` state.
            ahead[folder] = nil
            jobs.append(job)
        case .running:
            ahead[folder] = .running(confirmed: true)
        case .listed(let held):
            ahead[folder] = nil
            take(held)
        case .failed:
            ahead[folder] = nil
            jobs.append(job)
        }
    }

    /// Adds a confirmed folder's held results, and queues what it found. Called with `condition` locked.
    private func take(_ held: Held) {
        for entry in held.entries { builder.append(entry) }
        builder.note(contentsOf: held.issues)
        for job in held.jobs { queue(job) }
    }

    /// Starts workers until `count` have started, or one for each job in sight (running, queued, or a known
    /// folder to list ahead); called with `condition` locked. Why no more: each worker is a thread and a
    /// connection to start, and on a busy machine starting idle ones delays the requests of the others.
    ///
    /// Why it can add to `group` after `notify`: the first workers start before it, and later ones only from a
    /// running worker (its `push` or `listedAhead`), so the group is never empty while workers are added.
    private func startWorkers(upTo count: Int) {
        let wanted = min(count, max(1, busy + jobs.count + known.count))
        while started < wanted {
            WorkerThread.start("folio-list-\(started)", in: group) { self.workerLoop() }
            started += 1
        }
    }

    private func add(_ entries: [Entry], issues: [ListingIssue]) {
        condition.lock()
        for entry in entries { builder.append(entry) }
        builder.note(contentsOf: issues)
        condition.unlock()
    }

    private func stop(_ error: any Error) {
        condition.lock()
        if fatal == nil { fatal = error }
        stopped = true
        condition.broadcast()
        condition.unlock()
    }

    private func workerLoop() {
        let easy: CurlEasy
        do {
            easy = try handles.take() ?? CurlEasy()
        } catch {
            stop(error)
            return
        }
        // Left for the downloads, connection and all, once this worker is done (see `IdleHandles`). Why only with
        // one: a worker that found no job sent no request, and its handle, taken by a download, would connect anew
        // while the listing's live connections waited below it.
        defer { if easy.keepsConnection { handles.put(easy) } }
        // Why one arena per worker, for the whole walk: a folder's listing holds a few dozen paths, and one block
        // each would leave most of it empty; one allocation per path cost 5 MB more at 100,000 files.
        var paths = PathArena()
        while let next = pop() {
            let (job, scope) = next
            do {
                try work(job, easy, scope, &paths)
                if scope.held != nil, case .folder(let folder) = job { listedAhead(folder, held: scope.held) }
            } catch {
                if scope.held != nil, case .folder(let folder) = job {
                    // Why no error here: nothing says the folder still exists until its parent names it; if it
                    // does, it is asked again, and that answer's error is the one reported.
                    listedAhead(folder, held: nil)
                } else {
                    fail(job, error)
                }
            }
            finished()
        }
    }

    private func fail(_ job: Job, _ error: any Error) {
        guard let error = error as? SourceError else { return stop(error) }
        switch job {
        case .folder(let path) where path.isRoot: stop(error)
        case .rootDepthOne: stop(error)
        // A server that answered with a status (a 503 or 429 that outlasted the retries) is reachable: that is
        // this folder's or file's failure, as a 500 is, not the run's.
        case _ where error.failsRun && error.underlying?.hasPrefix("HTTP ") != true: stop(error)
        case .folder(let path): add([], issues: [ListingIssue(path: path.description, kind: .unreadable(error.message))])
        case .head(let path): add([], issues: [ListingIssue(path: path.description, kind: .unreadableFile(error.message))])
        }
    }

    /// Files a known folder's listing (nil when it failed): taken now if its parent has named it meanwhile, else
    /// held.
    private func listedAhead(_ folder: RelativePath, held: Held?) {
        condition.lock()
        defer { condition.unlock() }
        aheadListed += 1
        let confirmed = if case .running(confirmed: true)? = ahead[folder] { true } else { false }
        if let held {
            if confirmed {
                ahead[folder] = nil
                take(held)
                grow()
            } else {
                ahead[folder] = .listed(held)
            }
        } else {
            aheadFailed += 1
            if confirmed {
                ahead[folder] = nil
                jobs.append(.folder(folder))
                grow()
            } else {
                ahead[folder] = .failed
            }
            // The tree moved on since the last run (most known folders are gone): stop guessing, so a reorganised
            // source costs a few wasted requests, not one per folder it used to have.
            if aheadFailed >= 8, aheadFailed * 2 > aheadListed { dropKnown() }
        }
        condition.broadcast()
    }

    /// Forgets the known folders not started yet (those already confirmed are in `jobs`). Called with
    /// `condition` locked.
    private func dropKnown() {
        for folder in known {
            if case .waiting? = ahead[folder] { ahead[folder] = nil }
        }
        known = []
    }

    /// The next job and where its results go, or nil when the walk is over.
    private func pop() -> (Job, Scope)? {
        condition.lock()
        defer { condition.unlock() }
        while true {
            // Known folders confirmed meanwhile are no longer waiting here (they are in `jobs`).
            while let last = known.last, !isWaiting(last) { known.removeLast() }
            if !stopped, !jobs.isEmpty || !known.isEmpty { break }
            if stopped || busy == 0 {
                condition.broadcast()
                return nil
            }
            condition.wait()
        }
        busy += 1
        // Depth first (last in, first out) keeps the queue short on wide trees.
        if let job = jobs.popLast() { return (job, Scope(walk: self, holding: false)) }
        let folder = known.removeLast()
        ahead[folder] = .running(confirmed: false)
        return (.folder(folder), Scope(walk: self, holding: true))
    }

    private func isWaiting(_ folder: RelativePath) -> Bool {
        if case .waiting? = ahead[folder] { true } else { false }
    }

    private func finished() {
        condition.lock()
        busy -= 1
        // Why on every last finish: cheap, and a waiting worker needs only to see `busy == 0` to end.
        if busy == 0 { condition.broadcast() }
        condition.unlock()
    }
}
