import Foundation

/// The curl handles a listing has finished with, each holding its live connection to the server, for the
/// downloads (or a second listing) to take instead of connecting again.
///
/// Why: a download worker that opens a connection of its own pays TCP's handshake (and TLS's) before its first
/// file, a round trip or more, while the listing's connections to the same server sat idle; and closing those,
/// eleven at the end of a 500-file listing, was 2-3 ms of every WebDAV run's critical path. A connection the
/// server has closed meanwhile (its keep-alive timeout) is found dead by libcurl when taken, which connects again.
/// `closeAll` (the source's `finishRun`) closes what is left, so no connection outlives the run.
final class IdleHandles: @unchecked Sendable {
    // Why @unchecked: `handles` is read and written only while `lock` is held, and a handle put here is no longer
    // used by the thread that put it: the lock orders one thread's last use before the next one's first, which is
    // libcurl's rule (one thread at a time per handle).
    private let lock = NSLock()
    private var handles: [CurlEasy] = []

    /// Keeps `handle`, whose thread is done with it.
    func put(_ handle: CurlEasy) {
        lock.withLock { handles.append(handle) }
    }

    /// A handle whose connection may still be alive, or nil when none is left.
    func take() -> CurlEasy? {
        lock.withLock { handles.popLast() }
    }

    /// Closes every handle left (their connections with them), on the calling thread: blocking, so off the
    /// cooperative pool.
    func closeAll() {
        let closing = lock.withLock {
            defer { handles = [] }
            return handles
        }
        withExtendedLifetime(closing) {}
    }
}
