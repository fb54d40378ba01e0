import Foundation
import Glibc

/// A real OpenSSH sshd on 127.0.0.1 with its own config, host key and an ed25519 user key in a temp folder,
/// for SFTP tests, the daemon's tests and benchmarks. Stopped by PID (with its per-connection children).
public final class SSHServer: @unchecked Sendable {
    // Why @unchecked Sendable: tests drive one server from one test method; `pid` is only changed by
    // start()/stop(), which a test calls in sequence.
    public let folder: TemporaryDirectory
    public let host = "127.0.0.1"
    public let port: Int
    /// The user tests log in as (the one running the tests unless given).
    public let user: String
    /// The ed25519 private key in `authorized_keys` (no passphrase).
    public let userKeyPath: String
    /// A known_hosts file listing this server's current host key as `[127.0.0.1]:port`.
    public let knownHostsPath: String
    /// The ed25519 host key, the one `knownHostsPath` lists.
    public let hostKeyPath: String
    /// A second host key, ECDSA (nistp256), when asked for: a server offering both, as a stock sshd does.
    public let ecdsaHostKeyPath: String?
    public var configPath: String { folder.path("sshd_config") }
    public var logPath: String { folder.path("sshd.log") }
    private let forceInternalSFTP: Bool
    private let sftpSubsystem: Bool
    private let commandPath: String?
    private let extraConfig: [String]
    private let passwordLogin: PasswordLogin

    /// How the server takes passwords: not at all, by sshd's own `password` method, or only at a PAM prompt
    /// (`keyboard-interactive`, as FreeBSD's and macOS's sshd do by default).
    public enum PasswordLogin: Sendable {
        case none, password, keyboardInteractive
    }

    /// The PID of the listening sshd (0 when stopped).
    public private(set) var pid: pid_t = 0

