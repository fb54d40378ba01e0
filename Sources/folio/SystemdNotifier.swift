import Foundation
import Glibc

/// systemd's notification protocol (sd_notify(3)) without linking libsystemd: one datagram per message,
/// `KEY=VALUE` lines, sent to the AF_UNIX socket named by `$NOTIFY_SOCKET` (abstract when it starts with `@`).
///
/// Sending never blocks (`MSG_DONTWAIT`), so it may be called from any task: a full socket queue drops the
/// message, which for READY, STATUS and WATCHDOG is what sd_notify does too.
final class SystemdNotifier: Sendable {
    private let fd: Int32
    private let address: sockaddr_un
    private let addressLength: socklen_t
    /// How often systemd expects WATCHDOG=1 (`WatchdogSec=`), when it asked this process for it.
    let watchdogInterval: Duration?

    /// Nil when not started by systemd with `Type=notify` (no usable `$NOTIFY_SOCKET`).
    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        // A path socket needs room for its terminating NUL; an abstract one is counted by length alone.
        guard bytes.count < capacity || (abstract && bytes.count <= capacity), bytes.first != nil,
              abstract || bytes[0] == UInt8(ascii: "/") else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)!
        addressLength = socklen_t(pathOffset + bytes.count + (abstract ? 0 : 1))
        self.address = address
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        watchdogInterval = Self.watchdog(environment)
    }

    deinit { close(fd) }

    /// Sends one message, e.g. "READY=1" or "STATUS=syncing photos". A failure is ignored, as sd_notify's callers
    /// do: systemd may not be listening (yet, or any more), and the daemon's work does not depend on it.
    func send(_ message: String) {
        var target = address
        let bytes = Array(message.utf8)
        _ = withUnsafePointer(to: &target) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), socketAddress, addressLength) }
            }
        }
    }

    /// `WATCHDOG_USEC`, when `WATCHDOG_PID` is absent or names this process (as sd_watchdog_enabled(3) checks).
    private static func watchdog(_ environment: [String: String]) -> Duration? {
        guard let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0 else { return nil }
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return .microseconds(microseconds)
    }
}
