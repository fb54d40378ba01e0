import FolioCore
import Foundation

/// Lists a tree with several worker threads, each owning one `CurlEasy` (one keep-alive connection), so many
/// folders (and HEAD requests) are in flight at once.
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

    private init() {}

    /// Lists from `root` with `threads` workers; returns everything the jobs added.
    static func run(threads: Int, root: Job, work: @escaping Work) async throws -> SnapshotBuilder {
        let walk = ListingWalk()
        walk.jobs = [root]
        let group = DispatchGroup()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<SnapshotBuilder, any Error>) in
                for index in 0..<max(1, threads) {
                    DispatchQueue(label: "folio.http.list.\(index)").async(group: group) { walk.workerLoop(work) }
                }
                // Why notify, not wait: the awaiting task must not block a cooperative thread.
                group.notify(queue: DispatchQueue(label: "folio.http.list.done")) {
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
        condition.signal()
        condition.unlock()
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

    private func workerLoop(_ work: Work) {
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
