import Foundation
import Glibc

/// What the loopback server fixtures (nginx, Apache, the Python stub) share: free ports, waiting for a port,
/// stopping by PID, running a helper command, percent-encoding a served path into a URL.
public enum LoopbackServer {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// A TCP port on 127.0.0.1 that nothing listens on right now.
    public static func freePort() throws -> Int {
        let (fd, port) = try boundSocket(listening: false)
        close(fd)
        return port
    }

    /// A socket listening on a free port of 127.0.0.1 that nothing accepts from: the kernel's backlog completes
    /// connections, and they get no answer, as from a hung server. The caller closes `fd` (or accepts on it).
    public static func listeningSocket() throws -> (fd: Int32, port: Int) {
        try boundSocket(listening: true)
    }

    private static func boundSocket(listening: Bool) throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(fd, pointer, length) == 0, !listening || listen(fd, 16) == 0 else { return -1 }
                return getsockname(fd, pointer, &length)
            }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw Failure("bind or listen: errno \(code)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// Whether something accepts connections on 127.0.0.1:port.
    public static func accepts(port: Int) -> Bool {
        guard let fd = connect(port: port) else { return false }
        close(fd)
        return true
    }

    /// A socket connected to 127.0.0.1:port (the caller closes it), or nil when nothing accepts there.
    public static func connect(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else {
            close(fd)
            return nil
        }
        return fd
    }

    /// Waits (up to 10 s) for the port to accept; `log` is shown when it does not.
    public static func waitForPort(_ port: Int, name: String, log: String) throws {
        for _ in 0..<400 {
            if accepts(port: port) { return }
            usleep(25_000)
        }
        throw Failure("\(name) did not start on port \(port): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "no log")")
    }

    /// The PID written in a pid file, once it is there.
    public static func pid(from file: String) -> Int32? {
        for _ in 0..<400 {
            if let text = try? String(contentsOfFile: file, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
                return pid
            }
            usleep(25_000)
        }
        return nil
    }

    /// Sends `signal` to a process and its descendants, then waits (up to 10 s) until the process is gone.
    public static func stop(pid: Int32, signal: Int32 = SIGTERM) {
        // The parent first: a master (nginx) that outlived its workers would start new ones.
        let children = descendants(of: pid)
        kill(pid, signal)
        for child in children { kill(child, signal) }
        for _ in 0..<400 {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid || !isAlive(pid) { return }
            usleep(25_000)
        }
    }

    /// Whether a process exists and is not a zombie (a daemon's parent in a container may never reap it).
    public static func isAlive(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
    }

    /// Every process whose parent chain leads to `pid` (read from /proc).
    public static func descendants(of pid: Int32) -> [Int32] {
        var parents: [Int32: Int32] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = Int32(name), let stat = try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, let parent = Int32(fields[1]) { parents[child] = parent }
        }
        var found: [Int32] = []
        var frontier = [pid]
        while let next = frontier.popLast() {
            for (child, parent) in parents where parent == next {
                found.append(child)
                frontier.append(child)
            }
        }
        return found
    }

    /// Runs a command to completion; throws with its output when it fails.
    ///
    /// With posix_spawn and waitpid rather than Foundation's Process: a daemon (nginx, `apache2 -k start`) forks
    /// and its first process must be reaped at once, and output goes to a file, not a pipe, since the daemon
    /// keeps inherited descriptors open.
    @discardableResult
    public static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let capture = FileManager.default.temporaryDirectory.appendingPathComponent("folio-run-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: capture) }
        let pid = try spawn(executable, arguments, output: capture)
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0, errno == EINTR {}
        let output = (try? String(contentsOfFile: capture, encoding: .utf8)) ?? ""
        guard status == 0 else { throw Failure("\(executable) \(arguments.joined(separator: " ")) failed (status \(status)): \(output)") }
        return output
    }

    /// Starts a program (looked up in PATH) with stdin from /dev/null and stdout+stderr to `output`.
    ///
    /// The child gets an empty signal mask and default handlers: the test process's threads block signals,
    /// and a mask inherited that way would make a server (Apache) ignore the SIGTERM that stops it.
    public static func spawn(_ executable: String, _ arguments: [String], output: String) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), defaults = sigset_t()
        sigemptyset(&empty)
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGPIPE, SIGUSR1, SIGUSR2] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw Failure("cannot run \(executable): errno \(spawned)") }
        return pid
    }

    /// Percent-encodes a path below a served root for a URL (everything but unreserved bytes and `/`).
    public static func encodePath(_ path: String) -> String {
        var out = ""
        for byte in path.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                out.append(Character(Unicode.Scalar(byte)))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }

    /// A self-signed certificate for 127.0.0.1 in `folder`: returns (certificate, key) paths.
    public static func makeCertificate(in folder: String, name: String? = nil) throws -> (certificate: String, key: String) {
        let certificate = folder + "/cert.pem", key = folder + "/key.pem"
        try run("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                     "-keyout", key, "-out", certificate, "-days", "2", "-subj", "/CN=\(name ?? "127.0.0.1")",
                                     "-addext", name.map { "subjectAltName=DNS:\($0)" } ?? "subjectAltName=IP:127.0.0.1"])
        return (certificate, key)
    }
}
