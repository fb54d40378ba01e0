import FolioCore
import Glibc
import Synchronization

/// Cuts short the blocking socket work of one source's run when the run is stopped (Ctrl-C, SIGTERM): the
/// sockets of sessions still logging in, and of the listing's sessions, are shut down, so libssh2's blocking
/// call returns at once instead of waiting out `timeout` for a server that does not answer.
///
/// Sockets are watched only while such work runs on them. A download worker's session is watched while it
/// logs in and not after: its transfer stops between chunks, as every source's does.
final class SocketInterrupter: Sendable {
    private struct State {
        var interrupted = false
        var sockets: Set<Int32> = []
    }

    // Why a Mutex: the run's stop calls `interrupt` from any thread while sessions' queues and download worker
    // threads watch and unwatch their sockets.
    private let state = Mutex(State())

    /// Whether `interrupt` was called: the errors of the work it cut are a stop, not a failure.
    var isInterrupted: Bool { state.withLock { $0.interrupted } }

    /// Shuts `socket` down if the run is stopped while it is watched; false, and not watched, when it was stopped
    /// already (the caller then gives up before it blocks).
    func watch(_ socket: Int32) -> Bool {
        state.withLock { state in
            guard !state.interrupted else { return false }
            state.sockets.insert(socket)
            return true
        }
    }

    /// Stops watching `socket`. Call it before the socket is closed.
    func unwatch(_ socket: Int32) {
        _ = state.withLock { $0.sockets.remove(socket) }
    }

    /// Shuts down every watched socket, and refuses to watch any more.
    func interrupt() {
        // Why under the lock: an owner unwatches its socket before closing it, and unwatching waits for this
        // lock, so a descriptor is never shut down after it was closed and reused for another file or connection.
        state.withLock { state in
            state.interrupted = true
            for socket in state.sockets { _ = Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
        }
    }

    /// `error`, or the stop's own error when the run was stopped: what failed was cut by the stop. An error that is
    /// already the stop's keeps its own words.
    func stopOr(_ error: SourceError, doing action: String) -> SourceError {
        isInterrupted && error.code != .cancelled ? SourceError(.cancelled, "stopped while \(action)", isRetryable: true) : error
    }
}
