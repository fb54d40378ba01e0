import FolioCore
import Foundation
import Glibc

/// One authenticated SSH connection, with an SFTP channel started on first use.
///
/// Not Sendable: libssh2 handles must be used by one thread at a time, so a session is used by one owner at a
/// time: a `SessionWorker`'s serial queue, or a download worker's thread (handed over through `IdleSessions`).
final class SSHSession {
    let endpoint: SFTPEndpoint
    private let session: OpaquePointer
    private let socket: Int32
    /// The SFTP channel once started (see `sftpChannel`).
    private var sftp: OpaquePointer?
    /// A command the listing started that waits for input (see `keepWaiting`).
    private var waiting: ExecChannel?
    /// A file read to its end and checked, or a folder read to its end, whose close goes out with the next open
    /// (see `closeLater`).
    private var unclosed: OpaquePointer?
    /// The raw SFTP channel batches of small files go through (see `pipe()`).
    private var startedPipe: SFTPPipe?
    /// The folder `listFolder` opened ahead, with the handle or why it could not be opened (see `listFolder`).
    private var openedAhead: (path: [UInt8], handle: Result<OpaquePointer, LibSSH2Error>)?
    private var isClosed = false

    private init(endpoint: SFTPEndpoint, session: OpaquePointer, socket: Int32) {
        self.endpoint = endpoint
        self.session = session
        self.socket = socket
    }

    /// Connects, checks the host key against known_hosts and authenticates. Blocks; a stop of the run (see
    /// `SocketInterrupter`) ends it at once, with a `.cancelled` error.
    static func open(_ endpoint: SFTPEndpoint) throws(SourceError) -> SSHSession {
        let interrupter = endpoint.interrupter
        do {
            return try HandshakeGate.withSlot { () throws(SourceError) -> SSHSession in
                let knownHosts = HostKeyTrust.knownHostsLines(endpoint.knownHostsPath, host: endpoint.host, port: endpoint.port)
                let (session, socket) = try handshake(host: endpoint.host, port: endpoint.port, timeoutSeconds: endpoint.timeoutSeconds,
                                                      knownHosts: knownHosts, display: endpoint.url(), interrupter: interrupter)
                do throws(SourceError) {
                    try verifyHostKey(session, endpoint, knownHosts: knownHosts)
                    try SSHAuthenticator(session: session, endpoint: endpoint).authenticate()
                    LibSSH2.keepaliveOnceAfterLogin(session)
                    // Logged in: from here the session is watched only while the listing uses it (`interruptibly`).
                    interrupter.unwatch(socket)
                    return SSHSession(endpoint: endpoint, session: session, socket: socket)
                } catch {
                    interrupter.unwatch(socket)
                    LibSSH2.end(session, socket: socket)
                    throw error
                }
            }
        } catch {
            throw interrupter.stopOr(error, doing: "logging in to \(endpoint.hostURL)")
        }
    }

