import FolioCore
import Foundation
import Glibc

/// One run per destination at a time, across processes: an exclusive `flock` on `<destination>/.folio/lock`,
/// shared by `folio sync --now`, `folio mirror` and the daemon. The kernel drops the lock when its holder dies, so
/// a stale lock from a killed process is simply taken over.
///
/// Why the destination and not the target's name: `folio mirror SRC dst` and `… ./dst/`, a target of another
/// config file, or a target renamed by SIGHUP while its run goes on all write into one folder, and two runs in
/// one folder take each other's partial files away. Why a file in the folder itself, not in the state directory:
/// each process then finds the same file however it spells the path, and whatever its state directory (once,
/// `folio mirror`, which reads no config, and a daemon with `state-dir` set locked in two places and ran at once).
///
/// `Sendable`: it is taken on a dispatch queue and handed to the run; its state is set once.
final class TargetLock: Sendable {
    private let fd: Int32
    private let destination: String
    /// Whether taking the lock made the destination (it did not exist), or its `.folio` folder: see
    /// `removeDestinationIfUnused`.
    private let madeDestination: Bool
    private let madeFolioFolder: Bool

    enum Failure: Error {
        case busy(String)
        case io(String)
        /// A safety guard: the destination is missing where earlier runs left files (`notMountedRefusal`).
        case refused(String)
        /// A stop (SIGINT, SIGTERM) came while waiting.
        case stopped

        /// The one line a user reads.
        var message: String {
            switch self {
            case .busy(let holder): holder
            case .io(let message), .refused(let message): message
            case .stopped: "stopped while waiting for the other run"
            }
        }
    }

    private init(fd: Int32, destination: String, madeDestination: Bool, madeFolioFolder: Bool) {
        self.fd = fd
        self.destination = destination
        self.madeDestination = madeDestination
        self.madeFolioFolder = madeFolioFolder
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }

    /// Takes the lock for `target`'s destination; with `wait`, waits until the holder is done (calling `waiting`
    /// once with who holds it), polling so that `stopped` can end the wait. Blocking: call it off the
    /// cooperative pool.
    ///
    /// A destination that does not exist is made (with the folders above it), unless `remembered` (asked only
    /// then) says earlier runs left entries there: that destination is on a drive that is not mounted, and
    /// making it would fill the disk beneath, or leave a folder where a desktop's automounter (udisks) makes
    /// the drive's mountpoint, so that the drive then mounts elsewhere.
    static func acquire(_ target: TargetConfig, wait: Bool, waiting: (String) -> Void, stopped: () -> Bool = { false },
                        remembered: () -> Int = { 0 }) throws(Failure) -> TargetLock {
        let file = target.destination + "/.folio/lock"
        if access(target.destination, F_OK) != 0, errno == ENOENT {
            let count = remembered()
            if count > 0 { throw .refused(Destination.notMountedRefusal(target.destination, remembered: count)) }
        }
        var attempt = 0
        while true {
            attempt += 1
            let opened: (fd: Int32, madeDestination: Bool, madeFolioFolder: Bool)
            do { opened = try Destination.openLockFile(at: target.destination) } catch { throw .io(error.message) }
            try lock(opened.fd, file: file, destination: target.destination, wait: wait, waiting: waiting, stopped: stopped)
            // Why look again once locked: the holder we waited for may have taken away the folder it had made
            // (`removeDestinationIfUnused`), unlinking this file; a lock on an unlinked file excludes no one, so
            // start over with the file now at that name. Why by its link count, not by comparing inodes with the
            // name's: some filesystems (CIFS without server inodes, some FUSE ones) do not keep inode numbers
            // steady, and a false "replaced" would loop. Bounded, and a stop ends it, in case a filesystem
            // reports no links for a file that is still there.
            var held = stat()
            let sized = fstat(opened.fd, &held) == 0
            if sized, held.st_nlink == 0, attempt < 5, !stopped() {
                close(opened.fd)
                continue
            }
            let note = "\(getpid()) \(Int(Date().timeIntervalSince1970)) \(target.name)\n"
            // Why over the old note, cut only where it was longer: emptying the file first freed its block at
            // every run, and on a filesystem mounted with `discard` (ext4 on many cloud disks) freeing a block
            // waits for the device to discard it: 0.2 ms typically on this disk, up to 7 ms, at every run. The
            // note is read back whole (`sourceFolderHolding`, and who holds the lock), so no tail of the old one
            // may stay: cut when the old size is unknown too, and empty a note that could not be written whole.
            let bytes = Array(note.utf8)
            let written = bytes.withUnsafeBytes { pwrite(opened.fd, $0.baseAddress, $0.count, 0) }
            if written != bytes.count {
                ftruncate(opened.fd, 0)
            } else if !sized || held.st_size > written {
                ftruncate(opened.fd, off_t(written))
            }
            if let source = sourceFolderHolding(note, target: target) {
                close(opened.fd)
                // What taking the lock made is in the source: take it away.
                if opened.madeFolioFolder, unlink(file) == 0 { rmdir(target.destination + "/.folio") }
                throw .io("destination \(target.destination) is its source \(source), the same folder under another name (a filesystem that ignores case, a second mount?); choose a destination outside it")
            }
            return TargetLock(fd: opened.fd, destination: target.destination, madeDestination: opened.madeDestination,
                              madeFolioFolder: opened.madeFolioFolder)
        }
    }

