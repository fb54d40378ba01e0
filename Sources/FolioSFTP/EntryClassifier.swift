import FolioCore

/// Turns what the server listed (by readdir or by find) into entries and issues, with one set of rules: names
/// validated, excludes applied before descending, specials skipped, symlinks skipped or followed only inside
/// the root (resolved with the server's realpath), loops detected.
struct EntryClassifier: Sendable {
    /// The source root's real path on the server.
    let realRoot: [UInt8]
    let options: ListingOptions

    /// Lists one folder by SFTP readdir; `next`, the folder this session lists after it, is opened meanwhile.
    func list(_ job: FolderJob, next: FolderJob?, _ session: SSHSession, paths: inout PathArena) throws(SourceError) -> FolderListing {
        let items: Result<[(name: [UInt8], attributes: RemoteAttributes)], LibSSH2Error>
        do { items = .success(try session.listFolder(job.remote, next: next?.remote)) } catch { items = .failure(error) }
        return try classify(job, items, session, paths: &paths)
    }

    /// Classifies what readdir gave for one folder: its names, or why it could not be read. The entries' paths are
    /// packed into `paths`, the calling thread's arena (one allocation each cost 1.6 MB more at 100,000 entries).
    func classify(_ job: FolderJob, _ listed: Result<[(name: [UInt8], attributes: RemoteAttributes)], LibSSH2Error>,
                  _ session: SSHSession, paths: inout PathArena) throws(SourceError) -> FolderListing {
        let items: [(name: [UInt8], attributes: RemoteAttributes)]
        switch listed {
        case .success(let names):
            items = names
        case .failure(let error):
            // The root itself failing is the run's error; a folder below it is an issue that blocks removals.
            if error.isConnectionLoss || job.path.isRoot { throw session.sourceError(error, doing: "listing", remote: job.remote) }
            return FolderListing(issues: [ListingIssue(path: job.path.description, kind: .unreadable(Self.reason(error)))])
        }
        var out = FolderListing()
        for (name, attributes) in items {
            if name == [UInt8(ascii: ".")] || name == [UInt8(ascii: "."), UInt8(ascii: ".")] { continue }
            let path: RelativePath
            do { path = try job.path.appending(name: name, in: &paths) } catch {
                out.found.note(Self.nameIssue(parent: job.path, name: name, error))
                continue
            }
            let mtime = attributes.mtime.map { FileTime(seconds: $0) } ?? .unknown
            switch Self.admit(path, kind: attributes.kind, size: attributes.size, mtime: mtime, precision: .second, options: options, into: &out) {
            case .done: break
            case .descend: out.folders.append(FolderJob(path: path, remote: Self.joined(job.remote, name), chain: job.chain))
            case .follow: try follow(path, remote: Self.joined(job.remote, name), containing: job, session, into: &out)
            }
        }
        return out
    }

    /// Classifies an exec listing's records as they arrive (`ExecListing.run`), following links once the listing
    /// is whole: the session's channel is busy with it until then.
    struct ExecTree {
        let options: ListingOptions
        private var out = FolderListing()
        /// The folders listed and descended into, by their raw path below the root.
        private var folders: [[UInt8]: RelativePath] = [:]
        /// Folders whose contents stay out (excluded, or a name that cannot be mirrored).
        private var pruned = Set<[UInt8]>()
        private var paths = PathArena()
        /// Links to follow at the end: each one's path, and its raw path and parent's below the root.
        private var links: [(path: RelativePath, raw: [UInt8], parent: [UInt8])] = []

        init(options: ListingOptions) { self.options = options }

