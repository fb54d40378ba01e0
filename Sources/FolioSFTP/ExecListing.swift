import FolioCore

/// The fast listing path: the root resolved and the whole tree listed in one `find -printf` over one exec
/// channel, when the server allows exec and has GNU find. Records are NUL-separated, so any byte but NUL and `/`
/// in a name survives intact.
enum ExecListing {
    static let endMarker: [UInt8] = Array("folio-listing-end".utf8)

    /// The shell command listing `root` (the path as configured): the root's real path (`pwd -P`, then a NUL),
    /// then type, size, mtime with nanoseconds and relative path of every entry, each field NUL-terminated; the
    /// end marker is printed only when find succeeded completely. Nothing at all when the root cannot be entered:
    /// the caller then asks over SFTP, which says why. With `next`, that command runs after the listing, in the
    /// root, once the probe is read off stdin (after the listing: the listing must not wait for the probe, which
    /// goes out only once the server confirmed the command started).
    ///
    /// Why the root is resolved here: asking SFTP (realpath, then stat) first would cost three round trips to
    /// start the subsystem and two for the requests, before the listing could start.
    static func command(root: [UInt8], then next: String?) -> String {
        let quoted = SFTPEndpoint.shellQuoted(String(decoding: root, as: UTF8.self))
        let listing = "CDPATH= cd -P -- \(quoted) 2>/dev/null && pwd -P && printf '\\0' && LC_ALL=C find . -mindepth 1 -printf '%y\\0%s\\0%T@\\0%P\\0' 2>/dev/null && printf '\(String(decoding: endMarker, as: UTF8.self))\\0'"
        guard let next else { return listing }
        return "\(listing) && head -c \(probe.count) >/dev/null && \(next)"
    }

    /// What the listing writes to stdin when a command follows it (which must not see EOF): an SFTP `INIT`
    /// packet, which the shell reads and drops after the listing. Why this packet: on an account whose every
    /// command is the SFTP server (`ForceCommand internal-sftp`), it gets an answer at once, which the listing
    /// then refuses, instead of waiting for a server that waits for input.
    static let probe: [UInt8] = [0, 0, 0, 5, 1, 0, 0, 0, 3]

    /// What `run` got.
    enum Outcome {
        /// The whole listing, its records handed to `take` as they arrived, and the root's real path.
        case listed(realRoot: [UInt8])
        /// Output incomplete, malformed, over the limit, or not the listing's (find missing, a login banner), or a
        /// record `take` refused.
        case notListed
        /// The server does not run shell commands for this account: it refused the exec, or answered with
        /// something else before the root's path (an SFTP server's answer to the probe, OpenSSH's "This service
        /// allows sftp connections only", a restricted shell's banner). `tar` would not run either: a batch takes
        /// no bytes before the archive.
        case noCommands
    }

    /// Runs the listing on a new channel of `session`, handing each record to `take` as its bytes arrive; `take`
    /// returns false for a record that makes the output untrustworthy. With `next`, the channel stays open at the
    /// end marker, `next` waiting for its input, and the session keeps it (`SSHSession.keepWaiting`).
    ///
    /// Why records go out as they arrive: held whole, the output of 100,000 entries took 9 MB and its parsed
    /// records 8 MB more, beside the entries made of them; a run's peak memory was the listing's.
    static func run(on session: SSHSession, root: [UInt8], then next: String?, limit: Int,
                    _ take: (Record) -> Bool) throws(LibSSH2Error) -> Outcome {
        let channel: ExecChannel
        do { channel = try session.start(command(root: root, then: next)) } catch {
            if error.isRequestDenied { return .noCommands }
            throw error
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 << 10, alignment: 16)
        defer { buffer.deallocate() }
        if next == nil {
            // Why EOF at once: under `ForceCommand internal-sftp` the "command" is an SFTP server waiting on stdin.
            try channel.endInput()
        } else {
            try channel.write(probe)
        }
        var parser = Parser()
        var total = 0
        while true {
            let count = try channel.read(into: buffer)
            if count == 0 { break }
            // An SFTP server's answer or a login banner is not a listing, which starts with the root's path.
            if total == 0, buffer[0] != UInt8(ascii: "/") {
                channel.close()
                return .noCommands
            }
            total += count
            guard total <= limit, parser.read(UnsafeRawBufferPointer(rebasing: buffer[0..<count]), take) else {
                channel.close()
                return .notListed
            }
            if next != nil, parser.ended, let realRoot = parser.realRoot {
                session.keepWaiting(channel)
                return .listed(realRoot: realRoot)
            }
        }
        guard channel.close() == 0, parser.ended, let realRoot = parser.realRoot else { return .notListed }
        return .listed(realRoot: realRoot)
    }

