import Dispatch
import Foundation
import Glibc
import FolioCore

/// A real AF_UNIX datagram socket bound where `NOTIFY_SOCKET` will point, collecting every message a daemon sends,
/// as systemd's end of the notify protocol would.
final class NotifySocket: Sendable {
    /// What to put in `NOTIFY_SOCKET`: the path, or `@name` for the abstract namespace.
    let address: String
    private let fd: Int32
    private let received = Locked<[String]>([])
    private let done = DispatchSemaphore(value: 0)

    /// Binds a socket at `path`; with `abstract`, in the abstract namespace under that name instead.
    init(path: String, abstract: Bool = false) {
        address = abstract ? "@" + path : path
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        precondition(fd >= 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if abstract { bytes.insert(0, at: 0) }
        withUnsafeMutableBytes(of: &addr.sun_path) { $0.copyBytes(from: bytes) }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + bytes.count + (abstract ? 0 : 1))
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        precondition(bound == 0, "bind \(path): \(errno)")
        // A receive timeout lets the reader thread notice `close()`.
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let socketFD = fd, received = self.received, done = self.done
        // Why a thread of its own: recv blocks, and the test thread polls `messages` meanwhile.
        Thread.detachNewThread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while done.wait(timeout: .now()) == .timedOut {
                let count = recv(socketFD, &buffer, buffer.count, 0)
                if count > 0 {
                    let message = String(decoding: buffer.prefix(count), as: UTF8.self)
                    received.withLock { $0.append(message) }
                }
            }
            Glibc.close(socketFD)
        }
    }

    /// Every datagram so far, in order.
    var messages: [String] { received.withLock { $0 } }

    /// Every `KEY=VALUE` line so far, across datagrams.
    var lines: [String] { messages.flatMap { $0.split(separator: "\n").map(String.init) } }

    func close() { done.signal() }

    deinit { done.signal() }
}