        /// Takes one record; false when its folder was never listed (the output cannot be trusted).
        mutating func take(_ record: ExecListing.Record) -> Bool {
            let slash = record.path.lastIndex(of: UInt8(ascii: "/"))
            let parentRaw = slash.map { Array(record.path[..<$0]) } ?? []
            let name = slash.map { record.path[($0 + 1)...] } ?? record.path
            let isFolder = record.type == UInt8(ascii: "d")
            let parent: RelativePath
            if parentRaw.isEmpty {
                parent = .root
            } else if let known = folders[parentRaw] {
                parent = known
            } else if pruned.contains(parentRaw) {
                if isFolder { pruned.insert(Array(record.path)) }
                return true
            } else {
                return false
            }
            let path: RelativePath
            do { path = try parent.appending(name: name, in: &paths) } catch {
                out.found.note(EntryClassifier.nameIssue(parent: parent, name: Array(name), error))
                if isFolder { pruned.insert(Array(record.path)) }
                return true
            }
            let kind: RemoteAttributes.Kind = switch record.type {
            case UInt8(ascii: "f"): .file
            case UInt8(ascii: "d"): .folder
            case UInt8(ascii: "l"): .symlink
            default: .special
            }
            switch EntryClassifier.admit(path, kind: kind, size: isFolder ? 0 : record.size, mtime: record.mtime, precision: .nanosecond,
                                         options: options, into: &out) {
            case .descend: folders[Array(record.path)] = path
            case .follow: links.append((path, Array(record.path), parentRaw))
            case .done: if isFolder { pruned.insert(Array(record.path)) }
            }
            return true
        }

        /// The listing, once every record was taken: the links followed over `session`, with the root's real path.
        mutating func finish(realRoot: [UInt8], _ session: SSHSession) throws(SourceError) -> FolderListing {
            let classifier = EntryClassifier(realRoot: realRoot, options: options)
            for link in links {
                let containing = FolderJob(path: link.path.parent ?? .root, remote: link.parent.isEmpty ? realRoot : EntryClassifier.joined(realRoot, link.parent), chain: [])
                try classifier.follow(link.path, remote: EntryClassifier.joined(realRoot, link.raw), containing: containing, session, into: &out)
            }
            links = []
            return out
        }
    }

    /// What to do next with an item `admit` took in (or left out).
    enum Admission { case done, descend, follow }

    /// Adds one listed item: a file or folder as an entry unless excluded, a link (when skipped) or special as an
    /// issue. A folder whose contents belong in the listing is to be descended into, a link under
    /// `symlinks = "follow"` to be followed.
    static func admit(_ path: RelativePath, kind: RemoteAttributes.Kind, size: Int64?, mtime: FileTime, precision: TimePrecision,
                      options: ListingOptions, into out: inout FolderListing) -> Admission {
        switch kind {
        case .file:
            if !options.exclude.excludes(path, isFolder: false) { admitFile(path, size: size, mtime: mtime, precision: precision, into: &out) }
            return .done
        case .folder:
            if options.exclude.excludes(path, isFolder: true) { return .done }
            out.found.append(Entry(path: path, kind: .folder, mtime: mtime, precision: precision))
            return .descend
        case .symlink:
            if options.symlinks == .follow { return .follow }
            if !options.exclude.excludes(path, isFolder: false) {
                out.found.note(ListingIssue(path: path.description, kind: .skipped("symbolic link (symlinks = \"skip\")")))
            }
            return .done
        case .special, .unknown:
            if !options.exclude.excludes(path, isFolder: false) {
                out.found.note(ListingIssue(path: path.description, kind: .skipped("not a regular file, folder or link (FIFO, socket or device)")))
            }
            return .done
        }
    }

    /// A file as an entry; one the server gave no size for is unreadable, as its contents cannot be checked (taken as
    /// empty, a 10-byte file was installed empty and then "unchanged" run after run).
    private static func admitFile(_ path: RelativePath, size: Int64?, mtime: FileTime, precision: TimePrecision, into out: inout FolderListing) {
        guard let size else {
            out.found.note(ListingIssue(path: path.description, kind: .unreadableFile("the server gave no size for it")))
            return
        }
        out.found.append(Entry(path: path, kind: .file, size: size, mtime: mtime, precision: precision))
    }

