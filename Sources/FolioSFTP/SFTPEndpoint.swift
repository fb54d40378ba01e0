import FolioCore
import Glibc

/// Everything needed to open a session to one server as one user, with the root folder; secrets stay in files
/// until a session reads them.
struct SFTPEndpoint: Sendable {
    var host: String
    var port: Int
    var user: String
    /// The source root as the user wrote it (percent-decoded): absolute on the server, or relative to the account's
    /// home folder (written `/~/path`; `.` for the home folder itself).
    var rootPath: String
    var identity: String?
    var passphraseFile: String?
    var passwordFile: String?
    var knownHostsPath: String
    var timeoutSeconds: Int
    /// Where ssh's default key files are looked for when no `identity` is set: `~/.ssh` of the user running Folio.
    var defaultKeyFolder = SFTPEndpoint.currentUser.home + "/.ssh"
    /// The quickest turns on this server, shared by every session to it.
    var roundTrips = RoundTripGauge()
    /// What Folio's own SFTP channel found wrong with the server's SFTP subsystem.
    var subsystemFaults = SubsystemFaults()
    /// Cuts the run's log-ins, listing and stalled transfers short when it is stopped; shared by every session of
    /// the source.
    var interrupter = SocketInterrupter()

    /// `sftp://host:port`, the form `folio trust` takes.
    var hostURL: String { "sftp://\(host.contains(":") ? "[\(host)]" : host):\(port)" }

    /// `sftp://user@host:port/path` for messages (`/~/path` for a path relative to the home folder); never holds a
    /// secret.
    func url(_ remotePath: [UInt8]? = nil) -> String {
        let path = remotePath.map { RelativePath.display($0) } ?? rootPath
        let shown = path.hasPrefix("/") ? path : path == "." ? "/~" : "/~/" + (path.hasPrefix("./") ? String(path.dropFirst(2)) : path)
        return "sftp://\(user)@\(host.contains(":") ? "[\(host)]" : host):\(port)\(shown)"
    }

    /// The remote path of an entry below the root.
    func remotePath(_ path: RelativePath) -> [UInt8] {
        var bytes = Array(rootPath.utf8)
        if path.isRoot { return bytes }
        if bytes.last != UInt8(ascii: "/") { bytes.append(UInt8(ascii: "/")) }
        path.withBytes { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// The user running Folio and their home folder, from the password database (not `$HOME`, as ssh does).
    static var currentUser: (name: String, home: String) {
        guard let entry = getpwuid(geteuid()) else { return ("root", "/root") }
        return (String(cString: entry.pointee.pw_name), String(cString: entry.pointee.pw_dir))
    }

    /// A remote path as one POSIX shell word, for the commands run over exec: in single quotes, each `'` as `'\''`.
    static func shellQuoted(_ path: String) -> String {
        "'" + path.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }
}
