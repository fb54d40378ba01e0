import Dispatch
import FolioCore
import Synchronization

/// Listing sessions kept open after a snapshot for the first download workers, so they skip a handshake.
///
/// A session here belongs to no queue: the pool hands each one to exactly one worker, which then uses it on
/// its own thread only. Sessions idle longer than `maximumIdle` are closed instead of handed out.
final class IdleSessions: Sendable {
    /// Why @unchecked Sendable: the box moves a session between owners; it is never used while inside the pool.
    private struct Parked: @unchecked Sendable {
        let session: SSHSession
        let since: ContinuousClock.Instant
    }

    static let maximumIdle = Duration.seconds(20)
    /// How long a parked session is trusted without a check. Why: downloads usually start a few milliseconds
    /// after the listing parked its sessions, and a check costs a round trip (and, on a session that only ran
    /// exec, starting SFTP: three more); a session that died that soon fails its first file like any dropped
    /// connection, and the worker reconnects.
    static let trustedIdle = Duration.seconds(2)
    private let capacity: Int
    // Why a Mutex: the listing parks sessions from its queues while download worker threads take them.
    private let parked = Mutex<[Parked]>([])

    init(capacity: Int) { self.capacity = capacity }

    /// Parks a healthy session; closes it when the pool is full.
    func put(_ session: SSHSession) {
        let kept = parked.withLock { list -> Bool in
            guard list.count < capacity else { return false }
            list.append(Parked(session: session, since: .now))
            return true
        }
        if !kept { session.close() }
    }

    /// A parked session, checked with one SFTP request when it has been idle a while, or nil; stale ones are
    /// closed.
    func take() -> SSHSession? {
        while let candidate = parked.withLock({ $0.popLast() }) {
            let session = candidate.session
            let idle = ContinuousClock.now - candidate.since
            if idle < Self.trustedIdle || (idle < Self.maximumIdle && (try? session.realpath(session.endpoint.remotePath(.root))) != nil) {
                return session
            }
            session.close()
        }
        return nil
    }

    /// Closes every parked session (blocking: a hang-up is sent on each), all at once. Why at once: a session
    /// the listing parked holds its last folder open, whose close waits for the server's answer (libssh2 frees the
    /// handle only then), so one after another they cost a round trip each: 8 sessions over 20 ms, 160 ms.
    func closeAll() {
        let sessions = parked.withLock { list in defer { list.removeAll() }; return list }
        // Why concurrently is safe: each session is libssh2's own, and none is used by anyone else once out of
        // the pool.
        DispatchQueue.concurrentPerform(iterations: sessions.count) { sessions[$0].session.close() }
    }

    deinit { closeAll() }
}
