import Dispatch
import FolioCore
import Glibc
import Synchronization

/// Cuts short the blocking socket work of one source's run when the run is stopped (Ctrl-C, SIGTERM): the
/// sockets of sessions still logging in, and of the listing's sessions, are shut down, so libssh2's blocking
/// call returns at once instead of waiting out `timeout` for a server that does not answer.
///
/// Sockets are watched only while such work runs on them. A download's transfer is given `transferGrace` first:
/// it stops between chunks, as every source's does, and is cut only when its server keeps it waiting longer.
final class SocketInterrupter: Sendable {
    private struct State {
        var interrupted = false
        var sockets: Set<Int32> = []
        /// Sockets of transfers, cut `transferGrace` after the stop if still watched then.
        var transfers: Set<Int32> = []
        /// Interrupters that a stop of this one stops too (`child`).
        var children: [SocketInterrupter] = []
    }

    /// How long a transfer in flight has to reach the end of its chunk after a stop. Why 2 s: a chunk (1 MiB at
    /// most) takes a fraction of that on any working link, so only a stalled server (a NAS gone from the Wi-Fi) is
    /// cut, instead of holding the stop for the whole `timeout`.
    static let transferGrace = DispatchTimeInterval.seconds(2)

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

    /// Watches the socket of a transfer, which a stop cuts only after `transferGrace`; false, and not watched,
    /// when the run was stopped already.
    func watchTransfer(_ socket: Int32) -> Bool {
        state.withLock { state in
            guard !state.interrupted else { return false }
            state.transfers.insert(socket)
            return true
        }
    }

    /// Stops watching `socket` (as either kind). Call it before the socket is closed.
    func unwatch(_ socket: Int32) {
        state.withLock { state in
            state.sockets.remove(socket)
            state.transfers.remove(socket)
        }
    }

    /// An interrupter that this one's `interrupt` stops too, and that can be stopped alone: for work that may be
    /// given up on its own (a log-in started ahead that no listing took).
    func child() -> SocketInterrupter {
        let child = SocketInterrupter()
        let stopped = state.withLock { state in
            if !state.interrupted { state.children.append(child) }
            return state.interrupted
        }
        if stopped { child.interrupt() }
        return child
    }

    /// Shuts down every watched socket but the transfers' at once, and those still watched `transferGrace` later;
    /// refuses to watch any more. Stops the children too.
    func interrupt() {
        // Why under the lock: an owner unwatches its socket before closing it, and unwatching waits for this
        // lock, so a descriptor is never shut down after it was closed and reused for another file or connection.
        let (first, children) = state.withLock { state in
            defer { state.interrupted = true }
            for socket in state.sockets { _ = Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
            return (!state.interrupted, state.children)
        }
        guard first else { return }
        // Why outside the lock: a child takes its own, and never this one's.
        for child in children { child.interrupt() }
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.transferGrace) { [self] in
            state.withLock { state in
                for socket in state.transfers { _ = Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
            }
        }
    }

    /// `error`, or the stop's own error when the run was stopped: what failed was cut by the stop. An error that is
    /// already the stop's keeps its own words.
    func stopOr(_ error: SourceError, doing action: String) -> SourceError {
        isInterrupted && error.code != .cancelled ? SourceError(.cancelled, "stopped while \(action)") : error
    }
}