    /// A local source whose `.folio/lock` holds the note this run just wrote in its destination's: the two are
    /// one folder under names that no path or inode check can match (exFAT through FUSE gives each spelling of a
    /// name its own inode). Why it matters: a run into its own source would move the source's skipped entries
    /// to the trash. The source's path; nil when they differ.
    private static func sourceFolderHolding(_ note: String, target: TargetConfig) -> String? {
        guard case .local(let source)? = try? SourceLocation(parsing: target.source).kind else { return nil }
        let fd = open(source + "/.folio/lock", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let count = pread(fd, &buffer, buffer.count, 0)
        return count > 0 && buffer.prefix(count).elementsEqual(note.utf8) ? source : nil
    }

    /// Takes the `flock` on `fd` (closing it on failure), waiting for the holder when `wait` is set.
    private static func lock(_ fd: Int32, file: String, destination: String, wait: Bool, waiting: (String) -> Void,
                             stopped: () -> Bool) throws(Failure) {
        if flock(fd, LOCK_EX | LOCK_NB) != 0 {
            // Only EWOULDBLOCK means another holder; a filesystem that cannot lock (ENOLCK on some network shares)
            // is said as such, not retried as "busy" for ever.
            guard errno == EWOULDBLOCK || errno == EINTR else {
                let code = errno
                close(fd)
                throw .io("cannot lock \(file): \(String(cString: strerror(code))); the destination's filesystem must support flock")
            }
            let holder = describeHolder(fd: fd, destination: destination)
            guard wait else {
                close(fd)
                throw .busy(holder)
            }
            waiting(holder)
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                guard errno == EWOULDBLOCK || errno == EINTR else {
                    close(fd)
                    throw .io("cannot lock \(file): \(String(cString: strerror(errno)))")
                }
                if stopped() {
                    close(fd)
                    throw .stopped
                }
                usleep(100_000)
            }
        }
    }

    /// After a run that did not bring the destination in step: when taking the lock made the destination or its
    /// `.folio` folder, and the run left nothing in it but Folio's own empty folders, takes away what it made
    /// (see `Destination.removeIfUnused`), so that a mistyped source does not leave an empty folder behind, nor
    /// a refused run a `.folio` in the empty mountpoint of a drive that is not mounted. `keepingDestination`: the
    /// daemon's, which keeps a destination it made (`Scheduler.attempt`) but takes its `.folio` away.
    func removeDestinationIfUnused(keepingDestination: Bool = false) {
        guard madeFolioFolder else { return }
        Destination.removeIfUnused(destination, includingDestination: madeDestination && !keepingDestination)
    }

    /// "target photos is being synced by pid 812 (started 12:03:11)": the holder's target, which may be another
    /// name for the same folder ("… into /srv/photos" then says which).
    private static func describeHolder(fd: Int32, destination: String) -> String {
        var buffer = [UInt8](repeating: 0, count: 4_096)
        let count = pread(fd, &buffer, buffer.count, 0)
        let line = String(decoding: buffer.prefix(max(0, count)), as: UTF8.self).split(separator: "\n").first ?? ""
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count == 3, let pid = Int(parts[0]), let started = TimeInterval(parts[1]) else {
            return "\(destination) is being synced by another folio process"
        }
        let formatter = DateFormatter()
        formatter.dateFormat = "HH:mm:ss"
        return "target \(parts[2]) is being synced by pid \(pid) (started \(formatter.string(from: Date(timeIntervalSince1970: started))))"
            + " into \(destination)"
    }
}
