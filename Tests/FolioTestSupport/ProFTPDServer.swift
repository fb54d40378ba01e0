import Foundation
import Glibc

/// A real ProFTPD with mod_sftp on 127.0.0.1: an SFTP server that is not OpenSSH, with its own config, host key,
/// user key, user file and logs in a temp folder. One user, `folio`, whose home (`home`, the SFTP root) is the
/// served folder; sessions run as `nobody`, so the folder is world-readable. `maxClientsPerUser` caps the user's
/// connections as a shared host does: past it, ProFTPD lets a session log in and then drops it.
public final class ProFTPDServer: @unchecked Sendable {
    // Why @unchecked Sendable: a test drives one server from one method; start and stop run in sequence.
    public let folder: TemporaryDirectory
    public let port: Int
    public let user = "folio"
    /// The served folder: the user's home, `/` over SFTP.
    public let home: String
    /// The ed25519 private key the server takes for `user`.
    public let userKeyPath: String
    /// A known_hosts file listing the server's host key as `[127.0.0.1]:port`.
    public let knownHostsPath: String
    public var logPath: String { folder.path("sftp.log") }
    private var pid: pid_t = 0

    public init(maxClientsPerUser: Int? = nil) throws {
        folder = TemporaryDirectory("proftpd")
        chmod(folder.path, 0o755)
        home = folder.path("home")
        FixtureTree.makeFolder(folder.path, "home")
        chmod(home, 0o755)
        port = try LoopbackServer.freePort()
        let hostKey = folder.path("host_ed25519")
        userKeyPath = folder.path("user_ed25519")
        knownHostsPath = folder.path("known_hosts")
        try LoopbackServer.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "folio-test-host", "-f", hostKey])
        try LoopbackServer.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "folio-test-user", "-f", userKeyPath])
        // mod_sftp reads authorized keys in RFC 4716 form.
        let authorized = try LoopbackServer.run("/usr/bin/ssh-keygen", ["-e", "-f", userKeyPath + ".pub"])
        try authorized.write(toFile: folder.path("authorized_keys"), atomically: false, encoding: .utf8)
        let hostPublic = try String(contentsOfFile: hostKey + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
        try "[127.0.0.1]:\(port) \(hostPublic)\n".write(toFile: knownHostsPath, atomically: false, encoding: .utf8)
        // ProFTPD refuses a user file others can read; `*` is no password: the key is the way in.
        try "\(user):*:65534:65534::\(home):/bin/false\n".write(toFile: folder.path("passwd"), atomically: false, encoding: .utf8)
        chmod(folder.path("passwd"), 0o600)
        let config = """
            ServerType standalone
            Port 0
            DefaultAddress 127.0.0.1
            SocketBindTight on
            PidFile \(folder.path("proftpd.pid"))
            ScoreboardFile \(folder.path("scoreboard"))
            DelayTable none
            WtmpLog off
            User nobody
            Group nogroup
            UseIPv6 off
            LoadModule mod_sftp.c
            <VirtualHost 127.0.0.1>
              Port \(port)
              SFTPEngine on
              SFTPLog \(logPath)
              SFTPHostKey \(hostKey)
              SFTPAuthorizedUserKeys file:\(folder.path("authorized_keys"))
              SFTPAuthMethods publickey
              AuthOrder mod_auth_file.c
              AuthUserFile \(folder.path("passwd"))
              RequireValidShell off
              DefaultRoot ~
              \(maxClientsPerUser.map { "MaxClientsPerUser \($0)" } ?? "")
            </VirtualHost>
            """
        try config.write(toFile: folder.path("proftpd.conf"), atomically: false, encoding: .utf8)
        pid = try LoopbackServer.spawn("/usr/sbin/proftpd", ["-n", "-c", folder.path("proftpd.conf")], output: folder.path("proftpd.out"))
        try LoopbackServer.waitForPort(port, name: "proftpd", log: folder.path("proftpd.out"))
    }

    /// `sftp://folio@127.0.0.1:port/<relative>`.
    public func url(_ relative: String = "") -> String { "sftp://\(user)@127.0.0.1:\(port)/\(relative)" }

    /// Stops the server and its sessions.
    public func stop() {
        guard pid != 0 else { return }
        LoopbackServer.stop(pid: pid)
        pid = 0
    }

    deinit { stop() }
}
