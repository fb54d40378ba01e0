import Foundation
import Glibc

/// One `[[target]]`: a source mirrored into a destination, and how.
public struct TargetConfig: Sendable, Equatable {
    /// Which triggers run a target.
    public enum Mode: String, Sendable, CaseIterable {
        case manual, automatic, both

        /// Whether a run started by `trigger` runs a target of this mode.
        public func includes(_ trigger: Trigger) -> Bool {
            self == .both || (self == .manual && trigger == .manual) || (self == .automatic && trigger == .automatic)
        }
    }

    /// What started a run.
    public enum Trigger: String, Sendable {
        case manual, automatic
    }

    /// The target's name (a-z, 0-9, `.`, `_`, `-`): how commands, logs and the state database refer to it.
    public var name: String
    /// The source as written: a path, `file://`, `sftp://` or `http(s)://` URL.
    public var source: String
    /// An absolute path on this machine.
    public var destination: String
    /// Which triggers pick it: the daemon's schedule (automatic), `folio sync --now` without target names (manual),
    /// or both.
    public var mode: Mode = .both
    /// When false, neither the daemon nor `folio sync --now` without names runs it; naming it still does.
    public var enabled = true
    /// Seconds between the end of one automatic run and the start of the next.
    public var interval: Int = 3_600
    /// Parallel downloads; nil chooses them from the link (see `downloadWorkers(roundTrip:)`).
    public var transfers: Int?
    /// How much one run may remove before it refuses (default 50% of the destination's entries); `--force` overrides.
    public var maxDelete: MaxDelete = .percent(50)
    /// Days a run's trash folder is kept (default 30); 0 deletes removed and replaced files instead of trashing them.
    public var trashDays: Int = 30
    /// The `exclude` globs as written (see `ExcludeFilter`).
    public var exclude: [String] = []
    /// Whether symbolic links on the source are skipped (the default) or followed; HTTP sources ignore it.
    public var symlinks: ListingOptions.SymlinkPolicy = .skip
    /// The most bytes per second the target's downloads take together; nil: no limit.
    public var bandwidthLimit: BandwidthLimit?
    /// Seconds a network operation may take before the connection counts as dead.
    public var timeout: Int = 30
    /// The seconds `timeout` may be, in a configuration and for `folio trust --timeout`.
    public static let timeoutRange = 1...3_600
    /// A command run after a run that changed something; `{target}` is replaced by the target's name.
    public var onChange: [String] = []
    /// Seconds `onChange` may run before it is stopped: the target's schedule waits for it, so a hook that hangs
    /// must not hold the target back for good.
    public var onChangeTimeout: Int = 900
    /// The settings only some sources read: keys, secret files, known_hosts, WebDAV, TLS, request limits.
    public var sourceSettings = SourceSettings()

    /// Downloads at once when `transfers` is unset and the link is near (or unknown).
    public static let nearTransfers = 4
    /// Downloads at once when `transfers` is unset and the link is far: each stream is held back by its round
    /// trips, so more streams carry more (media over a 20 ms link: 4 → 8 workers took 1.24 → 1.08 s over SFTP and
    /// 0.36 → 0.28 s over WebDAV), where near they only contend for the CPU (3–10% slower over loopback).
    public static let farTransfers = 8
    /// The round trip from which a link counts as far: a LAN answers in well under a millisecond.
    public static let farRoundTrip = Duration.milliseconds(5)

    /// Whether a source whose quickest turn took `roundTrip` is far; one without a link (nil) is near.
    public static func isFar(roundTrip: Duration?) -> Bool {
        guard let roundTrip else { return false }
        return roundTrip >= farRoundTrip
    }

    /// How many downloads run at once: `transfers` when set, else by the source's quickest turn.
    /// Under a bandwidth limit, at most one per `BandwidthLimit.perTransfer` of it.
    public func downloadWorkers(roundTrip: Duration?) -> Int {
        let chosen = transfers ?? (Self.isFar(roundTrip: roundTrip) ? Self.farTransfers : Self.nearTransfers)
        guard let bandwidthLimit else { return chosen }
        return min(chosen, max(1, Int(bandwidthLimit.bytesPerSecond / BandwidthLimit.perTransfer)))
    }

    /// The most downloads `downloadWorkers(roundTrip:)` can ask for, whatever the link: what a source sizes its
    /// per-run limits by before the round trip is known.
    public var mostDownloadWorkers: Int { transfers ?? Self.farTransfers }

    /// For a local source: what is wrong when the destination and the source are one inside the other on disk,
    /// through symlinks (the configuration's check reads them as text); nil when they are apart. Why it matters:
    /// a destination inside its source would copy itself one level deeper on every run. Reads the filesystem.
    public func sourceOverlapOnDisk() -> String? {
        guard case .local(let path)? = try? SourceLocation(parsing: source).kind else { return nil }
        let realSource = PathText.real(path), realDestination = PathText.real(destination)
        if realDestination == realSource {
            return "destination \(destination) is its source \(path) (both are \(realSource)); choose a destination outside it"
        }
        if PathText.isWithin(realDestination, realSource) {
            return "destination \(destination) is inside its source \(path) (both are in \(realSource)); choose a destination outside it"
        }
        if PathText.isWithin(realSource, realDestination) {
            return "source \(path) is inside its destination \(destination) (both are in \(realDestination)); choose a destination outside it"
        }
        // A bind mount passes the check above: one folder under two real paths. Walked up by "..", the folders'
        // device and inode numbers tell. Why it matters: a run into its own source would move the source's
        // skipped entries (links, FIFOs) to the trash as "local files folio did not write".
        guard let sourceFolder = Self.identity(of: realSource) else { return nil }
        let destinationFolder = Self.identity(of: realDestination)
        if let destinationFolder, destinationFolder == sourceFolder {
            return "destination \(destination) is its source \(path), the same folder reached another way (a bind mount?); choose a destination outside it"
        }
        if Self.ancestors(of: Self.nearestExisting(realDestination)).contains(sourceFolder) {
            return "destination \(destination) is inside its source \(path) on disk (through a bind mount?); choose a destination outside it"
        }
        if let destinationFolder, Self.ancestors(of: realSource).contains(destinationFolder) {
            return "source \(path) is inside its destination \(destination) on disk (through a bind mount?); choose a destination outside it"
        }
        return nil
    }

