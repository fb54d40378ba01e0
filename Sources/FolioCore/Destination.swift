import CFolioSys
import Foundation
import Glibc

/// The destination folder, written only through descriptors: every path is opened one name at a time with
/// `O_NOFOLLOW` from the root's descriptor, so a symlink planted in the destination cannot redirect a write.
///
/// Layout: `<root>/.folio/partial/<0-f>/` holds downloads in progress (sixteen shards, so parallel workers do not
/// all queue on one folder's lock to create and rename), `<root>/.folio/trash/<run>/` what a run removed or
/// replaced, in the same tree shape.
public final class Destination: Sendable {
    /// The destination folder's path as given: opened once by `init`, then used to name things in messages.
    public let path: String
    let rootFD: Int32
    let partialFD: Int32
    /// The sixteen shard folders of `partial/`, by the first hex digit of a partial file's name.
    let shardFDs: [Int32]
    let trashFD: Int32
    /// Whether large downloads are written with direct I/O here (see `DownloadSink` and
    /// `FileSystemType.takesDirectIO`).
    let takesDirectIO: Bool
    /// How finely this filesystem keeps modification times. Where it cuts them down (FAT, exFAT, ext4 with
    /// small inodes, many network shares), a copy's time can never equal the source's to the nanosecond, and
    /// comparing finer than this would fetch every file again on every run.
    public let timePrecision: TimePrecision
    /// Whether this filesystem takes names that differ only in case for one name (exFAT, FAT, an SMB share of a
    /// Windows server, ext4 with casefold): two such source names cannot both be mirrored here (`CaseClashes`).
    public let ignoresCase: Bool
    /// Of the bytes Windows refuses in a name (`"*:<>?\|`), those this filesystem refuses too, and whether it
    /// refuses a name that is not UTF-8 (exFAT, FAT): `UnholdableNames`. Probed only where case is ignored (the
    /// filesystems that refuse them do; ntfs3's `windows_names` aside) and only by a run that writes.
    public let refusedNameBytes: Set<UInt8>
    public let refusesNonUTF8Names: Bool
    /// The times this filesystem keeps, where they are limited (FAT's and exFAT's: `KeptTimeRange.fat`); nil
    /// where they are not. Known from the filesystem's type, not probed: exfat-fuse shows the time set, unclamped,
    /// until the drive is mounted again.
    public let timeRange: KeptTimeRange?

    /// Opens (and with `create`, makes) the destination and its `.folio` folders.
    public init(path: String, create: Bool) throws(SourceError) {
        self.path = path
        let root = try Self.openRoot(path, create: create)
        var partial: Int32 = -1, trash: Int32 = -1
        var shards: [Int32] = []
        var precision = TimePrecision.nanosecond
        var foldsCase = false
        var refused: (bytes: Set<UInt8>, nonUTF8: Bool) = ([], false)
        if create {
            do {
                let folio = try Self.makeFolder(in: root, name: ".folio", display: path + "/.folio")
                defer { close(folio) }
                partial = try Self.makeFolder(in: folio, name: "partial", display: path + "/.folio/partial")
                for digit in 0..<16 {
                    let name = String(digit, radix: 16)
                    shards.append(try Self.makeFolder(in: partial, name: name, display: path + "/.folio/partial/" + name))
                }
                trash = try Self.makeFolder(in: folio, name: "trash", display: path + "/.folio/trash")
                precision = Self.timePrecision(of: folio, probing: true)
                foldsCase = Self.ignoresCase(in: folio)
                if foldsCase { refused = Self.refusedNames(in: folio) }
            } catch {
                close(root)
                if partial >= 0 { close(partial) }
                for fd in shards { close(fd) }
                throw error
            }
        } else {
            let folio = folio_openat_dir_nofollow(root, ".folio")
            if folio >= 0 {
                precision = Self.timePrecision(of: folio, probing: false)
                foldsCase = Self.ignoresCase(in: folio)
                close(folio)
            }
        }
        timePrecision = precision
        ignoresCase = foldsCase
        (refusedNameBytes, refusesNonUTF8Names) = refused
        timeRange = foldsCase && FileSystemType(of: root).keepsFATTimes ? .fat : nil
        rootFD = root
        takesDirectIO = FileSystemType(of: root).takesDirectIO
        partialFD = partial
        shardFDs = shards
        trashFD = trash
    }

