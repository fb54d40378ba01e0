import CFolioSys
import Foundation
import Glibc

/// A folder on this machine (or a mounted share) as a source: a plain path or a `file://` URL.
public struct LocalSource: Source {
    /// The source folder's path, without a trailing `/` (except for `/` itself).
    public let rootPath: String
    private let symlinks: ListingOptions.SymlinkPolicy

    /// A source at `rootPath`. `symlinks` lets downloads open a file through a symbolic link; the listing follows
    /// `ListingOptions.symlinks`.
    public init(rootPath: String, symlinks: ListingOptions.SymlinkPolicy = .skip) {
        self.rootPath = rootPath.count > 1 && rootPath.hasSuffix("/") ? String(rootPath.dropLast()) : rootPath
        self.symlinks = symlinks
    }

    /// The folder's path.
    public var displayName: String { rootPath }

    /// Nanosecond times, no checksums, resumable downloads.
    public var features: SourceFeatures { SourceFeatures(mtimePrecision: .nanosecond, checksums: false, resumable: true) }

    /// Walks the folder on threads of its own (`TreeWalker`, `options.parallelism` of them). Throws `.notFound`,
    /// `.permission` or `.localIO` when the root cannot be opened.
    public func snapshot(options: ListingOptions) async throws -> Snapshot {
        let root = rootPath
        let walker = TreeWalker(rootPath: root, symlinks: options.symlinks, exclude: options.exclude,
                                isDestination: false, skipAtRoot: [], threads: options.parallelism, destinationIdentity: options.destinationIdentity)
        // Why a dedicated queue: the walk blocks in readdir/fstatat and must not hold a cooperative thread.
        return try await withCheckedThrowingContinuation { continuation in
            DispatchQueue(label: "folio.local.snapshot").async {
                let fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                guard fd >= 0 else {
                    continuation.resume(throwing: Self.rootError(root, errno: errno))
                    return
                }
                defer { close(fd) }
                // In path order, straight from the walk's chunks (freed as they are drained): the builder sees it
                // is sorted and does not sort again.
                var findings = walker.gather(rootFD: fd)
                var builder = SnapshotBuilder(reservingCapacity: findings.count)
                findings.drain { item in
                    switch item.kind {
                    case .file: builder.append(Entry(path: item.path, kind: .file, size: item.size, mtime: item.mtime))
                    case .folder: builder.append(Entry(path: item.path, kind: .folder, mtime: item.mtime))
                    case .symlink, .special: break  // a source walk never yields these
                    }
                }
                builder.note(contentsOf: findings.issues)
                continuation.resume(returning: builder.finish())
            }
        }
    }

    /// Opens the root folder for one download worker; throws as `snapshot` does when it cannot.
    public func makeConnection() throws -> any SourceConnection {
        let fd = open(rootPath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Self.rootError(rootPath, errno: errno) }
        return LocalConnection(rootFD: fd, rootPath: rootPath, followLinks: symlinks == .follow)
    }

    static func rootError(_ root: String, errno code: Int32) -> SourceError {
        switch code {
        case ENOENT: SourceError(.notFound, "source folder \(root) does not exist; check the path (is the share mounted?)", underlying: "errno \(code)")
        case EACCES, EPERM: SourceError(.permission, "cannot read source folder \(root): permission denied; give the user running folio read access", underlying: "errno \(code)")
        case ENOTDIR: SourceError(.notFound, "source \(root) is not a folder", underlying: "errno \(code)")
        default: SourceError(.localIO, "cannot open source folder \(root): \(String(cString: strerror(code)))", underlying: "errno \(code)")
        }
    }
}

/// Copies files out of a local source with `copy_file_range` (kernel-side, reflinks where the filesystem can),
/// or with read/write: for small files where the copy cannot be a reflink, and across filesystems that refuse it.
final class LocalConnection: SourceConnection {
    private let rootFD: Int32
    private let rootPath: String
    private let followLinks: Bool
    /// The source's real path, where links are followed: what a file opened through one must stay within.
    private let realRoot: String?
    /// Whether the source's file system can share a copy's blocks (`FileSystemType.sharesBlocksOnCopy`): the
    /// kernel copy is then the better one whatever the file's size.
    private let mayReflink: Bool
    /// The read/write copy's buffer, made at its first use and kept for the worker's later files; owned by this
    /// connection (one worker thread) and freed in `close`.
    private var buffer: UnsafeMutableRawBufferPointer?

    /// Below this size, and where no reflink is possible, a file is copied with read/write. Why: elsewhere (ext4)
    /// `copy_file_range` is a splice through a pipe, with more setup per file than the copy of a few KB costs.
    /// 100,000 files of 0-2 KB, local to local on ext4: 4.33-4.72 s against 4.50-4.82 s (4 alternating pairs),
    /// system CPU 5.4-5.7 s against 5.7-6.0 s.
    static let kernelCopyFrom: Int64 = 1 << 20