    /// TCP connect and SSH key exchange, asking first for a host key of a type the `knownHosts` lines list for this
    /// host and port; the caller owns (and must free) the returned session and socket. With an `interrupter`, the
    /// socket is watched from before it connects, and the caller unwatches it before closing it.
    static func handshake(host: String, port: Int, timeoutSeconds: Int, knownHosts: [String], display: String,
                          interrupter: SocketInterrupter? = nil) throws(SourceError) -> (OpaquePointer, Int32) {
        try LibSSH2.initialize()
        let socket = try TCPSocket.connect(host: host, port: port, timeoutSeconds: timeoutSeconds, display: display, interrupter: interrupter)
        // Why unwatch first: a socket closed while still watched could be shut down after its number was reused.
        func closeSocket() {
            interrupter?.unwatch(socket)
            Glibc.close(socket)
        }
        let session: OpaquePointer
        do {
            session = try LibSSH2.makeSession(timeoutMilliseconds: timeoutSeconds * 1000)
        } catch {
            closeSocket()
            throw SourceError(.localIO, "cannot create an SSH session for \(display)", underlying: error.description)
        }
        do {
            try LibSSH2.preferKnownHostKeyTypes(session, lines: knownHosts, names: HostKeyTrust.knownHostsNames(host: host, port: port))
        } catch {
            LibSSH2.free(session)
            closeSocket()
            throw SourceError(.localIO, "cannot choose the host key types to ask \(display) for", underlying: error.description)
        }
        do {
            try LibSSH2.handshake(session, socket: socket)
        } catch {
            let bannerCame = LibSSH2.serverBanner(session) != nil
            interrupter?.unwatch(socket)
            LibSSH2.end(session, socket: socket)
            // A stop cut it: no second connection to ask the server why.
            if let interrupter, interrupter.isInterrupted {
                throw SourceError(.cancelled, "stopped during the SSH handshake with \(display)")
            }
            if error.isKeyExchangeFailure {
                throw keyExchangeFailure(error, host: host, port: port, timeoutSeconds: timeoutSeconds, display: display, interrupter: interrupter)
            }
            // Why the banner decides: a connection lost before it is most often not an SSH server, or one turning
            // connections away (MaxStartups); once it came, the server is SSH and the exchange was cut. libssh2
            // reports some cuts in the exchange as its generic socket error.
            if bannerCame && (error.isConnectionLoss || error.isGenericSocketError) {
                throw lostDuringKeyExchange(error, display: display)
            }
            throw SourceError(.unreachable, "\(display): the SSH handshake failed (\(error.message.isEmpty ? LibSSH2Error.name(of: error.code) : error.message)); check that this port is an SSH server and reachable",
                              underlying: error.description)
        }
        return (session, socket)
    }

    /// Why a key exchange failed: the lists the server shares no algorithm of with libssh2, read from the server
    /// on a second connection (see `ServerAlgorithms`), or else a connection lost during the exchange.
    private static func keyExchangeFailure(_ error: LibSSH2Error, host: String, port: Int, timeoutSeconds: Int, display: String,
                                           interrupter: SocketInterrupter?) -> SourceError {
        if let offer = ServerAlgorithms.read(host: host, port: port, timeoutSeconds: timeoutSeconds, display: display, interrupter: interrupter),
           let line = offer.unsharedLine(display: display, libssh2Version: LibSSH2.version, supported: LibSSH2.supportedAlgorithms) {
            return SourceError(.protocolViolation, line, underlying: error.description)
        }
        return lostDuringKeyExchange(error, display: display)
    }

    private static func lostDuringKeyExchange(_ error: LibSSH2Error, display: String) -> SourceError {
        SourceError(.unreachable, "\(display): lost the connection during the SSH key exchange (\(LibSSH2Error.name(of: error.code))); check the network and the server, then run again",
                    underlying: error.description)
    }

    /// Strict host key checking: only a key listed for this host and port in known_hosts is accepted.
    private static func verifyHostKey(_ session: OpaquePointer, _ endpoint: SFTPEndpoint, knownHosts: [String]) throws(SourceError) {
        let key = try HostKeyTrust.describe(session, host: endpoint.host, port: endpoint.port)
        if HostKeyTrust.isRevoked(key.raw, lines: knownHosts) {
            throw SourceError(.authentication, "REVOKED HOST KEY: \(endpoint.hostURL) offers \(key.info.keyType) \(key.info.fingerprint), which \(endpoint.knownHostsPath) marks @revoked; refusing to connect; the server needs a new host key, which you then trust with: \(trustCommand(endpoint))")
        }
        let result: LibSSH2.KnownHostResult
        do {
            result = try LibSSH2.checkKnownHosts(session, lines: knownHosts, names: HostKeyTrust.knownHostsNames(host: endpoint.host, port: endpoint.port),
                                                 key: key.raw, keyType: key.rawType)
        } catch {
            throw SourceError(.authentication, "cannot check the host key of \(endpoint.hostURL) against \(endpoint.knownHostsPath)", underlying: error.description)
        }
        switch result {
        case .match:
            return
        case .notFound:
            if HostKeyTrust.isFolder(endpoint.knownHostsPath) {
                throw SourceError(.authentication, "known-hosts \(endpoint.knownHostsPath) is a folder, not a known_hosts file; give the file's path (such as \(endpoint.knownHostsPath)/known_hosts)")
            }
            if let reason = HostKeyTrust.unreadableReason(endpoint.knownHostsPath) {
                throw SourceError(.authentication, "cannot read \(endpoint.knownHostsPath) (\(reason)) to check the host key of \(endpoint.hostURL); make it readable by \(SFTPEndpoint.currentUser.name)")
            }
            // Why say when the file is not there: a mistyped --known-hosts path otherwise reads as an unknown host,
            // and trusting it writes a new file at the typo.
            let missing = access(endpoint.knownHostsPath, F_OK) != 0 ? ", which does not exist yet" : ""
            throw SourceError(.authentication, "\(endpoint.hostURL) is not a known host (\(key.info.keyType) key \(key.info.fingerprint) is not in \(endpoint.knownHostsPath)\(missing)); if that fingerprint is right, run: \(trustCommand(endpoint))")
        case .mismatch:
            throw SourceError(.authentication, "HOST KEY CHANGED for \(endpoint.hostURL): it now offers \(key.info.keyType) \(key.info.fingerprint), which does not match \(endpoint.knownHostsPath); refusing to connect (possible man-in-the-middle); if the server was reinstalled, remove its old line from that file (ssh-keygen -R '\(HostKeyTrust.knownHostsName(host: endpoint.host, port: endpoint.port))' -f \(endpoint.knownHostsPath)) and run: \(trustCommand(endpoint))")
        }
    }

