import Dispatch
import FolioCore

/// One SSH session bound to its own serial queue; async code reaches the session only through `run`.
///
/// The session opens lazily on the first `run`, on the queue, so handshakes never block the cooperative pool. A
/// stop of the run cuts the session's log-in and work short (see `SocketInterrupter`).
final class SessionWorker: @unchecked Sendable {
    // Why @unchecked Sendable: `session` is read and written only inside blocks on `queue`, which is serial, so
    // the libssh2 handles it owns are touched by one thread at a time.
    private let queue: DispatchQueue
    private let endpoint: SFTPEndpoint
    private var session: SSHSession?
    /// Why the log-in `openAhead` started failed, for the first `run` to throw.
    private var failedLogIn: SourceError?

    init(endpoint: SFTPEndpoint, label: String) {
        self.endpoint = endpoint
        queue = DispatchQueue(label: "folio.sftp.\(label)")
    }

    /// Starts opening the session now, on the queue, and returns at once; the first `run` waits for it. A log-in
    /// that fails is not tried again: that `run` throws its error.
    func openAhead() {
        queue.async {
            guard self.session == nil else { return }
            do throws(SourceError) { self.session = try SSHSession.open(self.endpoint) } catch { self.failedLogIn = error }
        }
    }

    /// Runs blocking work with the session on the worker's queue and resumes the caller with its result.
    func run<T: Sendable>(_ body: @escaping @Sendable (SSHSession) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do {
                    if let failure = self.failedLogIn {
                        self.failedLogIn = nil
                        throw failure
                    }
                    let session = try self.session ?? SSHSession.open(self.endpoint)
                    self.session = session
                    continuation.resume(returning: try session.interruptibly(doing: "listing \(session.endpoint.url())") { try body(session) })
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    /// Hands the open session (if any) to `pool` for a download worker, after any work already queued.
    func park(in pool: IdleSessions) async { await release { pool.put($0) } }

    /// Closes the session on its queue, after any work already queued, and returns once it is closed. Why wait:
    /// a close still running when the run ends could outlive the process's exit, and libssh2 would then use
    /// OpenSSL after its exit handler freed it.
    func close() async { await release { $0.close() } }

    /// Gives up the open session (if any) to `body`, on the queue, and returns once that is done.
    private func release(_ body: @escaping @Sendable (SSHSession) -> Void) async {
        await withCheckedContinuation { continuation in
            queue.async {
                if let session = self.session { body(session) }
                self.session = nil
                continuation.resume()
            }
        }
    }
}
