import Synchronization

/// What Folio's own SFTP channel (`SFTPPipe`) found wrong with the server's SFTP subsystem, shared by every
/// session to the server.
final class SubsystemFaults: Sendable {
    // Why a Mutex: every listing and download session of a source may find a fault, and each asks before it
    // starts SFTP.
    private let found = Mutex<(ended: LibSSH2Error?, text: LibSSH2Error?)>((nil, nil))
    private let worked = Atomic<Bool>(false)

    /// Whether SFTP started on some session to the server: a session that then cannot start it was refused
    /// (the server caps this user's connections), and the subsystem is there.
    var hasStarted: Bool { worked.load(ordering: .relaxed) }

    func noteStarted() { worked.store(true, ordering: .relaxed) }

    /// The subsystem ended before it answered (LIBSSH2_ERROR_CHANNEL_CLOSED, with its exit status): every
    /// session then fails at once with this line, instead of waiting out libssh2's timeout.
    var ended: LibSSH2Error? { found.withLock { $0.ended } }

    /// The subsystem sent text before SFTP (a shell start-up file that prints): the reason libssh2's start of
    /// SFTP, which reads the same bytes, fails too.
    var text: LibSSH2Error? { found.withLock { $0.text } }

    func noteEnded(_ error: LibSSH2Error) { found.withLock { $0.ended = error } }

    func noteText(_ error: LibSSH2Error) { found.withLock { $0.text = error } }
}