    /// The `folio trust` command for this server, naming the known_hosts file when it is not the default one.
    private static func trustCommand(_ endpoint: SFTPEndpoint) -> String {
        let command = "folio trust \(endpoint.hostURL)"
        return endpoint.knownHostsPath == HostKeyTrust.defaultKnownHostsPath ? command : command + " --known-hosts \(endpoint.knownHostsPath)"
    }

    // MARK: Operations (each maps libssh2's error to SourceError at the caller, which knows the path)

    /// The SFTP channel, started on first use. Why lazily: starting it costs three round trips (channel,
    /// subsystem, version), and a session that only runs exec commands (the find listing, tar batches) never
    /// needs it; over a 20 ms link that is 60 ms off every such session.
    private func sftpChannel() throws(LibSSH2Error) -> OpaquePointer {
        if let sftp { return sftp }
        if let ended = endpoint.subsystemFaults.ended { throw ended }
        do {
            let started = try startSFTPChannel()
            sftp = started
            endpoint.subsystemFaults.noteStarted()
            return started
        } catch where !error.isConnectionLoss && !error.isChannelClosed {
            // A server that allows few channels on a connection (`MaxSessions 1`) refuses this one while the
            // session holds others: the listing's waiting tar, the pipe. Those are given up for it, once; what
            // they served then goes without them (tar and batches are skipped, files come one by one).
            if waiting != nil || startedPipe != nil {
                waiting = nil
                startedPipe = nil
                // Why a second try: sshd frees a closed channel's session only once it has handled everything that
                // came in with the close, so an opening sent right behind the close can still be refused ("no more
                // sessions" in its log). That refusal is the round trip after which the session is free.
                for _ in 0..<2 {
                    if let started = try? startSFTPChannel() {
                        sftp = started
                        return started
                    }
                }
            }
            // libssh2 says only that the answer did not come; Folio's own channel reads what came instead (text
            // from a shell start-up file, or nothing before the subsystem ended).
            if startedPipe == nil { _ = try? pipe() }
            if let ended = endpoint.subsystemFaults.ended { throw ended }
            if let text = endpoint.subsystemFaults.text { throw text }
            if endpoint.subsystemFaults.hasStarted {
                // SFTP works on another session: this one was let in and then dropped, as proftpd does past its
                // MaxClientsPerUser. A lost connection, so the download stage leaves the file to the sessions
                // the server keeps (it said "no SFTP subsystem" of every file this session took).
                throw LibSSH2Error(code: -13, message: "the server dropped this session as SFTP began, though SFTP works on another (it caps this user's connections)")
            }
            throw LibSSH2Error(code: error.code, message: "the server offers no SFTP subsystem; enable \"Subsystem sftp internal-sftp\" in its sshd_config (\(error.message))")
        }
    }

