import CFolioSys
import Foundation
import Glibc
import Synchronization

/// Walks a local folder fast: `readdir`, `fstatat` relative to each folder's descriptor, several threads over
/// subtrees. Used for local sources and for the stat pass over a destination.
///
/// Never leaves the folder: folders are opened with `O_NOFOLLOW` relative to their parent's descriptor, and a
/// symlink is followed only when the policy says so and `realpath` puts its target inside the root.
struct TreeWalker: Sendable {
    struct Result: Sendable {
        var items: [LocalItem]
        var issues: [ListingIssue]
    }

    /// The root's path (for `realpath` checks of followed links and for messages).
    let rootPath: String
    let symlinks: ListingOptions.SymlinkPolicy
    let exclude: ExcludeFilter
    /// A destination walk lists links and special files as they are (to be replaced); a source walk follows or
    /// skips links by policy and skips special files.
    let isDestination: Bool
    /// Names at the root to leave out (the destination's own `.folio`).
    let skipAtRoot: Set<[UInt8]>
    let threads: Int

    /// Walks the tree below `rootFD` (which stays owned by the caller) into items sorted by path. Blocking: call it
    /// off the cooperative pool.
    func walk(rootFD: Int32) -> Result {
        var findings = gather(rootFD: rootFD)
        var items: [LocalItem] = []
        items.reserveCapacity(findings.count)
        findings.drain { items.append($0) }
        items.withUnsafeMutableBufferPointer { $0.sortByPath(\.path) }
        return Result(items: items, issues: findings.issues)
    }

    /// What a walk found, in no particular order, held in chunks that `drain` frees as it hands them over.
    struct Findings {
        let count: Int
        var issues: [ListingIssue]
        fileprivate var parts: [Collected]

        /// Hands every item to `body`, freeing each chunk once seen: whatever `body` builds from the items, the
        /// tree is held twice over for one chunk at most (at 100,000 entries a merged copy was +4 MB at the peak).
        mutating func drain(_ body: (LocalItem) -> Void) {
            while var part = parts.popLast() {
                while let chunk = part.chunks.popLast() { chunk.forEach(body) }
            }
        }
    }

    /// Walks the tree below `rootFD` (which stays owned by the caller). Blocking: call it off the cooperative pool.
    func gather(rootFD: Int32) -> Findings {
        let realRoot = symlinks == .follow ? rootPath.withCString { Self.realPath($0) } : nil
        let rootIdentity = Self.identity(of: rootFD)
        let scheduler = WalkScheduler(threads: max(1, threads))
        let duplicate = dup(rootFD)
        guard duplicate >= 0 else {
            return Findings(count: 0, issues: [ListingIssue(path: rootPath, kind: .unreadable(String(cString: strerror(errno))))], parts: [])
        }
        scheduler.push(WalkJob(path: .root, fd: duplicate, ancestors: rootIdentity.map { [$0] } ?? []))
        let results = Locked<[Collected]>([])
        let group = DispatchGroup()
        for index in 0..<max(1, threads) {
            // Each walker thread owns the descriptors of the folders it is reading; jobs hand one over whole.
            DispatchQueue(label: "folio.walk.\(index)").async(group: group) {
                var local = Collected()
                while let job = scheduler.pop() {
                    self.read(job, realRoot: realRoot, scheduler: scheduler, into: &local)
                    scheduler.finished()
                }
                results.withLock { $0.append(local) }
            }
        }
        group.wait()
        var parts = results.withLock { list in
            defer { list = [] }
            return list
        }
        var issues: [ListingIssue] = []
        for index in parts.indices {
            issues.append(contentsOf: parts[index].issues)
            parts[index].issues = []
        }
        let count = parts.reduce(0) { total, part in part.chunks.reduce(total) { $0 + $1.count } }
        return Findings(count: count, issues: issues, parts: parts)
    }

    /// What one walker thread found, in fixed-size chunks: a growing array would hold its old and new buffers
    /// at each doubling, and its unused half until the merge.
    fileprivate struct Collected {
        static let chunkSize = 4_096
        var chunks: [[LocalItem]] = []
        var issues: [ListingIssue] = []

        mutating func append(_ item: LocalItem) {
            if chunks.isEmpty || chunks[chunks.count - 1].count == Self.chunkSize {
                chunks.append([])
                chunks[chunks.count - 1].reserveCapacity(Self.chunkSize)
            }
            chunks[chunks.count - 1].append(item)
        }
    }

