import Dispatch
import Foundation
import Synchronization

/// Batches finished files into the state database from the download workers.
///
/// Why a batch: one transaction per file would cost an fsync per file. Why this bounds the loss: a batch is
/// written at 256 files or after a second, so `kill -9` forgets at most that much — and a forgotten file that is
/// already in place is adopted (same size and mtime) by the next run, not fetched again.
final class StateCommitter: Sendable {
    private let store: any StateStore
    private let target: String
    /// The run whose changes are kept for the target's `on-change` hook; nil when it has none (or a dry run).
    private let hookRun: Int64?
    /// One writer: every database write of a run goes through this serial queue.
    private let writer = DispatchQueue(label: "folio.state.writer")
    // Why Mutexes: the download workers add records from their own threads while the writer queue takes them.
    private let pending = Mutex<Pending>(Pending())
    private let failure = Mutex<String?>(nil)

    private struct Pending {
        var upserts: [RecordedEntry] = []
        var removedSubtrees: [RelativePath] = []
        var lastWrite = Date()
    }

    init(store: any StateStore, target: String, hookRun: Int64?) {
        self.store = store
        self.target = target
        self.hookRun = hookRun
    }

    /// The first write error, if any: the run then fails, since its record could not be kept.
    var error: String? { failure.withLock { $0 } }

    func add(_ record: RecordedEntry) {
        let batch: Pending? = pending.withLock { state in
            state.upserts.append(record)
            guard state.upserts.count >= 256 || Date().timeIntervalSince(state.lastWrite) >= 1 else { return nil }
            defer { state = Pending() }
            return state
        }
        if let batch { writer.async { self.write(batch) } }
    }

    func forget(_ path: RelativePath) {
        pending.withLock { $0.removedSubtrees.append(path) }
    }

    /// Keeps `paths` for the target's hook, if it has one, and waits until they are on disk: call it before
    /// changing them. Blocking. Returns nil once they are kept (or the target has no hook), else why not: the
    /// caller then leaves those files as they are (a change the hook may never hear of is not made), and the
    /// run fails, as it does when a commit fails.
    func keepForHook(_ paths: [RelativePath]) -> String? {
        guard let hookRun, !paths.isEmpty else { return nil }
        // Why not try again after a write failed: the run fails anyway, and a database locked for 30 s would make
        // each later batch wait that long too, and the downloads behind it.
        if let earlier = failure.withLock({ $0 }) { return Self.heldBack(because: earlier) }
        // Why on the writer: one writer for the run's every database write.
        return writer.sync {
            do {
                try store.keepChangesForHook(run: hookRun, target: target, paths: paths)
                return nil
            } catch {
                let message = "cannot write the state database: \(error)"
                failure.withLock { if $0 == nil { $0 = message } }
                return Self.heldBack(because: message)
            }
        }
    }

    private static func heldBack(because reason: String) -> String {
        "left as it was: its path could not be kept for the on-change hook (\(reason))"
    }

    /// Writes everything pending and waits for it. Blocking: call it off the cooperative pool.
    func flush() {
        let batch = pending.withLock { state in
            defer { state = Pending() }
            return state
        }
        writer.sync { self.write(batch) }
    }

    private func write(_ batch: Pending) {
        guard !batch.upserts.isEmpty || !batch.removedSubtrees.isEmpty else { return }
        do {
            try store.commit(target: target, upserts: batch.upserts, removedSubtrees: batch.removedSubtrees)
        } catch {
            failure.withLock { if $0 == nil { $0 = "cannot write the state database: \(error)" } }
        }
    }
}