    /// libssh2's SFTP channel, started with a shorter wait first. Why: libssh2 1.10 waits for the subsystem's
    /// first answer until its timeout even when the server closed the channel, so a subsystem whose program is
    /// missing cost the whole timeout per session (30 s by default), then read as a lost connection. When that
    /// wait ends, a pipe of Folio's own (which sees the channel close, and the exit status) tells an ended
    /// subsystem from a slow one; for a slow one, libssh2's next call goes on waiting for the same answer.
    private func startSFTPChannel() throws(LibSSH2Error) -> OpaquePointer {
        let timeout = endpoint.timeoutSeconds * 1000
        let firstAnswer = 3000 + (endpoint.roundTrips.fastest.map { Int($0 / .milliseconds(1)) * 10 } ?? 0)
        guard firstAnswer < timeout else { return try LibSSH2.sftpInit(session, socket: socket) }
        LibSSH2.setTimeout(session, milliseconds: firstAnswer)
        do {
            defer { LibSSH2.setTimeout(session, milliseconds: timeout) }
            return try LibSSH2.sftpInit(session, socket: socket)
        } catch where error.isTimeout {
            _ = try pipe()
            return try LibSSH2.sftpInit(session, socket: socket)
        }
    }

    /// Runs `body` with the session's socket watched by the endpoint's interrupter: a stop of the run shuts the
    /// socket down (at once for the listing's work; after `SocketInterrupter.transferGrace` for a `transfer`), and
    /// whatever `body` throws then is the stop's `.cancelled` error, saying it was `doing` that.
    func interruptibly<T>(transfer: Bool = false, doing action: @autoclosure () -> String, _ body: () throws -> T) throws -> T {
        let interrupter = endpoint.interrupter
        guard transfer ? interrupter.watchTransfer(socket) : interrupter.watch(socket) else {
            throw SourceError(.cancelled, "stopped before \(action())")
        }
        // Why unwatched on the way out, before anyone can close the session: see `SocketInterrupter.interrupt`.
        defer { interrupter.unwatch(socket) }
        do {
            return try body()
        } catch {
            if interrupter.isInterrupted { throw SourceError(.cancelled, "stopped while \(action())") }
            throw error
        }
    }

    /// Starts the SFTP channel now if it is not yet (so that the next request's time is its round trip alone).
    func startSFTP() throws(LibSSH2Error) { _ = try sftpChannel() }

    /// The server's absolute path for `path`: one round trip, timed (once SFTP is started).
    func realpath(_ path: [UInt8]) throws(LibSSH2Error) -> [UInt8] {
        closeUnclosed()
        let sftp = try sftpChannel()
        let asking = ContinuousClock.now
        let real = try LibSSH2.realpath(session, sftp, path)
        endpoint.roundTrips.record(ContinuousClock.now - asking)
        return real
    }

    /// Why `realpath(path)` failed with `error`: a lost connection as it is, else the error of a stat of `path`,
    /// or nil when that stat succeeds (the server did not say why). Why ask again: libssh2 1.10 takes a failed
    /// realpath's request id for its SFTP status, so that error cannot tell a path that leads nowhere from one
    /// the server may not reach. One more round trip, on failure only.
    func whyRealpathFailed(_ path: [UInt8], _ error: LibSSH2Error) -> LibSSH2Error? {
        if error.isConnectionLoss { return error }
        do {
            _ = try stat(path, followLinks: true)
            return nil
        } catch {
            return error
        }
    }

    func stat(_ path: [UInt8], followLinks: Bool) throws(LibSSH2Error) -> RemoteAttributes {
        closeUnclosed()
        return try LibSSH2.stat(session, try sftpChannel(), path, followLinks: followLinks)
    }

