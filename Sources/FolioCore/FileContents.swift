import Glibc

/// A whole file read with `read(2)` to its end: a pipe (`--config <(…)`, `/dev/stdin`) or a character device
/// (`/dev/null`) reads as a regular file does, where Foundation's `contents(atPath:)` gives up on them.
public enum FileContents {
    /// The largest file read: a configuration or a secret is a few KB; a bigger one is the wrong file.
    public static let limit = 16 << 20

    /// Why a read failed: the C `errno`, and its text.
    public struct Failure: Error, Sendable, Equatable {
        /// The `errno` value.
        public let code: Int32
        /// `strerror`'s text for it ("Permission denied").
        public var reason: String { String(cString: strerror(code)) }
    }

    /// The bytes of `path`, or the `errno` of what failed (`EFBIG` past `limit`).
    public static func read(_ path: String) -> Result<[UInt8], Failure> {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(Failure(code: errno)) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return .success(bytes) }
            if count < 0 {
                if errno == EINTR { continue }
                return .failure(Failure(code: errno))
            }
            bytes += chunk[..<count]
            if bytes.count > limit { return .failure(Failure(code: EFBIG)) }
        }
    }
}
