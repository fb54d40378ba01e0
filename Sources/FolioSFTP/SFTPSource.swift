import FolioCore
import Glibc

/// An SFTP server as a source: `sftp://[user@]host[:port]/path`, over libssh2.
///
/// The host key is checked strictly against known_hosts; log-in uses the `identity` key file, ssh-agent or a
/// `password-file`. Listing uses one `find` over exec when the server allows it, else SFTP readdir with many
/// folders in flight on one channel (`SFTPFolderWalk`), else readdir across a few sessions; each download worker
/// gets its own session.
public struct SFTPSource: Source {
    let endpoint: SFTPEndpoint
    /// Sessions left open by the last listing, up to `transfers`, for the first download workers.
    private let idle: IdleSessions
    /// Whether this server streams small files with tar; shared by the download workers' connections.
    private let tarBatch: TarBatch
    /// The next listing's first session, when `prepare` started its log-in.
    private let logInAhead = LogInAhead()
    /// Which listing path to take; tests pin one to compare them.
    var listingMethod: SFTPLister.Method = .automatic
    private let location: SourceLocation

    /// Loads and initialises libssh2 now rather than when the source is made (blocking: call it off the
    /// cooperative pool). A failure is kept and thrown when the source is made.
    public static func loadLibrary() {
        _ = try? LibSSH2.initialize()
    }

    /// Builds the source without touching the network. `timeout` (seconds) bounds connecting and every
    /// operation. `transfers` (the engine's download workers, each opening a connection) bounds how many listing
    /// sessions are kept open for them. Symbolic links are followed or skipped as `ListingOptions.symlinks` says,
    /// which the engine sets from the target's setting.
    public init(location: SourceLocation, settings: SourceSettings, timeout: Int, transfers: Int) throws {
        guard case let .sftp(user, host, port, path) = location.kind else {
            throw SourceError(.protocolViolation, "\(location) is not an sftp:// URL")
        }
        try LibSSH2.initialize()
        var root = path.isEmpty ? "/" : path
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        // `/~/path` is below the account's home folder (as curl and lftp read it): the server gets the path
        // relative, which SFTP and the account's shell both resolve from the home folder.
        if root == "/~" { root = "." } else if root.hasPrefix("/~/") { root = String(root.dropFirst(3)) }
        endpoint = SFTPEndpoint(
            host: host, port: port, user: user ?? SFTPEndpoint.currentUser.name, rootPath: root,
            identity: settings.identity.map(PathText.expandingHome),
            passphraseFile: settings.passphraseFile, passwordFile: settings.passwordFile,
            knownHostsPath: settings.knownHosts.map(PathText.expandingHome) ?? HostKeyTrust.defaultKnownHostsPath,
            timeoutSeconds: max(1, timeout))
        self.location = location
        idle = IdleSessions(capacity: max(0, transfers))
        tarBatch = TarBatch(rootPath: root)
    }

    /// The `sftp://` URL as written.
    public var displayName: String { location.description }

    /// Whether downloads still fetch small files in batches (false once the server turned out to lack exec or tar).
    var tarBatchesAvailable: Bool { tarBatch.isAvailable }

    /// SFTP version 3 reports whole seconds; the exec listing adds nanoseconds where the server has them. Small
    /// files come in batches: over `tar` where the server has it (see `TarBatch`), else over SFTP with many
    /// requests in flight (`SFTPBatchFetch`). The
    /// listing reads what the last one learned about the server (`SFTPListingMemo`), hence `readsMemo`.
    public var features: SourceFeatures {
        SourceFeatures(mtimePrecision: .second, checksums: false, resumable: true, batchDownloads: true, costlyConnections: true,
                       readsMemo: true)
    }

    /// Starts the listing's first log-in (six round trips or more), to overlap the run's local start.
    public func prepare() { logInAhead.start(endpoint) }

    /// Lists the tree with one `find` over exec where the server allows it, else SFTP readdir (see `SFTPLister`);
    /// sessions it opened are kept for the first download workers.
    public func snapshot(options: ListingOptions) async throws -> Snapshot {
        var snapshot = try await SFTPLister(endpoint: endpoint, options: options, method: listingMethod, idle: idle, tarBatch: tarBatch,
                                            loggingIn: logInAhead.take()).snapshot()
        // Why a warning, where OpenSSH refuses such a key: a daemon's key made readable to others by mistake would
        // otherwise stop every run at once; said every run, it is fixed with one chmod.
        if let path = endpoint.identity, let mode = SecretFile.mode(of: path), mode & 0o077 != 0 {
            snapshot.warn("identity \(path) can be read by other users (mode \(String(mode & 0o777, radix: 8))), which ssh refuses for a private key; chmod 600 \(path)", about: displayName)
        }
        for (setting, path) in [("passphrase-file", endpoint.passphraseFile), ("password-file", endpoint.passwordFile)] {
            if let path, let warning = SecretFile.exposure(of: path, setting: setting) { snapshot.warn(warning, about: displayName) }
        }
        return snapshot
    }

    /// Shuts down the sockets of the sessions logging in or listing, so that a stop does not wait out `timeout`
    /// for a server that does not answer; downloads stop between chunks, and one still waiting on its server
    /// after `SocketInterrupter.transferGrace` is cut.
    public func interrupt() { endpoint.interrupter.interrupt() }

    /// The quickest turn of any session to this server: starting a command (half of its two round trips),
    /// resolving a path or opening a file.
    public var roundTrip: Duration? { endpoint.roundTrips.fastest }

    /// Closes the sessions the listing left for download workers that never came (a run with nothing to
    /// fetch, or fewer files than sessions), and one `prepare` started for a listing that never came.
    public func finishRun() async {
        await logInAhead.closeUntaken()
        let idle = self.idle
        await Blocking.run { idle.closeAll() }
    }

    /// Gives one download worker a session, on its thread: one the listing left open if it still answers,
    /// else a new one (handshakes are bounded process-wide).
    public func makeConnection() throws -> any SourceConnection {
        SFTPConnection(session: try idle.take() ?? SSHSession.open(endpoint), tarBatch: tarBatch)
    }
}