    /// Generates keys, writes the config and starts sshd. `forceInternalSFTP` adds `ForceCommand internal-sftp`
    /// (no exec); `sftpSubsystem: false` leaves out the SFTP subsystem (exec only, a bare shell account); `user`
    /// is the account to log in as; `commandPath` is the `PATH` commands run with (to leave a tool out);
    /// `extraConfig` lines are added to sshd_config (e.g. to narrow its algorithms); `ecdsaHostKey` gives the server
    /// an ECDSA host key beside its ed25519 one; `passwordLogin` lets it take passwords.
    public init(forceInternalSFTP: Bool = false, sftpSubsystem: Bool = true, user: String? = nil, commandPath: String? = nil,
                extraConfig: [String] = [], ecdsaHostKey: Bool = false, passwordLogin: PasswordLogin = .none) throws {
        self.passwordLogin = passwordLogin
        folder = TemporaryDirectory("sshd")
        self.forceInternalSFTP = forceInternalSFTP
        self.sftpSubsystem = sftpSubsystem
        self.commandPath = commandPath
        self.extraConfig = extraConfig
        self.user = user ?? String(cString: getpwuid(geteuid())!.pointee.pw_name)
        hostKeyPath = folder.path("host_ed25519")
        ecdsaHostKeyPath = ecdsaHostKey ? folder.path("host_ecdsa") : nil
        userKeyPath = folder.path("user_ed25519")
        knownHostsPath = folder.path("known_hosts")
        port = try LoopbackServer.freePort()
        try Self.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "folio-test-host", "-f", hostKeyPath])
        try Self.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "folio-test-user", "-f", userKeyPath])
        if let ecdsaHostKeyPath {
            try Self.run("/usr/bin/ssh-keygen", ["-q", "-t", "ecdsa", "-b", "256", "-N", "", "-C", "folio-test-host", "-f", ecdsaHostKeyPath])
        }
        try FileManager.default.copyItem(atPath: userKeyPath + ".pub", toPath: folder.path("authorized_keys"))
        chmod(folder.path("authorized_keys"), 0o644)
        chmod(folder.path, 0o755)
        try writeKnownHosts()
        try writeConfig()
        try start()
    }

    /// The `sftp://user@127.0.0.1:port/path` URL of a local folder, percent-encoding what a URL path cannot hold.
    public func url(_ path: String) -> String {
        var encoded = ""
        for byte in path.utf8 {
            if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "#") || byte == UInt8(ascii: "?") || byte < 0x20 {
                encoded += String(format: "%%%02X", byte)
            } else {
                encoded += String(decoding: [byte], as: UTF8.self)
            }
        }
        return "sftp://\(user)@\(host):\(port)\(encoded)"
    }

    public func start() throws {
        guard pid == 0 else { return }
        if !FileManager.default.fileExists(atPath: "/run/sshd") {
            try FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        // Why posix_spawn and not Foundation.Process: Process's SIGCHLD handling blocks in wait4 on a long-lived
        // child, deadlocking the next short-lived Process (chmod, ssh-keygen) the tests run.
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let arguments = ["/usr/sbin/sshd", "-D", "-e", "-f", configPath]
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, "/usr/sbin/sshd", &actions, nil, &argv, environ)
        guard status == 0 else { throw ServerError(message: "cannot start sshd: errno \(status)") }
        pid = child
        // Wait until sshd greets on the port (it binds after reading its keys).
        for _ in 0..<200 {
            var exitStatus: Int32 = 0
            if waitpid(child, &exitStatus, WNOHANG) == child {
                pid = 0
                break
            }
            if Self.greets(port: port) { return }
            usleep(25_000)
        }
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        stop()
        throw ServerError(message: "sshd did not start on port \(port): \(text)")
    }

    /// sshd's log once it holds `text`, or as it is after `seconds`. Why wait: a session's sshd writes some lines
    /// (its "Accepted …") through its privileged monitor, which may reach the log after the client saw the answer.
    public func log(waitingFor text: String, seconds: Double = 10) -> String {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while true {
            let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            if log.contains(text) || ContinuousClock.now >= deadline { return log }
            usleep(20_000)
        }
    }

    /// Stops sshd and every connection it serves: SIGTERM by default, SIGKILL to simulate a crash.
    /// Sends `signal` to the sessions only (sshd's children and theirs), not the listening sshd: SIGSTOP makes
    /// every open connection stall, as a server gone from the network does, and SIGCONT lets them go on.
    public func signalSessions(_ signal: Int32) {
        guard pid != 0 else { return }
        for child in Self.descendants(of: pid) { kill(child, signal) }
    }

    public func stop(signal: Int32 = SIGTERM) {
        guard pid != 0 else { return }
        for child in Self.descendants(of: pid) { kill(child, signal) }
        kill(pid, signal)
        var exitStatus: Int32 = 0
        _ = waitpid(pid, &exitStatus, 0)
        pid = 0
    }

    /// Replaces the host key (the known_hosts file keeps the old one); takes effect at the next start.
    public func replaceHostKey() throws {
        try? FileManager.default.removeItem(atPath: hostKeyPath)
        try? FileManager.default.removeItem(atPath: hostKeyPath + ".pub")
        try Self.run("/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-C", "folio-test-host", "-f", hostKeyPath])
    }

    /// A host key's fingerprint as `ssh-keygen -l` prints it (`SHA256:…`); the ed25519 key's unless another is named.
    public func hostKeyFingerprint(_ keyPath: String? = nil) throws -> String {
        let output = try Self.run("/usr/bin/ssh-keygen", ["-l", "-E", "sha256", "-f", (keyPath ?? hostKeyPath) + ".pub"])
        return output.split(separator: " ")[1].description
    }

    /// The known_hosts line (`[127.0.0.1]:port type base64`) of a host key; the ed25519 key's unless another is named.
    public func knownHostsLine(_ keyPath: String? = nil) throws -> String {
        let publicKey = try String(contentsOfFile: (keyPath ?? hostKeyPath) + ".pub", encoding: .utf8).split(separator: " ").prefix(2).joined(separator: " ")
        return "[\(host)]:\(port) \(publicKey)"
    }

    /// Generates another key pair in the server's folder (not authorized), e.g. to test a refused log-in.
    public func makeUnauthorizedKey(type: String = "ed25519", passphrase: String = "") throws -> String {
        let path = folder.path("other_\(type)_\(UUID().uuidString.prefix(6))")
        try Self.run("/usr/bin/ssh-keygen", ["-q", "-t", type, "-N", passphrase, "-f", path])
        return path
    }

    /// Adds a key's `.pub` to the server's authorized_keys.
    public func authorize(_ privateKeyPath: String) throws {
        let line = try String(contentsOfFile: privateKeyPath + ".pub", encoding: .utf8)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: folder.path("authorized_keys")))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(line.utf8))
    }

    /// Rewrites the known_hosts file with hashed host names, as `HashKnownHosts yes` leaves it.
    public func hashKnownHosts() throws {
        try Self.run("/usr/bin/ssh-keygen", ["-H", "-f", knownHostsPath])
    }

    deinit { stop() }

    private func writeKnownHosts() throws {
        try (knownHostsLine() + "\n").write(toFile: knownHostsPath, atomically: false, encoding: .utf8)
    }

    private func writeConfig() throws {
        var lines = [
            "ListenAddress \(host)", "Port \(port)", "HostKey \(hostKeyPath)",
            "AuthorizedKeysFile \(folder.path("authorized_keys"))", "PidFile \(folder.path("sshd.pid"))",
            "StrictModes no", "UsePAM \(passwordLogin == .keyboardInteractive ? "yes" : "no")", "PermitRootLogin prohibit-password",
            "PasswordAuthentication \(passwordLogin == .password ? "yes" : "no")",
            "KbdInteractiveAuthentication \(passwordLogin == .keyboardInteractive ? "yes" : "no")",
            "LogLevel VERBOSE",
        ]
        if let ecdsaHostKeyPath { lines.append("HostKey \(ecdsaHostKeyPath)") }
        if sftpSubsystem { lines.append("Subsystem sftp internal-sftp") }
        if forceInternalSFTP { lines.append("ForceCommand internal-sftp") }
        if let commandPath { lines.append("SetEnv PATH=\(commandPath)") }
        lines += extraConfig
        try (lines.joined(separator: "\n") + "\n").write(toFile: configPath, atomically: false, encoding: .utf8)
    }

    public struct ServerError: Error, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    @discardableResult
    static func run(_ tool: String, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ServerError(message: "\(tool) \(arguments) failed: \(output)") }
        return output
    }

    /// Whether an SSH server on the port sends its identification line. Why not only connect: the kernel
    /// completes a connection before sshd accepts it, and the child sshd then forks holds the listening socket
    /// until it starts on the connection. A `stop()` that came in between killed the listener but not that
    /// child, and a test's next connection to the stopped port could land in the socket it still held and be
    /// reset ("Failed getting banner" where "Connection refused" was due; once in 24 runs under load). The
    /// greeting comes from that child once it has let go of the socket.
    static func greets(port: Int) -> Bool {
        guard let fd = LoopbackServer.connect(port: port) else { return false }
        defer { close(fd) }
        var wait = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        var greeting = [UInt8](repeating: 0, count: 4)
        var count = 0
        while count < greeting.count {
            let read = greeting[count...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard read > 0 else { return false }
            count += read
        }
        return greeting == Array("SSH-".utf8)
    }

    /// Every process below `root`, from /proc (sshd forks a monitor and a child per connection).
    static func descendants(of root: Int32) -> [Int32] {
        var parents: [Int32: [Int32]] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = Int32(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = Int32(fields[1]) { parents[parent, default: []].append(pid) }
        }
        var out: [Int32] = []
        var queue = [root]
        while let next = queue.popLast() {
            for child in parents[next] ?? [] {
                out.append(child)
                queue.append(child)
            }
        }
        return out
    }
}