    /// Lists one folder: every name (`.` and `..` included), with lstat attributes. Why the requests ride together: a
    /// folder costs an open and two readdirs (its names, then their end), and a close, each a round trip when
    /// waited for alone. Each readdir request carries one more: the first, the open of `next` (the folder the
    /// caller lists after this one); the one after, the close of the folder before. So a session going from folder
    /// to folder spends two round trips on each (from an SFTP-only account over 20 ms, a no-change run of 20,000
    /// files in 400 folders took 4.6 -> 3.4 s); a folder listed without `next` costs three, its open carrying the
    /// close before it.
    func listFolder(_ path: [UInt8], next: [UInt8]? = nil) throws(LibSSH2Error) -> [(name: [UInt8], attributes: RemoteAttributes)] {
        let handle: OpaquePointer
        if let ahead = openedAhead, ahead.path == path {
            openedAhead = nil
            handle = try ahead.handle.get()
        } else {
            closeOpenedAhead()
            handle = try open(path, as: .folder)
        }
        defer { closeLater(handle) }
        let sftp = try sftpChannel()
        var buffer = [CChar](repeating: 0, count: 4096)
        var names = FolderNames()
        var opening = next
        while true {
            let item: (name: [UInt8], attributes: RemoteAttributes)?
            if let companion: LibSSH2.Companion = opening.map({ .openFolder($0) }) ?? unclosed.map({ .close($0) }) {
                let step = LibSSH2.readFolder(session, sftp, handle, buffer: &buffer, alongside: companion)
                if step.companionSent {
                    switch companion {
                    case .openFolder(let path):
                        if let opened = step.opened { openedAhead = (path, opened) }
                        opening = nil
                    case .close:
                        unclosed = nil
                    }
                }
                item = try step.name.get()
            } else {
                item = try LibSSH2.readFolder(session, sftp, handle, buffer: &buffer)
            }
            guard let item else { break }
            try names.append(item)
        }
        return names.names
    }

    /// Closes the folder opened ahead that no listing took (none does in practice: the next listing takes it).
    private func closeOpenedAhead() {
        guard let ahead = openedAhead else { return }
        openedAhead = nil
        if case .success(let handle) = ahead.handle { LibSSH2.close(handle) }
    }

    /// Starts `command` on a new channel: two round trips (the channel's opening, the command's), timed.
    func start(_ command: String) throws(LibSSH2Error) -> ExecChannel {
        let starting = ContinuousClock.now
        let channel = try ExecChannel(session: session, socket: socket, command: command)
        endpoint.roundTrips.record((ContinuousClock.now - starting) / 2)
        return channel
    }

    /// The channel that batches of small files go through with many requests in flight (see `SFTPPipe`),
    /// started on first use (three round trips) and kept for the next batch.
    func pipe() throws(LibSSH2Error) -> SFTPPipe {
        if let startedPipe { return startedPipe }
        if let ended = endpoint.subsystemFaults.ended { throw ended }
        do {
            let started = try SFTPPipe(session: session, socket: socket)
            startedPipe = started
            // Folio's own channel speaks SFTP too: once it started (an SFTP-only account's listing does, first),
            // a session that then cannot start SFTP was dropped, not refused a subsystem the server lacks.
            endpoint.subsystemFaults.noteStarted()
            return started
        } catch {
            if error.isChannelClosed { endpoint.subsystemFaults.noteEnded(error) }
            if error.isTextBeforeSFTP { endpoint.subsystemFaults.noteText(error) }
            throw error
        }
    }

    /// Drops the pipe after a batch left it out of step (answers not read, or not understood); the next batch
    /// starts another.
    func dropPipe() { startedPipe = nil }

    /// Keeps a command that waits for its input (the `tar` the listing started) until a download takes it.
    func keepWaiting(_ command: ExecChannel) { waiting = command }

    /// The command the listing left waiting for input, if any; the caller now owns it.
    func takeWaiting() -> ExecChannel? {
        defer { waiting = nil }
        return waiting
    }

    /// Opens a file for reading, closing what `closeLater` left in the same round trip.
    func openFile(_ path: [UInt8]) throws(LibSSH2Error) -> OpaquePointer { try open(path, as: .file) }

    private func open(_ path: [UInt8], as kind: LibSSH2.OpenKind) throws(LibSSH2Error) -> OpaquePointer {
        let sftp = try sftpChannel()
        guard let previous = unclosed else { return try LibSSH2.open(session, sftp, path, as: kind) }
        unclosed = nil
        return try LibSSH2.open(session, sftp, path, as: kind, closing: previous)
    }

    func seek(_ handle: OpaquePointer, to offset: Int64) { LibSSH2.seek(handle, to: offset) }

    func read(_ handle: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer, count: Int) throws(LibSSH2Error) -> Int {
        try LibSSH2.read(session, try sftpChannel(), handle, into: buffer, count: count)
    }

