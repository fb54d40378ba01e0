import FolioCore
import Foundation
import Glibc

/// One run per target at a time, across processes: an exclusive `flock` on `<state-dir>/locks/<target>.lock`,
/// shared by `folio sync --now`, `folio mirror` and the daemon. The kernel drops the lock when its holder dies,
/// so a stale lock from a killed process is simply taken over. `Sendable`: it is taken on a dispatch queue and
/// handed to the run; its only state is the descriptor, set once.
final class TargetLock: Sendable {
    private let fd: Int32

    enum Failure: Error {
        case busy(String)
        case io(String)
    }

    private init(fd: Int32) { self.fd = fd }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }

    /// Takes the lock; with `wait`, blocks until the holder is done (calling `waiting` once with who holds it).
    /// Blocking: call it off the cooperative pool.
    static func acquire(target: String, stateDirectory: String, wait: Bool, waiting: (String) -> Void) throws(Failure) -> TargetLock {
        let folder = stateDirectory + "/locks"
        mkdir(folder, 0o700)
        let file = folder + "/" + fileName(for: target)
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .io("cannot open lock file \(file): \(String(cString: strerror(errno))); check the state directory's permissions") }
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            let holder = describeHolder(fd: fd, target: target)
            guard wait else {
                close(fd)
                throw .busy(holder)
            }
            waiting(holder)
            while flock(fd, LOCK_EX) != 0 {
                guard errno == EINTR else {
                    close(fd)
                    throw .io("cannot lock \(file): \(String(cString: strerror(errno)))")
                }
            }
        }
        let note = "\(getpid()) \(Int(Date().timeIntervalSince1970))\n"
        ftruncate(fd, 0)
        _ = note.withCString { pwrite(fd, $0, strlen($0), 0) }
        return TargetLock(fd: fd)
    }

    /// "target photos is being synced by pid 812 (started 12:03:11)".
    private static func describeHolder(fd: Int32, target: String) -> String {
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = pread(fd, &buffer, buffer.count, 0)
        let parts = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard parts.count == 2, let pid = Int(parts[0]), let started = TimeInterval(parts[1]) else {
            return "target \(target) is being synced by another folio process"
        }
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return "target \(target) is being synced by pid \(pid) (started \(formatter.string(from: Date(timeIntervalSince1970: started))))"
    }

    /// Target names are file-safe; `folio mirror` names (which hold a path) are hashed.
    private static func fileName(for target: String) -> String {
        if ConfigNames.isSafe(target) { return target + ".lock" }
        var digest = TreeDigest()
        digest.add(Array(target.utf8))
        return "mirror-" + String(digest.value, radix: 16) + ".lock"
    }
}

enum ConfigNames {
    static func isSafe(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { c in
            (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
        } && name != "." && name != ".."
    }
}