    /// Opens the destination's folder, with `create` made first (and the folders above it, like `mkdir -p`).
    private static func openRoot(_ path: String, create: Bool) throws(SourceError) -> Int32 {
        if create, mkdir(path, 0o755) != 0, errno != EEXIST {
            guard errno == ENOENT, (try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)) != nil else {
                throw error(errno, "cannot create destination \(path)")
            }
        }
        let root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else {
            let code = errno
            if code == ENOTDIR {
                throw SourceError(.localIO, "destination \(path) is a file, not a folder; move the file aside or point the target at a folder",
                                  underlying: "errno \(code)")
            }
            throw error(code, "cannot open destination \(path)")
        }
        return root
    }

    /// Opens `<path>/.folio/lock`, making the destination and `.folio` first as a run would: the file whose
    /// `flock` keeps one run at a time in this folder. Why in the folder itself: every process that writes here
    /// finds the same file, whatever its state directory (`folio mirror` as another user, a second daemon) and
    /// however it spells the path. `madeDestination`: the destination did not exist before this call;
    /// `madeFolioFolder`: nor did its `.folio` folder.
    public static func openLockFile(at path: String) throws(SourceError) -> (fd: Int32, madeDestination: Bool, madeFolioFolder: Bool) {
        var attempt = 0
        while true {
            attempt += 1
            // ENOENT: a folder on the way is missing too, and openRoot makes them all.
            let made = mkdir(path, 0o755) == 0 || errno == ENOENT
            let root = try openRoot(path, create: true)
            defer { close(root) }
            let madeFolio = made || (faccessat(root, ".folio", F_OK, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT)
            let folio: Int32
            do {
                folio = try makeFolder(in: root, name: ".folio", display: path + "/.folio")
            } catch where error.underlying == "errno \(ENOENT)" && attempt < 3 {
                // The folder was taken away after it was opened (`removeIfUnused`, by the run that made it): again.
                continue
            }
            defer { close(folio) }
            let fd = folio_openat_create(folio, "lock", O_RDWR | O_CREAT | O_NOFOLLOW, 0o644)
            if fd < 0, errno == ENOENT, attempt < 3 { continue }
            guard fd >= 0 else { throw error(errno, "cannot open the lock file \(path)/.folio/lock") }
            return (fd, made, madeFolio)
        }
    }

    /// Whether a run has written in the folder at `path`: it holds `.folio/partial`, which every run that writes
    /// makes (taking the lock makes only `.folio` and its lock file). Where the state database remembers files
    /// and this answers no, the folder is not the one those runs wrote: a drive not mounted (its mountpoint is
    /// an empty folder), a share not attached. Nothing is followed through a symlink below `path`.
    public static func showsEarlierRuns(at path: String) -> Bool {
        let root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return false }
        defer { close(root) }
        let folio = folio_openat_dir_nofollow(root, ".folio")
        guard folio >= 0 else { return false }
        defer { close(folio) }
        var info = stat()
        return fstatat(folio, "partial", &info, AT_SYMLINK_NOFOLLOW) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// The refusal of a run into a destination that holds nothing of the `remembered` entries earlier runs left
    /// there (see `showsEarlierRuns`).
    public static func notMountedRefusal(_ path: String, remembered: Int) -> String {
        let left = remembered == 1 ? "1 entry" : "\(remembered) entries"
        var info = stat()
        guard lstat(path, &info) == 0 else {
            return "destination \(path) does not exist, though folio's earlier runs left \(left) there: is its drive mounted? nothing was made; if it was removed on purpose, run with --force to mirror into it anew"
        }
        // A folder that holds entries but not the marker is more likely a mirror whose .folio was deleted than an
        // empty mountpoint: said so, with the same way past the guard.
        let root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        let held = root >= 0 ? names(in: root).filter { $0 != Array(".folio".utf8) }.count : 0
        if root >= 0 { close(root) }
        if held > 0 {
            return "destination \(path) lacks .folio/partial, which folio's earlier runs left there with \(left) in all (its top level holds \(held) now): is it the folder folio mirrored into, with its .folio removed, or another drive mounted there? nothing was changed; if it is the mirror, run with --force to mirror into it again"
        }
        return "destination \(path) holds nothing of folio's earlier runs (they left \(left) and .folio/partial there): is its drive mounted? nothing was changed; if the folder was emptied on purpose, run with --force to mirror into it anew"
    }

    /// The failure line of an entry below the destination's root that its scan could not read for `why` (see
    /// `LeftAlone.hides`).
    public static func unreadableLine(_ path: RelativePath, in destination: String, why: String) -> String {
        let denied = why == String(cString: strerror(EACCES)) || why == String(cString: strerror(EPERM))
        let fix = denied ? "make it readable by the user running folio (chown or chmod), or move it out of the destination"
                         : "check the disk holding it (dmesg)"
        return "cannot read \(destination)/\(path) in the destination (\(why)): nothing there was copied or removed; \(fix)"
    }

    /// Takes away the `.folio` folder a run made in a destination that holds nothing else, and with
    /// `includingDestination` the destination folder too: a mistyped source, an unreachable server or a drive
    /// that is not mounted must not leave a new, empty folder behind. Only empty folders go (never a file but the
    /// lock, never a folder with anything in it), the lock file only once the rest of `.folio` is gone, and
    /// nothing through a symlink below `path`. Call it holding the lock, just before letting it go; a process
    /// waiting for the lock then finds its file unlinked and opens the new one (`TargetLock`).
    public static func removeIfUnused(_ path: String, includingDestination: Bool) {
        // Through a link at `path` itself, as the lock made `.folio` there (a mountpoint reached through a link):
        // with O_NOFOLLOW it stayed. Links below it are not followed.
        let root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard root >= 0 else { return }
        defer { close(root) }
        let folio = folio_openat_dir_nofollow(root, ".folio")
        guard folio >= 0 else { return }
        defer { close(folio) }
        // Anything but Folio's own names, in the folder or in `.folio`, keeps all of it: the run got further
        // than making its folders, or someone else put something there.
        let ours: Set<[UInt8]> = Set(["lock", "partial", "trash", "trash-clock"].map { Array($0.utf8) })
        guard names(in: root) == [Array(".folio".utf8)], Set(names(in: folio)).isSubset(of: ours) else { return }
        var emptied = true
        let partial = folio_openat_dir_nofollow(folio, "partial")
        if partial >= 0 {
            for digit in 0..<16 where unlinkat(partial, String(digit, radix: 16), AT_REMOVEDIR) != 0 && errno != ENOENT { emptied = false }
            close(partial)
        }
        for name in ["partial", "trash", "trash-clock"] where unlinkat(folio, name, AT_REMOVEDIR) != 0 && errno != ENOENT { emptied = false }
        guard emptied, unlinkat(folio, "lock", 0) == 0, unlinkat(root, ".folio", AT_REMOVEDIR) == 0, includingDestination else { return }
        _ = rmdir(path)
    }

    /// The time `timePrecision(of:probing:)` sets on `.folio`: odd seconds and nine significant digits, so what a
    /// filesystem keeps of it shows its precision.
    static let probeTime = FileTime(seconds: 1_000_000_001, nanoseconds: 123_456_789)

    /// How finely the filesystem of the folder `folio` keeps times, found by setting `.folio`'s own time (it is
    /// Folio's folder) and reading back what was kept. Why every run, not once: a `.folio` restored from a tar
    /// or zip, or copied through FAT, carries a cut-down probe time that would pass for this filesystem's. A dry
    /// run (`probing` false) writes nothing: it reads what the last run left, and `.nanosecond` without one.
    private static func timePrecision(of folio: Int32, probing: Bool) -> TimePrecision {
        var info = stat()
        if probing {
            var times = [timespec(probeTime), timespec(probeTime)]
            guard futimens(folio, &times) == 0 else { return .nanosecond }
        }
        guard fstat(folio, &info) == 0, isProbe(FileTime(modificationOf: info)) else { return .nanosecond }
        return TimePrecision(keeping: FileTime(modificationOf: info), of: probeTime)
    }

    /// Whether the filesystem of the folder `folio` finds its `partial` folder as `PARTIAL` too. Why that name: only
    /// Folio writes in `.folio`, so on a filesystem that keeps case apart nothing answers to it; and a lookup
    /// writes nothing, so a dry run can ask as well. (Not by inode: a FUSE filesystem such as exfat-fuse gives
    /// each spelling of a name its own node number.)
    private static func ignoresCase(in folio: Int32) -> Bool {
        var info = stat()
        return fstatat(folio, "PARTIAL", &info, AT_SYMLINK_NOFOLLOW) == 0
    }

    /// Which of the bytes Windows refuses in names this filesystem refuses, and whether it refuses a name that is
    /// not UTF-8: found by making, and taking away, a folder in `.folio` named with each.
    private static func refusedNames(in folio: Int32) -> (bytes: Set<UInt8>, nonUTF8: Bool) {
        func refuses(_ last: UInt8) -> Bool {
            let name = Array("name-probe-".utf8) + [last]
            let made = CString.with(name) { mkdirat(folio, $0, 0o700) } == 0 || errno == EEXIST
            if made { _ = CString.with(name) { unlinkat(folio, $0, AT_REMOVEDIR) } }
            return !made
        }
        return (Set(Array("\"*:<>?\\|".utf8).filter(refuses)), refuses(0xFF))
    }

    /// Whether `time` is what a filesystem may have kept of `probeTime`.
    private static func isProbe(_ time: FileTime) -> Bool {
        time.seconds == probeTime.seconds || time.seconds == probeTime.seconds - 1
    }

    deinit {
        close(rootFD)
        if partialFD >= 0 { close(partialFD) }
        for fd in shardFDs { close(fd) }
        if trashFD >= 0 { close(trashFD) }
    }

    /// Stats every entry below the root (without `.folio` and excluded entries). Blocking.
    func scan(exclude: ExcludeFilter, threads: Int) -> TreeWalker.Result {
        TreeWalker(rootPath: path, symlinks: .skip, exclude: exclude, isDestination: true,
                   skipAtRoot: [SyncPlanner.reservedName], threads: threads).walk(rootFD: rootFD)
    }

    // MARK: folders

    /// Opens the folder at `relative` (the root for `.root`), refusing symlinks on the way.
    func openFolder(_ relative: RelativePath) throws(SourceError) -> Int32 {
        var fd = dup(rootFD)
        guard fd >= 0 else { throw Self.error(errno, "cannot open \(path)") }
        for name in relative.components {
            let next = CString.with(name) { folio_openat_dir_nofollow(fd, $0) }
            let code = errno
            close(fd)
            guard next >= 0 else {
                if code == ELOOP || code == ENOTDIR {
                    throw SourceError(.localIO, "\(path)/\(relative): a symbolic link or file stands where a folder should be; not followed", path: relative)
                }
                throw Self.error(code, "cannot open folder \(path)/\(relative)", path: relative)
            }
            fd = next
        }
        return fd
    }

    /// Creates a folder whose parent exists; an existing folder is fine.
    func createFolder(_ relative: RelativePath) throws(SourceError) {
        let parent = try openFolder(relative.parent ?? .root)
        defer { close(parent) }
        let result = CString.with(relative.name) { mkdirat(parent, $0, 0o755) }
        if result != 0 && errno != EEXIST { throw Self.error(errno, "cannot create folder \(path)/\(relative)", path: relative) }
    }

    /// Sets an entry's mtime without following a link.
    func setMtime(_ relative: RelativePath, _ mtime: FileTime) throws(SourceError) {
        guard mtime.isKnown else { return }
        let parent = try openFolder(relative.parent ?? .root)
        defer { close(parent) }
        var times = [Self.timespec(mtime), Self.timespec(mtime)]
        let result = relative.isRoot ? futimens(parent, &times) : CString.with(relative.name) { utimensat(parent, $0, &times, AT_SYMLINK_NOFOLLOW) }
        if result != 0 { throw Self.error(errno, "cannot set the time of \(path)/\(relative)", path: relative) }
    }

    /// Sets a file's mtime if it is still the file the scan found (`scanned`), and returns whether it was. Why
    /// check: times are set after the downloads, maybe long after the scan; a file rewritten meanwhile keeps its
    /// own time, so the next run finds it changed here and keeps it in the trash, rather than taking it for the
    /// source's version. Through a descriptor, so a file renamed over it between the check and the change is
    /// not the one changed.
    func setFileMtime(_ relative: RelativePath, _ mtime: FileTime, ifStill scanned: LocalItem) throws(SourceError) -> Bool {
        guard mtime.isKnown else { return true }
        let parent = try openFolder(relative.parent ?? .root)
        defer { close(parent) }
        let fd = CString.with(relative.name) { folio_openat(parent, $0, O_RDONLY | O_NOFOLLOW) }
        guard fd >= 0 else {
            let code = errno
            if code == ELOOP || code == ENOENT { return false }  // a link or nothing where the file was
            throw Self.error(code, "cannot set the time of \(path)/\(relative)", path: relative)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Self.error(errno, "cannot stat \(path)/\(relative)", path: relative) }
        guard Self.describes(scanned, info) else { return false }
        var times = [Self.timespec(mtime), Self.timespec(mtime)]
        if futimens(fd, &times) != 0 { throw Self.error(errno, "cannot set the time of \(path)/\(relative)", path: relative) }
        return true
    }

    /// The inode and mtime an entry has now (after Folio put it there), for the state record.
    func identity(of relative: RelativePath) throws(SourceError) -> (inode: UInt64, mtime: FileTime) {
        let parent = try openFolder(relative.parent ?? .root)
        defer { close(parent) }
        var info = stat()
        guard CString.with(relative.name, { fstatat(parent, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else {
            throw Self.error(errno, "cannot stat \(path)/\(relative)", path: relative)
        }
        return (UInt64(info.st_ino), FileTime(modificationOf: info))
    }

    // MARK: trash

    /// Moves the entry the scan found as `scanned` (a folder with everything in it) to `trash/<run>/<same path>`,
    /// or unlinks it when there is no trash (`trash-days = 0`). Returns whether what it moved had changed since
    /// the scan (written during the run): a local change to report. Nothing there (something else removed it
    /// during the run) is no change and no failure.
    ///
    /// Why it looks first: the scan may be seconds old, and an edit made since then must be reported, not taken
    /// silently (guarantee 4), above all when there is no trash to keep it. A folder is compared by its own inode
    /// and mtime, which catch entries added, removed or renamed right inside it, not an edit deeper down; with a
    /// trash, such an edit is kept all the same.
    func discard(_ scanned: LocalItem, runID: String?) throws(SourceError) -> Bool {
        let relative = scanned.path
        let parent = try openFolder(relative.parent ?? .root)
        defer { close(parent) }
        var info = stat()
        guard CString.with(relative.name, { fstatat(parent, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else {
            if errno == ENOENT { return false }
            throw Self.error(errno, "cannot stat \(path)/\(relative)", path: relative)
        }
        let changedSinceScan = !Self.isStill(scanned, info)
        guard let runID else {
            try Self.removeTree(in: parent, name: Array(relative.name), display: "\(path)/\(relative)")
            return changedSinceScan
        }
        let trashParent = try trashFolder(for: relative, runID: runID)
        defer { close(trashParent) }
        let result = CString.with(relative.name) { name in renameat(parent, name, trashParent, name) }
        if result != 0 { throw Self.error(errno, "cannot move \(path)/\(relative) to the trash", path: relative) }
        return changedSinceScan
    }

    /// Keeps the file at `relative` (in the open folder `parent`) in the trash before it is replaced: a hard
    /// link where the filesystem allows (the file stays in place for readers until the new one is renamed over
    /// it), else a move.
    func preserveBeforeReplacing(_ relative: RelativePath, in parent: Int32, runID: String?) throws(SourceError) {
        guard let runID else { return }  // trash-days = 0: the rename replaces it
        let trashParent = try trashFolder(for: relative, runID: runID)
        defer { close(trashParent) }
        let linked = CString.with(relative.name) { name in linkat(parent, name, trashParent, name, 0) }
        if linked == 0 { return }
        let moved = CString.with(relative.name) { name in renameat(parent, name, trashParent, name) }
        if moved != 0 { throw Self.error(errno, "cannot move \(path)/\(relative) to the trash", path: relative) }
    }

    private func trashFolder(for relative: RelativePath, runID: String) throws(SourceError) -> Int32 {
        var fd = try openRunFolder(runID)
        for name in relative.components.dropLast() {
            let next: Int32
            do {
                next = try Self.makeFolder(in: fd, name: String(decoding: name, as: UTF8.self), bytes: Array(name), display: "\(path)/.folio/trash/\(runID)")
            } catch {
                close(fd)
                throw error
            }
            close(fd)
            fd = next
        }
        return fd
    }

    /// Opens `trash/<runID>`, making it on first use, with the clocks read then in `.folio/trash-clock/<runID>`.
    private func openRunFolder(_ runID: String) throws(SourceError) -> Int32 {
        let display = "\(path)/.folio/trash/\(runID)"
        var info = stat()
        if fstatat(trashFD, runID, &info, AT_SYMLINK_NOFOLLOW) != 0 {
            // The reading before the folder: a crash between them leaves a reading without a folder (which the
            // next purge drops), never a folder without one. Best effort: without a reading, the purge counts it
            // as made when it first sees it.
            if let clocks = try? openClockFolder(making: true) {
                Self.writeClockReading(.now(), for: runID, in: clocks)
                close(clocks)
            }
            if mkdirat(trashFD, runID, 0o755) != 0 && errno != EEXIST { throw Self.error(errno, "cannot create \(display)") }
        }
        let fd = folio_openat_dir_nofollow(trashFD, runID)
        guard fd >= 0 else { throw Self.error(errno, "cannot open \(display)") }
        return fd
    }

    /// Opens `.folio/trash-clock`, which holds for each run folder of the trash the clocks read when it was made
    /// (`ClockReading`); with `making`, makes it first if it is not there. Beside the trash rather than in it, so
    /// the trash holds run folders only.
    private func openClockFolder(making: Bool) throws(SourceError) -> Int32 {
        let folio = folio_openat_dir_nofollow(rootFD, ".folio")
        guard folio >= 0 else { throw Self.error(errno, "cannot open \(path)/.folio") }
        defer { close(folio) }
        if making { return try Self.makeFolder(in: folio, name: "trash-clock", display: "\(path)/.folio/trash-clock") }
        let fd = folio_openat_dir_nofollow(folio, "trash-clock")
        guard fd >= 0 else { throw Self.error(errno, "cannot open \(path)/.folio/trash-clock") }
        return fd
    }

    /// Writes `reading` as `<runID>` in the open `.folio/trash-clock`, whole or not at all (a temporary name, then
    /// a rename). Why unlink and O_EXCL: whatever was planted at the temporary name (a FIFO would hang the open, a
    /// link would lead out) is not opened. Returns 0, or the errno of what failed.
    @discardableResult
    private static func writeClockReading(_ reading: ClockReading, for runID: String, in clocks: Int32) -> Int32 {
        let temporary = runID + ".new"
        unlinkat(clocks, temporary, 0)
        let fd = folio_openat_create(clocks, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644)
        guard fd >= 0 else { return errno }
        let bytes = Array(reading.text.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        // A short write of a few dozen bytes into a new file: the disk (or the user's quota) is full.
        let code = written == bytes.count ? 0 : written < 0 ? errno : ENOSPC
        close(fd)
        if code == 0, renameat(clocks, temporary, clocks, runID) == 0 { return 0 }
        let failed = code != 0 ? code : errno
        unlinkat(clocks, temporary, 0)
        return failed
    }

    /// The reading in `.folio/trash-clock/<runID>`, if there is a whole one. Only from a regular file, opened
    /// without waiting: a FIFO planted there would otherwise hang every run.
    private static func clockReading(in clocks: Int32, for runID: String) -> ClockReading? {
        let fd = folio_openat(clocks, runID, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        return ClockReading(text: String(decoding: buffer.prefix(count), as: UTF8.self))
    }

    /// Removes the trash folders of runs made more than `days` ago (all of them with 0), and what is left of
    /// them in `trash-clock`. A folder's made time is the later of what its name says (UTC, by the wall clock of its
    /// run) and what its clock reading says seen from `now` (`ClockReading.seen(at:)`), so a folder made while
    /// the wall clock was behind is kept its full `days` once NTP sets the clock, rather than purged on the next
    /// run. A reading seen anew is written back, so what it learnt outlives a reboot; a folder without one counts
    /// as made when first seen, and gets one. A name that is not a run's (a folder someone put there) is left
    /// alone.
    /// Returns what it removed, and what it could not.
    @discardableResult
    func purgeTrash(olderThan days: Int, now: ClockReading = .now()) -> TrashPurge {
        var purge = TrashPurge()
        guard trashFD >= 0 else { return purge }
        let display = "\(path)/.folio/trash"
        var clocks = (try? openClockFolder(making: false)) ?? -1
        var triedClocks = false
        defer { if clocks >= 0 { close(clocks) } }
        let cutoff = now.wall - Int64(days) * 86_400
        var runs = Set<String>()
        for bytes in Self.names(in: trashFD) {
            let name = String(decoding: bytes, as: UTF8.self)
            guard let named = Self.time(ofRunID: name) else {
                if days == 0 { purge.remove { () throws(SourceError) in try Self.removeTree(in: trashFD, name: bytes, display: "\(display)/\(name)") } }
                continue
            }
            var made = named
            if clocks >= 0, let reading = Self.clockReading(in: clocks, for: name) {
                let seen = reading.seen(at: now)
                // Not for a second's difference: the two clocks are read in whole seconds, a moment apart.
                if seen.carried != reading.carried || seen.wall > reading.wall + 60 { Self.writeClockReading(seen, for: name, in: clocks) }
                made = max(named, seen.wall)
            } else if days > 0 {
                // No reading (lost, or the folder is an older Folio's): made when first seen, as after a reboot.
                // Aged by its name alone, a folder named while the wall clock was behind went at once, its days
                // unkept. Without a reading written, it is first seen again at every run, and kept: the purge
                // says so, once a run, rather than let the trash grow unseen.
                if clocks < 0, !triedClocks {
                    triedClocks = true
                    do { clocks = try openClockFolder(making: true) } catch { purge.unrecorded = error.message }
                }
                if clocks >= 0 {
                    let code = Self.writeClockReading(now, for: name, in: clocks)
                    if code != 0, purge.unrecorded == nil {
                        purge.unrecorded = Self.error(code, "cannot write \(path)/.folio/trash-clock/\(name)").message
                    }
                }
                made = max(named, now.wall)
            }
            guard days == 0 || made < cutoff else { runs.insert(name); continue }
            // The reading goes first: a folder left without one is first seen anew, so kept longer still.
            if clocks >= 0 { unlinkat(clocks, name, 0) }
            purge.remove { () throws(SourceError) in try Self.removeTree(in: trashFD, name: bytes, display: "\(display)/\(name)") }
        }
        // Readings whose folder is gone (removed by hand) go too.
        guard clocks >= 0 else { return purge }
        for bytes in Self.names(in: clocks) where !runs.contains(String(decoding: bytes, as: UTF8.self)) {
            CString.with(bytes) { _ = unlinkat(clocks, $0, 0) }
        }
        return purge
    }

    /// The UTC time a run folder's name (`YYYYMMDD-HHMMSS-…`, from `runID(at:suffix:)`) says, or nil when the
    /// name is not a run's.
    static func time(ofRunID name: String) -> Int64? {
        let digits = Array(name.utf8.prefix(15))
        guard digits.count == 15, digits[8] == UInt8(ascii: "-"),
              digits.enumerated().allSatisfy({ $0.offset == 8 || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0.element) })
        else { return nil }
        func number(_ range: Range<Int>) -> Int32 { digits[range].reduce(0) { $0 * 10 + Int32($1 - UInt8(ascii: "0")) } }
        var parts = tm()
        parts.tm_year = number(0..<4) - 1900
        parts.tm_mon = number(4..<6) - 1
        parts.tm_mday = number(6..<8)
        parts.tm_hour = number(9..<11)
        parts.tm_min = number(11..<13)
        parts.tm_sec = number(13..<15)
        return Int64(timegm(&parts))
    }

    /// A run's trash folder name: sortable UTC time plus a suffix that keeps concurrent runs apart.
    static func runID(at date: Date, suffix: String) -> String {
        var time = time_t(date.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ value: Int32) -> String { String(value).leftPadded(to: 2) }
        return "\(parts.tm_year + 1900)\(two(parts.tm_mon + 1))\(two(parts.tm_mday))-\(two(parts.tm_hour))\(two(parts.tm_min))\(two(parts.tm_sec))" + suffix
    }

    // MARK: partial files

    /// Opens the partial file for a download, returning its descriptor and how much of it is already there.
    func openPartial(named name: String, expectedSize: Int64, resumable: Bool) throws(SourceError) -> (fd: Int32, offset: Int64) {
        // Most downloads start a new partial file: created exclusively, it is known empty without a stat.
        let created = name.withCString { folio_openat_create(shard(of: name), $0, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644) }
        if created >= 0 { return (created, 0) }
        guard errno == EEXIST else { throw Self.error(errno, "cannot create a partial file in \(path)/.folio/partial") }
        // Only a file of Folio's own is resumed: a FIFO or device there would be written to, and a hard link
        // (to a file outside the destination, say) would have that file overwritten through it. Anything else
        // at the name (a symbolic link or a folder too, which failed the file on every run) is removed and the
        // download starts over in a new file.
        let startOver = { () throws(SourceError) -> (fd: Int32, offset: Int64) in
            try? Self.removeTree(in: self.shard(of: name), name: Array(name.utf8), display: name)
            let fresh = name.withCString { folio_openat_create(self.shard(of: name), $0, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0o644) }
            guard fresh >= 0 else { throw Self.error(errno, "cannot create a partial file in \(self.path)/.folio/partial") }
            return (fresh, 0)
        }
        // O_NONBLOCK: a FIFO planted at the name must not hold the run (and its stop) on the open.
        let fd = name.withCString { folio_openat_create(shard(of: name), $0, O_RDWR | O_NOFOLLOW | O_NONBLOCK, 0o644) }
        guard fd >= 0 else {
            if errno == ELOOP || errno == EISDIR { return try startOver() }
            throw Self.error(errno, "cannot open a partial file in \(path)/.folio/partial")
        }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            close(fd)
            throw Self.error(errno, "cannot stat a partial file in \(path)/.folio/partial")
        }
        guard info.st_mode & S_IFMT == S_IFREG, info.st_nlink == 1 else {
            close(fd)
            return try startOver()
        }
        var offset = Int64(info.st_size)
        if !resumable || offset > expectedSize {
            ftruncate(fd, 0)
            offset = 0
        }
        lseek(fd, off_t(offset), SEEK_SET)
        return (fd, offset)
    }

    /// Seals a downloaded partial file: writes what `sink` still holds, checks the file's size against the
    /// listing and gives it the source's mtime. Returns its inode and mtime for the record. Closes the sink's
    /// file. The file is not durable or visible yet: see `moveIntoPlace`.
    func seal(_ sink: DownloadSink, partialName: String, as entry: Entry) throws(SourceError) -> (inode: UInt64, mtime: FileTime) {
        do {
            try sink.finish()
        } catch {
            close(sink.fileDescriptor)
            throw error
        }
        return try seal(partialFD: sink.fileDescriptor, partialName: partialName, as: entry)
    }

    /// The size check and the time, once every byte is in the file.
    private func seal(partialFD fd: Int32, partialName: String, as entry: Entry) throws(SourceError) -> (inode: UInt64, mtime: FileTime) {
        defer { close(fd) }
        if entry.mtime.isKnown {
            var times = [Self.timespec(entry.mtime), Self.timespec(entry.mtime)]
            if futimens(fd, &times) != 0 { throw Self.error(errno, "cannot set the time of \(entry.path)", path: entry.path) }
        }
        // One stat after the time is set: the size to check, and the inode and mtime (as the file system stored
        // it) to record.
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw Self.error(errno, "cannot stat the partial file of \(entry.path)", path: entry.path) }
        guard Int64(info.st_size) == entry.size else {
            discardPartial(named: partialName)
            throw SourceError(.protocolViolation, "\(entry.path): received \(info.st_size) bytes, the source listed \(entry.size); not installed, will retry next run",
                              path: entry.path)
        }
        if entry.size >= DownloadSink.writebackStep {
            // Starts writing the tail now, so the batch's flush waits less (advice only; the flush is what
            // counts). Small files are left to the flush, which writes a whole batch of them in one go.
            _ = folio_start_writeback(fd, 0, 0)
        }
        return (UInt64(info.st_ino), FileTime(modificationOf: info))
    }

    /// What `moveIntoPlace` did with one file.
    enum Placement {
        /// Renamed into place.
        case placed
        /// Renamed into place after moving to the trash (or, with no trash, over) an entry that is not what the
        /// scan found there (nothing, or another version): another program wrote it during the run, which
        /// reports it as a local change.
        case placedOverLocalChange
        /// Left in its partial file (kept for the next run), for this reason.
        case failed(SourceError)
    }

    /// Flushes every sealed partial file to disk (one `syncfs` for the whole batch, instead of an fsync per
    /// file), then renames each into place. The names reach the disk with the next batch's flush, or with
    /// `makeNamesDurable` after the last.
    ///
    /// Why this order: data reaches the disk before its name does, so after a crash a final name never holds
    /// half a file. Why the names may wait: a crash that loses a rename leaves the file complete in its partial,
    /// which the next run puts in place without fetching it again, while a flush of their own cost a journal
    /// commit and a device flush per batch (see `Installer.finish`). A file that replaces nothing is renamed
    /// with `RENAME_NOREPLACE`, and what a file replaces is checked against the scan (`replacing`), so an entry
    /// written since the scan is kept in the trash and reported like any local change, never silently replaced
    /// (guarantee 4).
    func moveIntoPlace(_ batch: [(partialName: String, path: RelativePath, replacing: LocalItem?)], runID: String?) -> [Placement] {
        guard !batch.isEmpty else { return [] }
        let unwritten = flush(batch.map { ($0.partialName, $0.path) })
        var folders: [RelativePath: Int32] = [:]
        defer { for fd in folders.values { close(fd) } }
        var results: [Placement] = []
        results.reserveCapacity(batch.count)
        for item in batch {
            if let error = unwritten[item.partialName] {
                results.append(.failed(error))
                continue
            }
            do throws(SourceError) {
                let parentPath = item.path.parent ?? .root
                let parent: Int32
                if let cached = folders[parentPath] {
                    parent = cached
                } else {
                    parent = try openFolder(parentPath)
                    folders[parentPath] = parent
                }
                let changed: Bool
                if let scanned = item.replacing {
                    changed = !Self.holds(scanned, in: parent)
                } else if try renameIfFree(item.partialName, to: item.path, in: parent) {
                    results.append(.placed)
                    continue
                } else if ignoresCase, Self.isTakenByATwin(item.path.name, in: parent) {
                    // Kept, not trashed: the twin is a file this mirror holds, and trading them would go on every run.
                    results.append(.failed(SourceError(.localIO, "cannot write \(path)/\(item.path): a name there that differs from it only in case takes its place, as the filesystem of \(path) does not tell them apart; rename one of them at the source, or mirror to a filesystem that keeps case (ext4, xfs, btrfs)",
                                                       path: item.path)))
                    continue
                } else {
                    changed = true
                }
                try preserveBeforeReplacing(item.path, in: parent, runID: runID)
                let renamed = item.partialName.withCString { from in CString.with(item.path.name) { to in renameat(shard(of: item.partialName), from, parent, to) } }
                if renamed != 0 { throw Self.error(errno, "cannot move \(item.path) into place", path: item.path) }
                results.append(changed ? .placedOverLocalChange : .placed)
            } catch {
                results.append(.failed(error))
            }
        }
        return results
    }

    /// Makes the names of the files `moveIntoPlace` put in place durable (one `syncfs`). Why a failure is not
    /// checked: every file's data is on disk already; a name that did not reach it leaves, after a crash, a
    /// complete partial file that the next run installs without fetching it again.
    func makeNamesDurable() {
        _ = folio_syncfs(partialFD)
    }

    /// Makes the partial files' data durable with one `syncfs`. Should that fail (a disk that could not take
    /// the data: an I/O error, a thin volume or a network share out of space), each file is flushed alone to
    /// find which did not get there; those are dropped, to be fetched again, and returned with their error.
    ///
    /// Why dropped, not kept: their pages in memory still read right, but the disk holds something else (zeros
    /// on a thin volume), which a reader would see once the kernel let the pages go; renamed into place, such a
    /// file was reported as mirrored and never fetched again.
    private func flush(_ partials: [(name: String, path: RelativePath)]) -> [String: SourceError] {
        guard folio_syncfs(partialFD) != 0 else { return [:] }
        var unwritten: [String: SourceError] = [:]
        for (name, relative) in partials {
            // A descriptor opened now still reports a write-back error nobody has seen on this file.
            let fd = name.withCString { folio_openat_create(shard(of: name), $0, O_RDONLY | O_NOFOLLOW, 0) }
            let code = fd < 0 ? errno : (fsync(fd) == 0 ? 0 : errno)
            if fd >= 0 { close(fd) }
            guard code != 0 else { continue }
            discardPartial(named: name)
            var error = Self.error(code, "cannot write \(path)/\(relative) to disk", path: relative)
            error.message += "; it is fetched again next run"
            unwritten[name] = error
        }
        return unwritten
    }

    /// Whether `parent` still holds the file the scan found as `scanned` (or nothing: a file removed meanwhile
    /// leaves nothing to keep).
    private static func holds(_ scanned: LocalItem, in parent: Int32) -> Bool {
        var info = stat()
        guard CString.with(scanned.path.name, { fstatat(parent, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else { return errno == ENOENT }
        return describes(scanned, info)
    }

    /// Whether `info` is the regular file the scan found as `scanned`: same inode, size and mtime.
    private static func describes(_ scanned: LocalItem, _ info: stat) -> Bool {
        scanned.kind == .file && isStill(scanned, info)
    }

    /// Whether `info` is the entry the scan found as `scanned`: same kind, inode and mtime, and for a file the
    /// same size.
    private static func isStill(_ scanned: LocalItem, _ info: stat) -> Bool {
        let kind: LocalItem.Kind = switch info.st_mode & S_IFMT {
        case S_IFREG: .file
        case S_IFDIR: .folder
        case S_IFLNK: .symlink
        default: .special
        }
        return kind == scanned.kind && UInt64(info.st_ino) == scanned.inode
            && (kind != .file || Int64(info.st_size) == scanned.size)
            && FileTime(modificationOf: info) == scanned.mtime
    }

    /// Renames a partial file to `path`'s name in `parent` unless something holds that name; returns whether it
    /// did. Where the file system cannot refuse atomically, it looks first (a small window, but still a look).
    private func renameIfFree(_ partialName: String, to path: RelativePath, in parent: Int32) throws(SourceError) -> Bool {
        let shard = shard(of: partialName)
        let result = partialName.withCString { from in CString.with(path.name) { to -> Int32 in
            if folio_rename_noreplace(shard, from, parent, to) == 0 { return 0 }
            guard errno == EINVAL || errno == ENOSYS else { return errno }
            var info = stat()
            if fstatat(parent, to, &info, AT_SYMLINK_NOFOLLOW) == 0 { return EEXIST }
            return renameat(shard, from, parent, to) == 0 ? 0 : errno
        } }
        switch result {
        case 0: return true
        case EEXIST: return false
        default: throw Self.error(result, "cannot move \(path) into place", path: path)
        }
    }

    func discardPartial(named name: String) {
        _ = name.withCString { unlinkat(shard(of: name), $0, 0) }
    }

    /// What a run with nothing to fetch leaves behind it: no partial file (none has a download left to resume,
    /// and one a failed run left, of a file since gone from the source, would hold its space for good, on a
    /// disk it may have filled) and no trash older than `trashDays`.
    func tidy(trashDays: Int) -> TrashPurge {
        removePartials(keeping: [])
        return purgeTrash(olderThan: trashDays)
    }

    /// Deletes the partial files that no download of `downloads` resumes. Why from the partial files found, not
    /// from the names of every download: an initial run of 100,000 files made 100,000 names to keep none of them
    /// (12 MB, the run's peak).
    func removePartials(notResumedBy downloads: [SyncPlan.Download]) {
        var found: [String: (shard: Int32, name: [UInt8])] = [:]
        for shard in shardFDs {
            for name in Self.names(in: shard) { found[String(decoding: name, as: UTF8.self)] = (shard, name) }
        }
        for download in downloads where !found.isEmpty { found[Self.partialName(for: download.entry)] = nil }
        // A tree, not unlinkat alone: a folder planted at a partial file's name stayed for good.
        for partial in found.values { try? Self.removeTree(in: partial.shard, name: partial.name, display: "") }
    }

    /// Deletes partial files that no download of this run will resume.
    func removePartials(keeping keep: Set<String>) {
        for shard in shardFDs {
            for name in Self.names(in: shard) {
                let text = String(decoding: name, as: UTF8.self)
                if !keep.contains(text) { try? Self.removeTree(in: shard, name: name, display: "") }
            }
        }
    }

    /// The shard folder a partial file lives in: the first hex digit of its name.
    private func shard(of name: String) -> Int32 {
        shardFDs[Int(String(name.prefix(1)), radix: 16) ?? 0]
    }

    /// The partial file's name for one version of one entry: a new version gets a new name, so a partial is
    /// resumed only when the source still has the version it was started from.
    public static func partialName(for entry: Entry) -> String {
        var hash = TreeDigest()
        hash.add(entry.path)
        hash.add(UInt64(bitPattern: entry.size))
        hash.add(UInt64(bitPattern: entry.mtime.nanoseconds))
        hash.add(Array((entry.validator ?? "").utf8))
        return String(hash.value, radix: 16).leftPadded(to: 16) + ".part"
    }

    // MARK: helpers

    private static func makeFolder(in parent: Int32, name: String, bytes: [UInt8]? = nil, display: String) throws(SourceError) -> Int32 {
        let raw = bytes ?? Array(name.utf8)
        if CString.with(raw, { mkdirat(parent, $0, 0o755) }) != 0 && errno != EEXIST {
            throw error(errno, "cannot create \(display)")
        }
        let fd = CString.with(raw) { folio_openat_dir_nofollow(parent, $0) }
        guard fd >= 0 else { throw error(errno, "cannot open \(display)") }
        return fd
    }

    static func names(in fd: Int32) -> [[UInt8]] {
        let copy = dup(fd)
        guard copy >= 0, let directory = fdopendir(copy) else { return [] }
        defer { closedir(directory) }
        rewinddir(directory)
        var names: [[UInt8]] = []
        while let entry = readdir(directory) {
            let length = Int(strlen(&entry.pointee.d_name.0))
            let name = withUnsafeBytes(of: &entry.pointee.d_name) { Array($0.prefix(length)) }
            if name != [0x2E] && name != [0x2E, 0x2E] { names.append(name) }
        }
        return names
    }

    /// Whether `name` finds an entry in `parent` that is listed under another name: on a filesystem that ignores
    /// case, a twin that `CaseClashes` could not see in the source's listing (one written here by hand and kept
    /// while removals are held back, or a letter this filesystem's table folds and Unicode's upper case does
    /// not). (Not told by inode: exfat-fuse numbers each spelling of a name apart.)
    static func isTakenByATwin(_ name: ArraySlice<UInt8>, in parent: Int32) -> Bool {
        var info = stat()
        guard CString.with(name, { fstatat(parent, $0, &info, AT_SYMLINK_NOFOLLOW) }) == 0 else { return false }
        return !names(in: parent).contains { $0.elementsEqual(name) }
    }

    /// Unlinks a file or a whole folder, never following links.
    static func removeTree(in parent: Int32, name: [UInt8], display: String) throws(SourceError) {
        if CString.with(name, { unlinkat(parent, $0, 0) }) == 0 { return }
        guard errno == EISDIR || errno == EPERM else {
            if errno == ENOENT { return }
            throw error(errno, "cannot remove \(display)")
        }
        let fd = CString.with(name) { folio_openat_dir_nofollow(parent, $0) }
        guard fd >= 0 else { throw error(errno, "cannot open \(display)") }
        do {
            defer { close(fd) }
            for child in names(in: fd) { try removeTree(in: fd, name: child, display: display) }
        }
        if CString.with(name, { unlinkat(parent, $0, AT_REMOVEDIR) }) != 0 { throw error(errno, "cannot remove \(display)") }
    }

    static func timespec(_ time: FileTime) -> Glibc.timespec {
        Glibc.timespec(tv_sec: Int(time.seconds), tv_nsec: Int(time.subsecondNanoseconds))
    }

    static func error(_ code: Int32, _ what: String, path: RelativePath? = nil) -> SourceError {
        let reason = String(cString: strerror(code))
        let fix: String
        switch code {
        // Why df's both forms: a disk can run out of inodes with space left (many small files on ext4), and
        // "no space" then contradicts what `df -h` shows.
        case ENOSPC: fix = "; free some space on the destination's disk (df -h shows the space, df -i the room for files)"
        case EDQUOT: fix = "; the quota of the user running folio is used up on the destination's disk (quota -s shows it)"
        case EACCES: fix = "; make the destination writable by the user running folio"
        // EPERM where permissions allow: the file's owner alone may set its time (or, in a sticky folder, remove
        // it), and nobody may change an immutable one, root included.
        case EPERM where getuid() == 0: fix = "; it is immutable or append-only (lsattr shows it; chattr -i or chattr -a lifts it)"
        case EPERM: fix = "; it belongs to another user or is immutable: give it to the user running folio (chown), or see lsattr"
        case EROFS: fix = "; the destination's filesystem is mounted read-only"
        case ENOTCONN, ECONNABORTED, ENODEV, ESTALE, ESHUTDOWN:
            fix = "; the destination's filesystem is gone (a drive unplugged, a FUSE mount ended, a network share dropped): mount it again, and the next run finishes the work"
        case ENOTDIR: fix = "; a file or a link stands where a folder should be: move it aside"
        case EISDIR: fix = "; a folder stands where a file should be: move it aside"
        // EBUSY from a rename or removal: the entry (or one inside a folder being moved) is a mount point.
        case EBUSY: fix = "; something is mounted there (findmnt shows what): unmount it, or exclude the folder"
        case EXDEV:
            // Only a rename across filesystems gives EXDEV here: a folder of the destination is a mount point, and
            // Folio's partial files and trash (in `.folio`, on the root's filesystem) cannot be renamed into it.
            fix = "; a folder on the way is another filesystem mounted inside the destination: make that folder a target of its own, or exclude it"
        default: fix = ""
        }
        return SourceError(.localIO, "\(what): \(reason)\(fix)", path: path, underlying: "errno \(code)")
    }
}
