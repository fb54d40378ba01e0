import Foundation

/// The shared queue of folders for the walker threads.
///
/// A thread reading a folder keeps its subfolders to itself (depth first, few open descriptors) unless another
/// thread is idle, in which case it hands one over. The walk ends when the queue is empty and no thread is busy.
final class WalkScheduler: @unchecked Sendable {
    // Why @unchecked: every stored property is read and written only while `condition` is locked.
    private let condition = NSCondition()
    private var jobs: [WalkJob] = []
    private var busy = 0
    private var idle = 0
    private let threads: Int

    init(threads: Int) { self.threads = threads }

    func push(_ job: WalkJob) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Whether a thread should hand a subfolder over rather than read it itself.
    func shouldShare() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return idle > 0 && jobs.count < threads
    }

    /// The next folder to read, or nil when the walk is over.
    func pop() -> WalkJob? {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty {
            if busy == 0 {
                condition.broadcast()
                return nil
            }
            idle += 1
            condition.wait()
            idle -= 1
        }
        busy += 1
        return jobs.removeLast()
    }

    func finished() {
        condition.lock()
        busy -= 1
        if busy == 0 && jobs.isEmpty { condition.broadcast() }
        condition.unlock()
    }
}