    struct Record {
        var type: UInt8
        var size: Int64
        var mtime: FileTime
        /// The path relative to the root, as raw bytes (valid while `take` runs).
        var path: ArraySlice<UInt8>
    }

    /// Parses the command's output as it arrives, in one pass over the bytes: the root's real path, then the
    /// records. Only the bytes of a record not yet whole are kept between reads.
    struct Parser {
        /// What was read and not yet parsed: the start of the next record (or of the root's line).
        private var unread: [UInt8] = []
        /// The root's real path, once its line was read.
        private(set) var realRoot: [UInt8]?
        /// Whether the output so far ends with the end marker, read where a record's type would be.
        private(set) var ended = false
        private var malformed = false

        /// Parses `bytes`, handing each whole record to `take`. False once the output is truncated or malformed in
        /// any way (the caller then lists by readdir), or `take` refused a record.
        mutating func read(_ bytes: some Collection<UInt8>, _ take: (Record) -> Bool) -> Bool {
            guard !malformed else { return false }
            // Nothing follows the end marker: a listing whose tar waits after it has tar's silence there.
            if ended, !bytes.isEmpty { malformed = true }
            unread.append(contentsOf: bytes)
            var cursor = unread.startIndex
            defer { unread.removeSubrange(..<cursor) }
            /// The NUL-terminated field at `start` and where the next begins, or nil when its end is not here yet.
            func field(at start: Int) -> (bytes: ArraySlice<UInt8>, next: Int)? {
                guard start < unread.endIndex, let end = unread[start...].firstIndex(of: 0) else { return nil }
                return (unread[start..<end], end + 1)
            }
            if realRoot == nil, !malformed {
                guard let (line, next) = field(at: cursor) else { return true }
                // `pwd -P` prints an absolute path and a newline.
                guard line.first == UInt8(ascii: "/"), line.last == UInt8(ascii: "\n") else {
                    malformed = true
                    return false
                }
                realRoot = Array(line.dropLast())
                cursor = next
            }
            while !malformed, let (type, afterType) = field(at: cursor) {
                if type.count != 1 {
                    // The marker only as the last bytes: a file named like it is a path, never a type.
                    guard type.elementsEqual(endMarker), afterType == unread.endIndex else {
                        malformed = true
                        break
                    }
                    ended = true
                    cursor = afterType
                    break
                }
                guard let (sizeField, afterSize) = field(at: afterType), let (timeField, afterTime) = field(at: afterSize),
                      let (path, afterPath) = field(at: afterTime) else { break }
                guard let size = parseInteger(sizeField), let mtime = parseTime(timeField), !path.isEmpty, path.first != UInt8(ascii: "/"),
                      take(Record(type: type.first!, size: size, mtime: mtime, path: path)) else {
                    malformed = true
                    break
                }
                cursor = afterPath
            }
            // No record of a real tree is that long (a path past PATH_MAX is no path): rescanned at every read, a
            // hostile one of megabytes would take time in the square of its length.
            if unread.count - cursor > Self.longestRecord { malformed = true }
            return !malformed
        }

        /// The most bytes one record (or the root's line) may take.
        static let longestRecord = 64 << 10
    }

    /// A non-negative decimal integer of at most 18 digits.
    static func parseInteger(_ digits: ArraySlice<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// `%T@`: seconds, a dot and up to ten fractional digits (GNU find prints nanoseconds and a trailing 0).
    /// Before 1970 the two parts are the `timespec`'s as they are, not one decimal: half a second after
    /// -31536000 prints as `-31536000.5000000000`, so the fraction is added to the signed seconds, not subtracted.
    static func parseTime(_ field: ArraySlice<UInt8>) -> FileTime? {
        var text = field
        let negative = text.first == UInt8(ascii: "-")
        if negative { text = text.dropFirst() }
        let dot = text.firstIndex(of: UInt8(ascii: "."))
        guard let seconds = parseInteger(text[..<(dot ?? text.endIndex)]) else { return nil }
        var nanoseconds: Int64 = 0
        if let dot {
            let fraction = text[(dot + 1)...]
            guard let digits = parseInteger(fraction.prefix(9)), fraction.dropFirst(9).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            nanoseconds = digits
            for _ in fraction.prefix(9).count..<9 { nanoseconds *= 10 }
        }
        return FileTime(seconds: negative ? -seconds : seconds, nanoseconds: nanoseconds)
    }
}