    private func read(_ job: WalkJob, realRoot: String?, scheduler: WalkScheduler, into result: inout Collected) {
        guard let directory = fdopendir(job.fd) else {
            let error = errno
            close(job.fd)
            result.issues.append(ListingIssue(path: display(job.path), kind: .unreadable(String(cString: strerror(error)))))
            return
        }
        defer { closedir(directory) }
        let dirFD = job.fd
        while true {
            errno = 0
            guard let dirent = readdir(directory) else {
                if errno != 0 {
                    result.issues.append(ListingIssue(path: display(job.path), kind: .unreadable(String(cString: strerror(errno)))))
                }
                break
            }
            let nameLength = Int(strlen(&dirent.pointee.d_name.0))
            let name = withUnsafeBytes(of: &dirent.pointee.d_name) { Array($0.prefix(nameLength)) }
            if name == [0x2E] || name == [0x2E, 0x2E] { continue }
            if job.path.isRoot && skipAtRoot.contains(name) { continue }
            let path: RelativePath
            do {
                path = try job.path.appending(name: name)
            } catch {
                let shown = job.path.isRoot ? RelativePath.display(name) : "\(job.path)/\(RelativePath.display(name))"
                result.issues.append(ListingIssue(path: shown, kind: .skipped(error.problem.rawValue.replacingOccurrences(of: "is ", with: "name is ").replacingOccurrences(of: "contains", with: "name contains"))))
                continue
            }
            var info = stat()
            let statResult = CString.with(name) { fstatat(dirFD, $0, &info, AT_SYMLINK_NOFOLLOW) }
            if statResult != 0 {
                if errno == ENOENT { continue }  // removed between readdir and stat
                result.issues.append(ListingIssue(path: path.description, kind: .unreadable(String(cString: strerror(errno)))))
                continue
            }
            var followedFrom: String?
            if (info.st_mode & S_IFMT) == S_IFLNK {
                switch symlinks {
                case _ where isDestination:
                    break
                case .skip:
                    result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link (symlinks = \"skip\")")))
                    continue
                case .follow:
                    guard let realRoot, let target = CString.with(Array(rootPath.utf8) + [UInt8(ascii: "/")] + path.bytes, { Self.realPath($0) }),
                          target == realRoot || target.hasPrefix(realRoot == "/" ? "/" : realRoot + "/") else {
                        result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link leads outside the source root or nowhere")))
                        continue
                    }
                    if stat(target, &info) != 0 {
                        result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link target cannot be read")))
                        continue
                    }
                    followedFrom = target
                }
            }
            let mtime = FileTime(seconds: Int64(info.st_mtim.tv_sec), nanoseconds: Int64(info.st_mtim.tv_nsec))
            let mode = info.st_mode & S_IFMT
            if exclude.excludes(path, isFolder: mode == S_IFDIR) { continue }
            switch mode {
            case S_IFREG:
                result.append(LocalItem(path: path, kind: .file, size: Int64(info.st_size), mtime: mtime, inode: UInt64(info.st_ino)))
            case S_IFLNK:
                result.append(LocalItem(path: path, kind: .symlink, size: Int64(info.st_size), mtime: mtime, inode: UInt64(info.st_ino)))
            case S_IFDIR:
                let identity = DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
                if followedFrom != nil, job.ancestors.contains(identity) {
                    result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link loop")))
                    continue
                }
                let childFD: Int32 = CString.with(name) { cName in
                    followedFrom != nil
                        ? folio_openat(dirFD, cName, O_RDONLY | O_DIRECTORY)
                        : folio_openat_dir_nofollow(dirFD, cName)
                }
                result.append(LocalItem(path: path, kind: .folder, size: 0, mtime: mtime, inode: UInt64(info.st_ino)))
                guard childFD >= 0 else {
                    result.issues.append(ListingIssue(path: path.description, kind: .unreadable(String(cString: strerror(errno)))))
                    continue
                }
                let child = WalkJob(path: path, fd: childFD, ancestors: symlinks == .follow ? job.ancestors + [identity] : [])
                if scheduler.shouldShare() {
                    scheduler.push(child)
                } else {
                    read(child, realRoot: realRoot, scheduler: scheduler, into: &result)
                }
            default:
                if isDestination {
                    result.append(LocalItem(path: path, kind: .special, size: 0, mtime: mtime, inode: UInt64(info.st_ino)))
                } else {
                    result.issues.append(ListingIssue(path: path.description, kind: .skipped("not a regular file, folder or link (FIFO, socket or device)")))
                }
            }
        }
    }

    private func display(_ path: RelativePath) -> String { path.isRoot ? rootPath : path.description }

    static func realPath(_ path: UnsafePointer<CChar>) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    static func identity(of fd: Int32) -> DirectoryIdentity? {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        return DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
    }
}

struct DirectoryIdentity: Hashable, Sendable {
    var device: UInt64
    var inode: UInt64
}

struct WalkJob: Sendable {
    var path: RelativePath
    /// An open descriptor of the folder; whoever pops the job closes it.
    var fd: Int32
    /// Folders on the way here, to detect loops through followed links.
    var ancestors: [DirectoryIdentity]
}
