import Synchronization

/// The listing's first session while it logs in ahead of the listing (`Source.prepare`), until the listing takes
/// it. Why: an SSH log-in is six round trips or more, and started before the run's own set-up (opening the state
/// database, taking the destination's lock, recording the run's start, the destination's folders, the last
/// listing's memo) it is that much further on when the listing needs it.
final class LogInAhead: Sendable {
    // Why a Mutex: `start` runs on the caller's thread, the listing takes the worker from the cooperative pool,
    // and `closeUntaken` may run from either once the run is over.
    private let waiting = Mutex<(worker: SessionWorker, stop: SocketInterrupter)?>(nil)

    /// Starts logging in a session for the next listing, unless one is already waiting.
    func start(_ endpoint: SFTPEndpoint) {
        waiting.withLock { waiting in
            guard waiting == nil else { return }
            // Why an interrupter of its own: a run that ends before its listing cuts this log-in alone, at once,
            // rather than waiting for a slow server to answer it. The source's stop still reaches it (a child).
            var ahead = endpoint
            ahead.interrupter = endpoint.interrupter.child()
            let worker = SessionWorker(endpoint: ahead, label: "list0")
            worker.openAhead()
            waiting = (worker, ahead.interrupter)
        }
    }

    /// The session started ahead, if one is waiting; the caller now owns it (and closes or parks it).
    func take() -> SessionWorker? { waiting.withLock { $0.take()?.worker } }

    /// Cuts the log-in of a session that no listing took (a run that ended before listing, or one that waits for
    /// the lock), and closes it. Returns once it is closed: at once, but for a log-in still resolving the server's
    /// name, which nothing can cut (`getaddrinfo`), as for a stop during any log-in.
    func closeUntaken() async {
        guard let (worker, stop) = waiting.withLock({ $0.take() }) else { return }
        stop.interrupt()
        await worker.close()
    }
}