    /// Reads and asks for the file's attributes in one round trip (see `LibSSH2.readWithAttributes`).
    func readWithAttributes(_ handle: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer, count: Int) throws(LibSSH2Error) -> (count: Int, attributes: RemoteAttributes?) {
        try LibSSH2.readWithAttributes(session, try sftpChannel(), handle, into: buffer, count: count)
    }

    func fstat(_ handle: OpaquePointer) throws(LibSSH2Error) -> RemoteAttributes { try LibSSH2.fstat(session, try sftpChannel(), handle) }

    /// Closes a file or folder once this session sends its next request: with the next open, in the same round
    /// trip, or alone before any other request. Why: a close waited for alone is a round trip per file, which
    /// on a 20 ms link costs as much as carrying a megabyte. Only for a handle whose reading is over: the server
    /// keeps it open until then.
    func closeLater(_ handle: OpaquePointer) {
        closeUnclosed()
        unclosed = handle
    }

    /// Closes what `closeLater` left, waiting for the server's answer.
    private func closeUnclosed() {
        guard let handle = unclosed else { return }
        unclosed = nil
        LibSSH2.close(handle)
    }

    func close() {
        guard !isClosed else { return }
        isClosed = true
        // Why unwatched here too: a socket closed while still watched could be shut down after its number was
        // reused (see `SocketInterrupter.interrupt`).
        endpoint.interrupter.unwatch(socket)
        // After a stop, a session that was idle then (not watched, so not shut down) must not wait for a server
        // that may not answer: the handle closes below then fail at once instead of waiting out the timeout.
        if endpoint.interrupter.isInterrupted { _ = Glibc.shutdown(socket, Int32(SHUT_RDWR)) }
        // Why before hanging up: libssh2 frees the handle only once the server has answered.
        closeUnclosed()
        closeOpenedAhead()
        // Why hang up first: the channels still open (SFTP's, a waiting command's) are then freed without a
        // round trip each for the server's close.
        LibSSH2.hangUp(session, socket: socket)
        waiting = nil
        startedPipe = nil
        if let sftp { LibSSH2.sftpShutdown(sftp) }
        LibSSH2.free(session)
        Glibc.close(socket)
    }

    deinit { close() }

    /// The one-line error for a failed operation on a remote path.
    func sourceError(_ error: LibSSH2Error, doing action: String, remote: [UInt8], path: RelativePath? = nil) -> SourceError {
        let where_ = endpoint.url(remote)
        if error.isTimeout {
            // Why not "lost the connection": the connection is up as far as anyone can tell, and a server stuck on
            // its disk (a NAS's sleeping drive, a hung share) is the usual cause, which "check the network" hides.
            return SourceError(.unreachable, "\(endpoint.hostURL) sent nothing for \(endpoint.timeoutSeconds) s while \(action) \(where_); the server is stuck (on a slow disk or share?) or the link is down: check both, or raise timeout",
                               path: path, underlying: error.description)
        }
        if error.isConnectionLoss {
            return SourceError(.unreachable, "lost the connection to \(endpoint.hostURL) while \(action) \(where_) (\(LibSSH2Error.name(of: error.code))); check the network and the server, then run again",
                               path: path, underlying: error.description)
        }
        if error.isNoSuchFile {
            return SourceError(.notFound, "\(where_) does not exist on the server; check the path", path: path, underlying: error.description)
        }
        if error.isPermissionDenied {
            return SourceError(.permission, "cannot read \(where_): permission denied on the server; give \(endpoint.user) read access there", path: path, underlying: error.description)
        }
        if error.sftpStatus == 4 {
            // FX_FAILURE is sftp-server's status for any error it has no name for; libssh2's text for it ("SFTP
            // READ error") says neither what nor where to look.
            return SourceError(.protocolViolation, "the server failed while \(action) \(where_) (SFTP's catch-all status FX_FAILURE: a read error on its disk, or the name now a folder or a special file); the next run tries again; if it keeps failing, check the server's log for it",
                               path: path, underlying: error.description)
        }
        return SourceError(.protocolViolation, "\(action) \(where_) failed: \(error.message.isEmpty ? LibSSH2Error.name(of: error.code) : error.message)", path: path, underlying: error.description)
    }
}