    init(rootFD: Int32, rootPath: String, followLinks: Bool) {
        self.rootFD = rootFD
        self.rootPath = rootPath
        self.followLinks = followLinks
        realRoot = followLinks ? rootPath.withCString { TreeWalker.realPath($0) } : nil
        mayReflink = FileSystemType(of: rootFD).sharesBlocksOnCopy
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        let fd = try openListedFile(entry.path)
        defer { Glibc.close(fd) }
        // One check, after the copy, is enough: a change during or before the copy shows in it (a shrink stops
        // the copy short, a growth or edit moves the size or mtime).
        var remaining = entry.size - offset
        var inputOffset = off_t(offset)
        var useKernelCopy = mayReflink || entry.size >= Self.kernelCopyFrom
        let largestChunk = sink.largestPacedRead ?? 8 << 20
        while remaining > 0 {
            try sink.checkCancellation()
            let chunk = Int(min(remaining, Int64(largestChunk)))
            // A resume's overlap is compared through `write` first (see `DownloadSink.bytesToCompare`).
            if useKernelCopy, sink.bytesToCompare == 0 {
                let copied = folio_copy_file_range(fd, &inputOffset, sink.fileDescriptor, nil, chunk)
                if copied > 0 {
                    sink.didWrite(byteCount: copied)
                    remaining -= Int64(copied)
                    continue
                }
                if copied == 0 { break }
                if [EXDEV, ENOSYS, EINVAL, EOPNOTSUPP, EBADF].contains(errno) {
                    useKernelCopy = false
                    continue
                }
                if errno == EINTR { continue }
                throw fileError(entry.path, errno: errno, doing: "copy")
            }
            let buffer = self.buffer ?? UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
            self.buffer = buffer
            let count = pread(fd, buffer.baseAddress, min(buffer.count, largestChunk, Int(remaining), useKernelCopy ? sink.bytesToCompare : .max), inputOffset)
            if count < 0 {
                if errno == EINTR { continue }
                throw fileError(entry.path, errno: errno, doing: "read")
            }
            if count == 0 { break }
            try sink.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            inputOffset += off_t(count)
            remaining -= Int64(count)
        }
        if remaining != 0 {
            throw SourceError(.changed, "\(entry.path) shrank while it was being copied; it will be fetched again next run", path: entry.path)
        }
        try checkUnchanged(fd: fd, entry: entry)
    }

    func close() {
        Glibc.close(rootFD)
        buffer?.deallocate()
        buffer = nil
    }

    /// Opens the listed file, as what the listing saw: never through a link the policy does not follow (a folder
    /// swapped for a link since the listing would lead the copy anywhere this user can read, /root included),
    /// never outside the source, and never a FIFO or device swapped in (whose open or read would wait for a
    /// writer that never comes, past any stop).
    private func openListedFile(_ path: RelativePath) throws -> Int32 {
        guard followLinks else {
            let fd = path.withCString { folio_open_file_beneath(rootFD, $0) }
            guard fd >= 0 else { throw fileError(path, errno: errno, doing: "open") }
            return try checkedRegular(fd, path)
        }
        // Why through O_PATH first: that only names what the links lead to, without opening it, so something
        // outside the source or not a file has no say before the checks (a FIFO's waiting writer is not let
        // through, a device's open has no effect). Reopened through /proc, the open is of that same file.
        let named = path.withCString { folio_openat_path(rootFD, $0) }
        guard named >= 0 else { throw fileError(path, errno: errno, doing: "open") }
        defer { Glibc.close(named) }
        // Why /proc can be relied on: Folio refuses to run without it (`Folio.main`).
        if let realRoot, let real = Self.realPath(of: named), !PathText.isWithin(real, realRoot) {
            throw SourceError(.changed, "\(rootPath)/\(path) now leads outside the source, to \(real), through a link made since the listing; not copied", path: path)
        }
        _ = try checkedRegular(named, path, closing: false)
        let fd = folio_open("/proc/self/fd/\(named)", O_RDONLY | O_NONBLOCK)
        guard fd >= 0 else { throw fileError(path, errno: errno, doing: "open") }
        return fd
    }

    /// `fd` when it is a regular file; else the error says what took the file's place (and `fd` is closed, when
    /// `closing`).
    private func checkedRegular(_ fd: Int32, _ path: RelativePath, closing: Bool = true) throws -> Int32 {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            let code = errno
            if closing { Glibc.close(fd) }
            throw fileError(path, errno: code, doing: "stat")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            if closing { Glibc.close(fd) }
            throw SourceError(.changed, "\(rootPath)/\(path) is no longer a regular file (a folder, FIFO, socket or device took its place since the listing); not copied", path: path)
        }
        return fd
    }

    /// The path the kernel holds for an open file.
    private static func realPath(of fd: Int32) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func checkUnchanged(fd: Int32, entry: Entry) throws {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw fileError(entry.path, errno: errno, doing: "stat") }
        let mtime = FileTime(modificationOf: info)
        guard Int64(info.st_size) == entry.size, mtime == entry.mtime else {
            throw SourceError(.changed, "\(entry.path) changed on the source since it was listed; it will be fetched next run", path: entry.path)
        }
    }

    private func fileError(_ path: RelativePath, errno code: Int32, doing action: String) -> SourceError {
        let reason = String(cString: strerror(code))
        switch code {
        case ENOENT: return SourceError(.notFound, "\(rootPath)/\(path) disappeared from the source", path: path)
        case EACCES, EPERM: return SourceError(.permission, "cannot read \(rootPath)/\(path): permission denied", path: path)
        case ELOOP: return SourceError(.notFound, "\(rootPath)/\(path), or a folder on its path, became a symbolic link; not followed", path: path)
        case ENOTDIR: return SourceError(.changed, "a folder on the path of \(rootPath)/\(path) is no longer a folder (a file or a link took its place since the listing); not copied", path: path)
        default: return SourceError(.localIO, "cannot \(action) \(rootPath)/\(path): \(reason)", path: path, underlying: "errno \(code)")
        }
    }
}
