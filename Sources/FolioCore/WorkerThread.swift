import CFolioSys
import Dispatch
import Foundation

/// Starts a worker that blocks (on a connection, the disk) on a thread of its own.
///
/// Why not `DispatchQueue(label:).async`: libdispatch gives each newly busy queue its thread only from the
/// previous new thread, one after another, so on a busy machine the 11th of 11 listing workers sent its request
/// 3.5-4.5 ms after the first (bpftrace, a no-change WebDAV run over a 20 ms link); threads started here all run
/// at once (1.2-2 ms from the first request to the 11th). A worker still owns its connection on one thread.
public enum WorkerThread {
    /// Runs `body` on a new thread named `name` (as `top -H` and `perf` show it: Linux keeps its first 15
    /// bytes), counted in `group` until it returns.
    public static func start(_ name: String, in group: DispatchGroup, _ body: @escaping @Sendable () -> Void) {
        group.enter()
        let thread = Thread {
            // Why here, not `Thread.name` before `start`: on Linux that names the Foundation object only, and
            // the thread kept its creator's name.
            _ = folio_name_this_thread(String(decoding: name.utf8.prefix(15), as: UTF8.self))
            body()
            group.leave()
        }
        thread.start()
    }
}
