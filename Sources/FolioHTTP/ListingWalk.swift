import FolioCore
import Foundation

/// Lists a tree with several worker threads, each owning one `CurlEasy` (one keep-alive connection), so many
/// folders (and HEAD requests) are in flight at once: `Workers.near` of them from the start, and `Workers.most`
/// once a request has shown the link far.
///
/// Workers run on their own serial DispatchQueues, never on the cooperative pool: libcurl blocks. The walk
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

    /// What a job does; `walk` takes its results. A thrown `SourceError` fails the whole listing when it is
    /// about the root or when it fails the run (server unreachable, credentials refused); otherwise the
    /// folder or file becomes an `.unreadable` issue and the rest goes on.
    typealias Work = @Sendable (Job, CurlEasy, ListingWalk) throws -> Void

    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var busy = 0
    private var builder = SnapshotBuilder()
    private var fatal: (any Error)?
    private var stopped = false
    private let workers: Workers
    private let work: Work
    private let group = DispatchGroup()
    /// Workers started so far.
    private var started = 0

    private init(workers: Workers, work: @escaping Work) {
        self.workers = workers
        self.work = work
    }

    /// Lists from `root` with `workers`; returns everything the jobs added.
    static func run(workers: Workers, root: Job, work: @escaping Work) async throws -> SnapshotBuilder {
        let walk = ListingWalk(workers: workers, work: work)
        walk.jobs = [root]
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SnapshotBuilder, any Error>) in
                walk.condition.lock()
                walk.startWorkers(upTo: min(workers.near, workers.most))
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
            walk.stop(SourceError(.cancelled, "listing cancelled", isRetryable: true))
        }
    }

    /// Whether workers should give up (a fatal error or cancellation); in-flight transfers poll it.
    var isStopped: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopped
    }

    func push(_ job: Job) {
        condition.lock()
        jobs.append(job)
        // Every job but `.rootDepthOne` (pushed before the root's request) is pushed by a worker whose request
        // was answered, so the link is timed by then: if it is far, the rest of the workers start.
        if !stopped, started < workers.most, TargetConfig.isFar(roundTrip: workers.roundTrip()) {
            startWorkers(upTo: workers.most)
        }
        condition.signal()
        condition.unlock()
    }

    /// Starts workers until `count` have started; called with `condition` locked. Why it can add to `group`
    /// after `notify`: the first workers start before it, and later ones only from a running worker's `push`,
    /// so the group is never empty while workers are added.
    private func startWorkers(upTo count: Int) {
        while started < max(1, count) {
            DispatchQueue(label: "folio.http.list.\(started)").async(group: group) { self.workerLoop() }
            started += 1
        }
    }

    func add(_ entries: [Entry], issues: [ListingIssue] = []) {
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
            easy = try CurlEasy()
        } catch {
            stop(error)
            return
        }
        while let job = pop() {
            do {
                try work(job, easy, self)
            } catch let error as SourceError {
                switch job {
                case .folder(let path) where path.isRoot: stop(error)
                case .rootDepthOne: stop(error)
                case _ where error.failsRun: stop(error)
                case .folder(let path), .head(let path): add([], issues: [ListingIssue(path: path.description, kind: .unreadable(error.message))])
                }
            } catch {
                stop(error)
            }
            finished()
        }
    }

    private func pop() -> Job? {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty || stopped {
            if stopped || busy == 0 {
                condition.broadcast()
                return nil
            }
            condition.wait()
        }
        busy += 1
        // Depth first (last in, first out) keeps the queue short on wide trees.
        return jobs.removeLast()
    }

    private func finished() {
        condition.lock()
        busy -= 1
        if busy == 0 && jobs.isEmpty { condition.broadcast() }
        condition.unlock()
    }
}
