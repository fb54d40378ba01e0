import Synchronization

/// Why the server's SFTP subsystem is known not to start (it ended before it answered), shared by every session
/// to the server, so that each one fails at once with that line instead of waiting out libssh2's timeout.
final class EndedSubsystem: Sendable {
    // Why a Mutex: every listing and download session of a source may find it, and each asks before starting SFTP.
    private let found = Mutex<LibSSH2Error?>(nil)

    /// The subsystem's error (LIBSSH2_ERROR_CHANNEL_CLOSED, with its exit status), once a session found it.
    var error: LibSSH2Error? { found.withLock { $0 } }

    func note(_ error: LibSSH2Error) { found.withLock { $0 = error } }
}
