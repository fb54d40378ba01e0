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
        /// A destination walk's entries left in place unlisted (see `LeftAlone`); empty for a source walk.
        var leftAlone = LeftAlone()
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
    /// A source walk's target destination, by identity: met as a folder of the source (a bind mount puts it
    /// there, where no path check sees it), it is skipped, or each run would copy the mirror into itself.
    var destinationIdentity: DirectoryIdentity?

    /// Walks the tree below `rootFD` (which stays owned by the caller) into items sorted by path. Blocking: call it
    /// off the cooperative pool.
    func walk(rootFD: Int32) -> Result {
        var findings = gather(rootFD: rootFD)
        var items: [LocalItem] = []
        items.reserveCapacity(findings.count)
        findings.drain { items.append($0) }
        return Result(items: items, issues: findings.issues, leftAlone: findings.leftAlone)
    }

    /// What a walk found, held in chunks that `drain` hands over in path order and frees as it goes.
    struct Findings {
        let count: Int
        var issues: [ListingIssue]
        var leftAlone = LeftAlone()
        fileprivate var parts: [Collected]

        /// Hands every item to `body` in `RelativePath` order, freeing each chunk once all of it was seen: whatever
        /// `body` builds from the items, the tree is held twice over for a few chunks at most (at 100,000 entries a
        /// merged copy was +4 MB at the peak).
        ///
        /// Each thread's items are already in path order folder by folder (see `read`); a subfolder handed to
        /// another thread left a mark after its own item, where its subtree is spliced in.
        mutating func drain(_ body: (LocalItem) -> Void) {
            var spans: [Int: Cursor] = [:]
            for (part, collected) in parts.enumerated() {
                for span in collected.spans { spans[span.job] = Cursor(part: part, next: span.start, end: span.end) }
            }
            var unseen = parts.map { $0.chunks.map(\.count) }
            var stack: [Cursor] = spans[Collected.rootJob].map { [$0] } ?? []
            while let top = stack.last {
                guard top.next < top.end else {
                    stack.removeLast()
                    continue
                }
                stack[stack.count - 1].next += 1
                let chunk = top.next / Collected.chunkSize
                let item = parts[top.part].chunks[chunk][top.next % Collected.chunkSize]
                body(item)
                unseen[top.part][chunk] -= 1
                if unseen[top.part][chunk] == 0 { parts[top.part].chunks[chunk] = [] }
                if item.kind == .folder, let job = parts[top.part].handoffs[top.next], let span = spans[job] {
                    stack.append(span)
                }
            }
            parts = []
        }

        /// How many subfolders were handed from one thread to another (their subtrees are spliced by `drain`).
        var handoffCount: Int { parts.reduce(0) { $0 + $1.handoffs.count } }

        /// A place in one thread's items: the next one to hand over and the end of the run.
        private struct Cursor {
            var part: Int
            var next: Int
            var end: Int
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
        scheduler.push(WalkJob(id: Collected.rootJob, path: .root, fd: duplicate, ancestors: rootIdentity.map { [$0] } ?? []))
        let results = Locked<[Collected]>([])
        let group = DispatchGroup()
        for index in 0..<max(1, threads) {
            // Each walker thread owns the descriptors of the folders it is reading; jobs hand one over whole.
            WorkerThread.start("folio-walk-\(index)", in: group) {
                var local = Collected(thread: index)
                // This thread's paths are packed here; the arena never leaves the thread (see `PathArena`).
                var paths = PathArena()
                while let job = scheduler.pop() {
                    let start = local.count
                    self.read(job, realRoot: realRoot, scheduler: scheduler, into: &local, paths: &paths)
                    local.spans.append((job.id, start, local.count))
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
        var excluded: [RelativePath] = [], holdingUnlisted: [RelativePath] = []
        var unreadable: [(path: RelativePath, why: String)] = []
        for index in parts.indices {
            issues.append(contentsOf: parts[index].issues)
            excluded += parts[index].excluded
            holdingUnlisted += parts[index].holdingUnlisted
            unreadable += parts[index].unreadable
            parts[index].issues = []
        }
        return Findings(count: parts.reduce(0) { $0 + $1.count }, issues: issues,
                        leftAlone: LeftAlone(excluded: excluded, holdingUnlisted: holdingUnlisted, unreadable: unreadable), parts: parts)
    }

    /// What one walker thread found, in fixed-size chunks: a growing array would hold its old and new buffers
    /// at each doubling, and its unused half until the merge.
    fileprivate struct Collected {
        static let chunkSize = 4_096
        static let rootJob = 0
        let thread: Int
        var chunks: [[LocalItem]] = []
        var count = 0
        var issues: [ListingIssue] = []
        /// A destination walk's excluded entries (see `LeftAlone`).
        var excluded: [RelativePath] = []
        /// A destination walk's folders holding a name that cannot be a `RelativePath` (a newline in it, say).
        var holdingUnlisted: [RelativePath] = []
        /// A destination walk's entries below the root that it could not read, with why.
        var unreadable: [(path: RelativePath, why: String)] = []
        /// The folders this thread was handed: the items read for each (its subtree, less the subfolders it
        /// handed on) are the run `start..<end` of this thread's items.
        var spans: [(job: Int, start: Int, end: Int)] = []
        /// Subfolders this thread handed on, by the position of the folder's own item: its subtree goes after it.
        var handoffs: [Int: Int] = [:]
        private var handedOn = 0

        init(thread: Int) { self.thread = thread }

        mutating func append(_ item: LocalItem) {
            if chunks.isEmpty || chunks[chunks.count - 1].count == Self.chunkSize {
                chunks.append([])
                chunks[chunks.count - 1].reserveCapacity(Self.chunkSize)
            }
            chunks[chunks.count - 1].append(item)
            count += 1
        }

        /// Marks the last item (a folder) as handed on, and returns the job number of its subtree: unique across
        /// the threads of one walk, never the root's.
        mutating func handOnLast() -> Int {
            handedOn += 1
            let job = (thread + 1) << 40 | handedOn
            handoffs[count - 1] = job
            return job
        }
    }

    /// Reads one folder: its entries in byte order of their names, each folder's subtree (read here, or handed to
    /// an idle thread) right after its own item. Why that order: names hold no `/`, which ranks below every other
    /// byte, so it is exactly `RelativePath` order, and the walk needs no sort of the whole tree (which was a
    /// quarter of a no-change run at 100,000 files, mostly cache misses on the scattered paths).
    private func read(_ job: WalkJob, realRoot: String?, scheduler: WalkScheduler, into result: inout Collected,
                      paths: inout PathArena) {
        guard let directory = fdopendir(job.fd) else {
            let error = errno
            close(job.fd)
            cannotRead(job.path, error, into: &result)
            return
        }
        defer { closedir(directory) }
        let dirFD = job.fd
        // The folder's names, back to back in one buffer: one allocation, not one per name.
        var names: [UInt8] = []
        var bounds: [Range<Int>] = []
        while true {
            errno = 0
            guard let dirent = readdir(directory) else {
                if errno != 0 { cannotRead(job.path, errno, into: &result) }
                break
            }
            withUnsafeBytes(of: &dirent.pointee.d_name) { raw in
                let name = UnsafeRawBufferPointer(rebasing: raw.prefix(strlen(raw.baseAddress!.assumingMemoryBound(to: CChar.self))))
                if name.elementsEqual([0x2E]) || name.elementsEqual([0x2E, 0x2E]) { return }
                if job.path.isRoot && skipAtRoot.contains(Array(name)) { return }
                bounds.append(names.count..<names.count + name.count)
                names.append(contentsOf: name)
            }
        }
        names.withUnsafeBufferPointer { names in
            bounds.sort { RelativePath.compare(UnsafeBufferPointer(rebasing: names[$0]), UnsafeBufferPointer(rebasing: names[$1])) < 0 }
            for range in bounds {
                readEntry(UnsafeBufferPointer(rebasing: names[range]), in: job, dirFD: dirFD, realRoot: realRoot, scheduler: scheduler,
                          into: &result, paths: &paths)
            }
        }
    }

    /// Stats one entry of a folder and records it; a folder is read next (depth first) or handed on.
    private func readEntry(_ name: UnsafeBufferPointer<UInt8>, in job: WalkJob, dirFD: Int32, realRoot: String?,
                           scheduler: WalkScheduler, into result: inout Collected, paths: inout PathArena) {
        let path: RelativePath
        do {
            path = try job.path.appending(name: name, in: &paths)
        } catch {
            let shown = job.path.isRoot ? RelativePath.display(Array(name)) : "\(job.path)/\(RelativePath.display(Array(name)))"
            if isDestination { result.holdingUnlisted.append(job.path) }
            result.issues.append(ListingIssue(path: shown, kind: .skipped(error.problem.rawValue.replacingOccurrences(of: "is ", with: "name is ").replacingOccurrences(of: "contains", with: "name contains"))))
            return
        }
        var info = stat()
        let statResult = CString.with(name) { fstatat(dirFD, $0, &info, AT_SYMLINK_NOFOLLOW) }
        if statResult != 0 {
            if errno == ENOENT { return }  // removed between readdir and stat
            cannotRead(path, errno, into: &result)
            return
        }
        var followedFrom: String?
        if (info.st_mode & S_IFMT) == S_IFLNK {
            switch symlinks {
            case _ where isDestination:
                break
            case .skip:
                result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link (symlinks = \"skip\")")))
                return
            case .follow:
                guard let followed = follow(path, realRoot: realRoot, into: &result) else { return }
                followedFrom = followed.target
                info = followed.info
            }
        }
        let mtime = FileTime(modificationOf: info)
        let mode = info.st_mode & S_IFMT
        if exclude.excludes(path, isFolder: mode == S_IFDIR) {
            if isDestination { result.excluded.append(path) }
            return
        }
        switch mode {
        case S_IFREG:
            result.append(LocalItem(path: path, kind: .file, size: Int64(info.st_size), mtime: mtime, inode: UInt64(info.st_ino)))
        case S_IFLNK:
            result.append(LocalItem(path: path, kind: .symlink, size: Int64(info.st_size), mtime: mtime, inode: UInt64(info.st_ino)))
        case S_IFDIR:
            let identity = DirectoryIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino))
            if identity == destinationIdentity {
                result.issues.append(ListingIssue(path: path.description, kind: .skipped("it is this target's destination, mounted or linked into the source; Folio would copy the mirror into itself: exclude it, or mount the destination elsewhere")))
                return
            }
            if followedFrom != nil, job.ancestors.contains(identity) {
                result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link loop")))
                return
            }
            let childFD: Int32 = CString.with(name) { cName in
                followedFrom != nil
                    ? folio_openat(dirFD, cName, O_RDONLY | O_DIRECTORY)
                    : folio_openat_dir_nofollow(dirFD, cName)
            }
            let openError = errno  // before the append below, which may allocate
            result.append(LocalItem(path: path, kind: .folder, size: 0, mtime: mtime, inode: UInt64(info.st_ino)))
            guard childFD >= 0 else {
                cannotRead(path, openError, into: &result)
                return
            }
            let ancestors = symlinks == .follow ? job.ancestors + [identity] : []
            if scheduler.shouldShare() {
                scheduler.push(WalkJob(id: result.handOnLast(), path: path, fd: childFD, ancestors: ancestors))
            } else {
                read(WalkJob(id: job.id, path: path, fd: childFD, ancestors: ancestors), realRoot: realRoot, scheduler: scheduler,
                     into: &result, paths: &paths)
            }
        default:
            if isDestination {
                result.append(LocalItem(path: path, kind: .special, size: 0, mtime: mtime, inode: UInt64(info.st_ino)))
            } else {
                result.issues.append(ListingIssue(path: path.description, kind: .skipped("not a regular file, folder or link (FIFO, socket or device)")))
            }
        }
    }

    /// The real path a followed link leads to and what is there, or nil with what became of the link recorded.
    /// One that leads outside the root or nowhere (its target, or a folder on the way, is missing) or into a loop
    /// of links is skipped; one that cannot be resolved for any other reason is unreadable, unless excluded.
    private func follow(_ path: RelativePath, realRoot: String?, into result: inout Collected) -> (target: String, info: stat)? {
        guard let realRoot else {
            result.issues.append(.unresolvedLink(path, reason: "the real path of \(rootPath) is unknown"))
            return nil
        }
        let (resolved, resolveError) = CString.with(Array(rootPath.utf8) + [UInt8(ascii: "/")] + path.bytes) { (Self.realPath($0), errno) }
        let error: Int32
        if let target = resolved {
            guard target == realRoot || target.hasPrefix(realRoot == "/" ? "/" : realRoot + "/") else {
                result.issues.append(.linkLeadsNowhere(path))
                return nil
            }
            var info = stat()
            if stat(target, &info) == 0 { return (target, info) }
            error = errno
        } else {
            error = resolveError
        }
        switch error {
        case ENOENT, ENOTDIR:
            result.issues.append(.linkLeadsNowhere(path))
        case ELOOP:
            result.issues.append(ListingIssue(path: path.description, kind: .skipped("symbolic link loop")))
        default:
            if exclude.excludes(path, isFolder: false), exclude.excludes(path, isFolder: true) { break }
            result.issues.append(.unresolvedLink(path, reason: String(cString: strerror(error))))
        }
        return nil
    }

    private func display(_ path: RelativePath) -> String { path.isRoot ? rootPath : path.description }

    /// Notes an entry the walk could not read for `error`. A source's is a listing issue, which holds back
    /// removals; a destination's (below its root) is left alone by the planner (`LeftAlone.hides`), so the rest
    /// of the run goes on around it. Its root unread is an issue either way: nothing can be planned then.
    private func cannotRead(_ path: RelativePath, _ error: Int32, into result: inout Collected) {
        let why = String(cString: strerror(error))
        if isDestination, !path.isRoot {
            result.unreadable.append((path, why))
        } else if !isDestination, error == EACCES || error == EPERM {
            // The line the run's summary points to ("as said above"): it says what to do.
            result.issues.append(ListingIssue(path: display(path), kind: .unreadable("\(why); make it readable by \(PathText.userName)")))
        } else {
            result.issues.append(ListingIssue(path: display(path), kind: .unreadable(why)))
        }
    }

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
    /// Which handed-on subtree this is (the root's is 0); a folder read in place keeps its parent's.
    var id: Int
    var path: RelativePath
    /// An open descriptor of the folder; whoever pops the job closes it.
    var fd: Int32
    /// Folders on the way here, to detect loops through followed links.
    var ancestors: [DirectoryIdentity]
}