    /// The folder at `path`'s device and inode; nil when there is none.
    private static func identity(of path: String) -> DirectoryIdentity? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return nil }
        return DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }

    /// `path`, or the nearest folder above it that exists: where a destination not made yet will be made.
    private static func nearestExisting(_ path: String) -> String {
        var current = path
        while identity(of: current) == nil, current != "/", !current.isEmpty {
            current = (current as NSString).deletingLastPathComponent
        }
        return current
    }

    /// The folders above `path` (not `path` itself), found by "..": through a bind mount's root, ".." leads to
    /// the folder holding its mountpoint, so a path inside a bind mount of X has X among them.
    private static func ancestors(of path: String) -> [DirectoryIdentity] {
        var fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        var found: [DirectoryIdentity] = []
        var last = fd >= 0 ? TreeWalker.identity(of: fd) : nil
        // Bounded: a path has fewer than PATH_MAX / 2 components.
        while fd >= 0, found.count < Int(PATH_MAX) / 2 {
            let parent = openat(fd, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
            close(fd)
            fd = parent
            guard fd >= 0, let identity = TreeWalker.identity(of: fd), identity != last else { break }
            found.append(identity)
            last = identity
        }
        if fd >= 0 { close(fd) }
        return found
    }

    /// A target with these three and the defaults for everything else.
    public init(name: String, source: String, destination: String) {
        self.name = name
        self.source = source
        self.destination = destination
    }
}

/// The `max-delete` guard: how much one run may remove before it refuses.
public enum MaxDelete: Sendable, Equatable, CustomStringConvertible {
    case percent(Int)
    case count(Int)

    /// The most entries a run may remove, given how many the destination holds.
    public func limit(forEntryCount entries: Int) -> Int {
        switch self {
        case .count(let count): count
        case .percent(let percent): entries * percent / 100
        }
    }

    /// `50%` for a percentage, the bare number for a count.
    public var description: String {
        switch self {
        case .percent(let p): "\(p)%"
        case .count(let c): "\(c)"
        }
    }
}

/// Settings only some sources use; each source reads the ones it knows.
public struct SourceSettings: Sendable, Equatable {
    /// SSH private key file (ed25519 or ECDSA).
    public var identity: String?
    /// File holding the identity's passphrase.
    public var passphraseFile: String?
    /// File holding the SSH or HTTP password.
    public var passwordFile: String?
    /// known_hosts file to check SFTP host keys against.
    public var knownHosts: String?
    /// HTTP: use WebDAV (`true`), index pages (`false`) or ask the server (`nil`, "auto").
    public var webdav: Bool?
    /// HTTP user name for Basic/Digest authentication.
    public var username: String?
    /// File holding an HTTP bearer token.
    public var tokenFile: String?
    /// Extra CA certificate (PEM) to trust for HTTPS.
    public var caFile: String?
    /// Skip TLS certificate checks (logged as a warning on every run).
    public var insecureTLS = false
    /// Upper bound on HTTP requests per second to this source; nil for none.
    public var requestsPerSecond: Double?
    /// Most HTTP requests in flight to this source's server at once; nil for the default (16, or `transfers`
    /// when that is more).
    public var connections: Int?

    /// No setting given (TLS certificates checked).
    public init() {}

    /// The configuration keys of these settings: each kind of source uses some of them.
    public static let allKeys: Set<String> = ["identity", "passphrase-file", "password-file", "known-hosts", "username", "token-file", "ca-file",
                                           "insecure-tls", "webdav", "connections", "requests-per-second"]

    /// The keys a kind of source uses, and how a message names that kind.
    public static func keysUsed(by kind: SourceLocation.Kind) -> (used: Set<String>, source: String) {
        switch kind {
        case .local:
            ([], "a local folder")
        case .sftp:
            (["identity", "passphrase-file", "password-file", "known-hosts"], "an sftp:// server")
        case .http:
            (["password-file", "username", "token-file", "ca-file", "insecure-tls", "webdav", "connections", "requests-per-second"],
             "an http(s):// server")
        }
    }

    /// What is wrong with these settings as an HTTP source's credentials, which are a bearer token, or a user name
    /// with its password, or none: the key to fix and a sentence that says how, the keys spelt by `name` (a
    /// configuration's key, `folio mirror`'s flag). Nil when they are one of those.
    public func httpCredentialsProblem(naming name: (String) -> String = { $0 }) -> (key: String, message: String)? {
        switch (username != nil, passwordFile != nil, tokenFile != nil) {
        case (false, false, _), (true, true, false):
            nil
        case (_, _, true):
            ("token-file", "\(name("token-file")) is set together with \(name("username")) or \(name("password-file")); use one: a bearer token, or a user name and its password")
        case (true, false, false):
            ("username", "\(name("username")) is set but \(name("password-file")) is not; add \(name("password-file")), the path of a file holding the password")
        case (false, true, false):
            ("password-file", "\(name("password-file")) is set but \(name("username")) is not; add \(name("username"))")
        }
    }
}
