import FolioCore

/// An SFTP server as a source: `sftp://[user@]host[:port]/path`, over libssh2.
///
/// The host key is checked strictly against known_hosts; log-in uses the `identity` key file, ssh-agent or a
/// `password-file`. Listing uses one `find` over exec when the server allows it, else SFTP readdir across a
/// few sessions; each download worker gets its own session.
public struct SFTPSource: Source {
    let endpoint: SFTPEndpoint
    /// Which listing path to take; tests pin one to compare them.
    var listingMethod: SFTPLister.Method = .automatic
    private let location: SourceLocation

    /// Builds the source without touching the network. `timeout` (seconds) bounds connecting and every
    /// operation. `transfers` (the engine's download workers, each opening a connection) and `symlinks` are
    /// accepted for symmetry with the other sources: handshakes are bounded process-wide whatever the count, and
    /// listing follows `ListingOptions.symlinks`, which the engine sets from the same target setting.
    public init(location: SourceLocation, settings: SourceSettings, timeout: Int, transfers: Int, symlinks: ListingOptions.SymlinkPolicy) throws {
        guard case let .sftp(user, host, port, path) = location.kind else {
            throw SourceError(.protocolViolation, "\(location) is not an sftp:// URL")
        }
        do { try LibSSH2.initialize() } catch { throw SourceError(.localIO, "cannot initialise libssh2", underlying: error.description) }
        var root = path.isEmpty ? "/" : path
        while root.count > 1, root.hasSuffix("/") { root.removeLast() }
        endpoint = SFTPEndpoint(
            host: host, port: port, user: user ?? SFTPEndpoint.currentUser.name, rootPath: root,
            identity: settings.identity.map(SFTPEndpoint.expandingHome),
            passphraseFile: settings.passphraseFile, passwordFile: settings.passwordFile,
            knownHostsPath: settings.knownHosts.map(SFTPEndpoint.expandingHome) ?? HostKeyTrust.defaultKnownHostsPath,
            timeoutSeconds: max(1, timeout))
        self.location = location
    }

    public var displayName: String { location.description }

    /// SFTP version 3 reports whole seconds; the exec listing adds nanoseconds where the server has them.
    public var features: SourceFeatures { SourceFeatures(mtimePrecision: .second, checksums: false, resumable: true) }

    public func snapshot(options: ListingOptions) async throws -> Snapshot {
        try await SFTPLister(endpoint: endpoint, options: options, method: listingMethod).snapshot()
    }

    /// Opens a session for one download worker, on its thread; handshakes are bounded process-wide.
    public func makeConnection() throws -> any SourceConnection {
        SFTPConnection(session: try SSHSession.open(endpoint))
    }
}
