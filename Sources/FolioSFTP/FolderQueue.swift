import Synchronization

/// The folders of one breadth-first level, handed out one at a time to whichever session is free.
final class FolderQueue: Sendable {
    private let jobs: [FolderJob]
    // Why a Mutex: several session queues take jobs at once.
    private let nextIndex = Mutex(0)

    init(_ jobs: [FolderJob]) { self.jobs = jobs }

    func next() -> FolderJob? {
        let index = nextIndex.withLock { value in
            defer { value += 1 }
            return value
        }
        return index < jobs.count ? jobs[index] : nil
    }
}
