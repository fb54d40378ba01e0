import Foundation
import Glibc

/// Writes trees of files with exact bytes and mtimes, for sources to serve and tests to compare against.
public enum FixtureTree {
    /// Creates a file (and its folders) with the given content and, if given, mtime.
    /// A pipe that holds `text` and has no writer left, as `<(…)` hands one to a command: its path
    /// (`/proc/self/fd/N`), and the descriptor to close when done.
    public static func pipe(holding text: String) -> (path: String, fd: Int32) {
        var fds: [Int32] = [0, 0]
        precondition(Glibc.pipe(&fds) == 0, "pipe: \(errno)")
        let bytes = Array(text.utf8)
        precondition(Glibc.write(fds[1], bytes, bytes.count) == bytes.count, "a pipe holds 64 KiB")
        close(fds[1])
        return ("/proc/self/fd/\(fds[0])", fds[0])
    }

    public static func write(_ root: String, _ relative: String, _ content: [UInt8], mtime: (seconds: Int, nanoseconds: Int)? = nil) {
        let path = root + "/" + relative
        try! FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        precondition(fd >= 0, "cannot create \(path): \(errno)")
        content.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        if let mtime { setMtime(fd: fd, mtime) }
        close(fd)
    }

    public static func write(_ root: String, _ relative: String, _ text: String, mtime: (seconds: Int, nanoseconds: Int)? = nil) {
        write(root, relative, Array(text.utf8), mtime: mtime)
    }

    public static func makeFolder(_ root: String, _ relative: String) {
        try! FileManager.default.createDirectory(atPath: root + "/" + relative, withIntermediateDirectories: true)
    }

    /// Sets a path's mtime without following a symlink.
    public static func setMtime(_ path: String, _ mtime: (seconds: Int, nanoseconds: Int)) {
        var times = [timespec(tv_sec: mtime.seconds, tv_nsec: mtime.nanoseconds), timespec(tv_sec: mtime.seconds, tv_nsec: mtime.nanoseconds)]
        precondition(utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW) == 0, "utimensat \(path): \(errno)")
    }

    private static func setMtime(fd: Int32, _ mtime: (seconds: Int, nanoseconds: Int)) {
        var times = [timespec(tv_sec: mtime.seconds, tv_nsec: mtime.nanoseconds), timespec(tv_sec: mtime.seconds, tv_nsec: mtime.nanoseconds)]
        precondition(futimens(fd, &times) == 0)
    }

    /// Deterministic pseudo-random bytes (xorshift), so tests and benchmarks can regenerate the same tree.
    public static func bytes(count: Int, seed: UInt64) -> [UInt8] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        var out = [UInt8](repeating: 0, count: count)
        var i = 0
        while i < count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            var word = state
            for _ in 0..<8 where i < count {
                out[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
        return out
    }

    public static func read(_ path: String) -> [UInt8]? {
        FileManager.default.contents(atPath: path).map { Array($0) }
    }

    /// Every file and folder below `root` (relative paths, folders with a trailing `/`), for whole-tree asserts.
    public static func listing(_ root: String, skipping skipped: Set<String> = [".folio"]) -> [String] {
        var out: [String] = []
        func walk(_ relative: String) {
            let full = relative.isEmpty ? root : root + "/" + relative
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: full) else { return }
            for name in names.sorted() {
                if relative.isEmpty && skipped.contains(name) { continue }
                let child = relative.isEmpty ? name : relative + "/" + name
                var info = stat()
                guard lstat(root + "/" + child, &info) == 0 else { continue }
                if (info.st_mode & S_IFMT) == S_IFDIR {
                    out.append(child + "/")
                    walk(child)
                } else if (info.st_mode & S_IFMT) == S_IFLNK {
                    out.append(child + "@")
                } else {
                    out.append(child)
                }
            }
        }
        walk("")
        return out
    }

    /// A path's mtime in nanoseconds (not following links).
    public static func mtime(_ path: String) -> Int64? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec)
    }
}
