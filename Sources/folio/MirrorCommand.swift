import ArgumentParser

/// `folio mirror SOURCE DEST`: a one-off mirror without a configuration file, with the same engine and guarantees.
/// Its state is kept in the state directory under the name `mirror:DEST`, so running it again is incremental.
struct MirrorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mirror",
        abstract: "Mirror SOURCE into DEST once, without a configuration file.",
        discussion: "SOURCE is a folder, file://, sftp://[user@]host[:port]/path (/~/path: below the account's home) or http(s):// URL; DEST a local folder."
    )

    @Argument(help: "Where the files come from.") var source: String
    @Argument(help: "The local folder to keep in step.") var destination: String

    @Flag(name: .long, help: "Show what would change; change nothing.") var dryRun = false
    @Flag(name: .long, help: "Write NDJSON events, one object per line (docs/json-events.md lists them).") var json = false
    @Flag(name: .long, help: "Allow a run past the max-delete, empty-source and missing-destination guards.") var force = false
    @Flag(name: .long, help: "Exit 1 at once if another folio process is syncing DEST.") var noWait = false
    // Numbers are parsed unconditionally: a negative one then gets the configuration's one-line answer, not
    // argument-parser's "missing value" and usage text.
    @Option(name: .long, parsing: .unconditional, help: "Parallel downloads (default: 4, or 8 from a server 5 ms or more away).") var transfers: Int?
    @Option(name: .long, parsing: .unconditional, help: "Seconds a network operation may take.") var timeout: Int = MirrorRequest.defaults.timeout
    @Option(name: .long, parsing: .unconditional, help: "Most entries a run may remove: a count or a percentage like 50%.") var maxDelete: String = MirrorRequest.defaults.maxDelete
    @Option(name: .long, parsing: .unconditional, help: "Days to keep removed files in DEST/.folio/trash (0 deletes them).") var trashDays: Int = MirrorRequest.defaults.trashDays
    @Option(name: .long, help: "Most bytes per second for all downloads together: KiB/s (500), or 500K, 2M, 1.5MiB/s (2MB is 2,000,000, as for rsync); off for none.") var bwlimit: String?
    @Option(name: .long, help: "Leave out matching entries (repeatable glob).") var exclude: [String] = []
    @Option(name: .long, help: "Symbolic links on the source: skip or follow (inside the source only).") var symlinks: String = MirrorRequest.defaults.symlinks
    @Option(name: .long, help: "SFTP: private key file (ed25519 or ECDSA).") var identity: String?
    @Option(name: .long, help: "SFTP: file holding the key's passphrase.") var passphraseFile: String?
    @Option(name: .long, help: "SFTP/HTTP: file holding the password.") var passwordFile: String?
    @Option(name: .long, help: "SFTP: known_hosts file (default ~/.ssh/known_hosts).") var knownHosts: String?
    @Option(name: .long, help: "HTTP: user name for Basic/Digest authentication.") var username: String?
    @Option(name: .long, help: "HTTP: file holding a bearer token.") var tokenFile: String?
    @Option(name: .long, help: "HTTPS: extra CA certificate (PEM) to trust.") var caFile: String?
    @Flag(name: .long, help: "HTTPS: do not verify certificates (warned about on every run).") var insecureTLS = false
    @Option(name: .long, help: "HTTP: auto, true or false.") var webdav: String = MirrorRequest.defaults.webdav
    @Option(name: .long, parsing: .unconditional, help: "HTTP: at most this many requests per second.") var requestsPerSecond: Double?
    @Option(name: .long, parsing: .unconditional, help: "HTTP: at most this many connections to the server talk at once (default 16), each carrying one request, or 4 over HTTP/2.") var connections: Int?

    /// The command line's answers, apart from argument-parser's property wrappers.
    var request: MirrorRequest {
        MirrorRequest(
            source: source, destination: destination, dryRun: dryRun, json: json, force: force, noWait: noWait,
            transfers: transfers, timeout: timeout, maxDelete: maxDelete, trashDays: trashDays, bwlimit: bwlimit,
            exclude: exclude, symlinks: symlinks, identity: identity, passphraseFile: passphraseFile,
            passwordFile: passwordFile, knownHosts: knownHosts, username: username, tokenFile: tokenFile, caFile: caFile,
            insecureTLS: insecureTLS, webdav: webdav, requestsPerSecond: requestsPerSecond, connections: connections)
    }

    func run() async throws { try await request.run() }
}