    /// Follows a symlink only when the server's realpath of it lies inside the root; a folder it leads to is
    /// listed by readdir under the link's path, unless it contains the link (a loop).
    func follow(_ path: RelativePath, remote: [UInt8], containing job: FolderJob, _ session: SSHSession, into out: inout FolderListing) throws(SourceError) {
        let real: [UInt8]
        do {
            real = try session.realpath(remote)
        } catch {
            try unresolved(path, remote: remote, session.whyRealpathFailed(remote, error), session, into: &out)
            return
        }
        guard Self.isWithin(real, realRoot) else {
            out.found.note(.linkLeadsNowhere(path))
            return
        }
        let attributes: RemoteAttributes
        do {
            attributes = try session.stat(real, followLinks: false)
        } catch {
            try unresolved(path, remote: remote, error, session, into: &out)
            return
        }
        let mtime = attributes.mtime.map { FileTime(seconds: $0) } ?? .unknown
        switch attributes.kind {
        case .file:
            if !options.exclude.excludes(path, isFolder: false) { Self.admitFile(path, size: attributes.size, mtime: mtime, precision: .second, into: &out) }
        case .folder:
            if options.exclude.excludes(path, isFolder: true) { return }
            if Self.isWithin(job.remote, real) || job.chain.contains(where: { Self.isWithin($0, real) }) {
                out.found.note(ListingIssue(path: path.description, kind: .skipped("symbolic link loop")))
                return
            }
            out.found.append(Entry(path: path, kind: .folder, mtime: mtime, precision: .second))
            // The folder the link is in joins the chain with its target: a link further down that leads back to
            // it (or above it) is a loop there, as a local source finds it, not one level later.
            out.folders.append(FolderJob(path: path, remote: real, chain: job.chain + [job.remote, real]))
        default:
            out.found.note(ListingIssue(path: path.description, kind: .skipped("not a regular file, folder or link (FIFO, socket or device)")))
        }
    }

    /// Records a link the server did not resolve, failing with `error` (nil: no reason given). One that leads
    /// nowhere (a missing target, a loop) is skipped; any other is unreadable, unless excluded.
    private func unresolved(_ path: RelativePath, remote: [UInt8], _ error: LibSSH2Error?, _ session: SSHSession, into out: inout FolderListing) throws(SourceError) {
        if let error, error.isConnectionLoss { throw session.sourceError(error, doing: "resolving the link", remote: remote) }
        if let error, error.isNoSuchFile {
            out.found.note(.linkLeadsNowhere(path))
            return
        }
        if options.exclude.excludes(path, isFolder: false), options.exclude.excludes(path, isFolder: true) { return }
        out.found.note(.unresolvedLink(path, reason: error.map(Self.reason) ?? "the server did not say why"))
    }

    /// Whether `path` is `folder` or lies below it (both real, absolute server paths).
    static func isWithin<Path: Collection>(_ path: Path, _ folder: [UInt8]) -> Bool where Path.Element == UInt8 {
        if folder == [UInt8(ascii: "/")] { return path.first == UInt8(ascii: "/") }
        guard path.starts(with: folder) else { return false }
        return path.count == folder.count || path.dropFirst(folder.count).first == UInt8(ascii: "/")
    }

    static func joined<Name: Collection>(_ folder: [UInt8], _ name: Name) -> [UInt8] where Name.Element == UInt8 {
        var path = folder
        if path.last != UInt8(ascii: "/") { path.append(UInt8(ascii: "/")) }
        path.append(contentsOf: name)
        return path
    }

    static func nameIssue(parent: RelativePath, name: [UInt8], _ error: NameError) -> ListingIssue {
        let shown = parent.isRoot ? RelativePath.display(name) : "\(parent)/\(RelativePath.display(name))"
        return ListingIssue(path: shown, kind: .skipped(error.problem.rawValue.replacingOccurrences(of: "is ", with: "name is ").replacingOccurrences(of: "contains", with: "name contains")))
    }

    static func reason(_ error: LibSSH2Error) -> String {
        if error.isPermissionDenied { return "permission denied on the server" }
        if error.isNoSuchFile { return "disappeared while listing" }
        if error.isEndlessListing { return error.message }
        return error.description
    }
}
