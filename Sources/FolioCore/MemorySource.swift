import Foundation
import Synchronization

/// A source held in memory, for engine tests: entries and file contents set by the test, errors injected at will.
public final class MemorySource: Source {
    /// The tree; tests change it between runs. Why a mutex: tests edit it while download workers read it.
    private let state: Mutex<State>

    struct State {
        var entries: [RelativePath: Entry] = [:]
        var contents: [RelativePath: [UInt8]] = [:]
        var unreadable: [RelativePath] = []
        var rootError: SourceError?
        var failingDownloads: [RelativePath: SourceError] = [:]
        var cutDownloads: [RelativePath: (bytes: Int, error: SourceError)] = [:]
        var downloads: [(RelativePath, Int64)] = []
        var batches: [[RelativePath]] = []
        var refusesBatches = false
        var downloadDelay: TimeInterval = 0
        /// The connection (numbered from 1 in the order opened) each single download came through.
        var fetchedBy: [RelativePath: Int] = [:]
        var roundTrip: Duration?
        var connections = 0
        /// What runs once a file's single download has written its bytes (see `afterDownloading`).
        var afterDownload: [RelativePath: @Sendable () -> Void] = [:]
    }

    /// What the source says it can do, as the test set it.
    public let features: SourceFeatures

    /// An empty source with `features` (by default nanosecond times, no batches).
    public init(features: SourceFeatures = SourceFeatures(mtimePrecision: .nanosecond)) {
        self.features = features
        state = Mutex(State())
    }

    /// Always `memory://`.
    public var displayName: String { "memory://" }

    /// Adds or replaces a file; its folders are added too.
    public func setFile(_ path: String, _ content: String, mtime: FileTime = FileTime(seconds: 1_700_000_000), validator: String? = nil, checksum: String? = nil) {
        let relative = try! RelativePath(validating: path)
        let bytes = Array(content.utf8)
        state.withLock { state in
            var parent = relative.parent
            while let folder = parent, !folder.isRoot {
                if state.entries[folder] == nil { state.entries[folder] = Entry(path: folder, kind: .folder, mtime: FileTime(seconds: 1_600_000_000)) }
                parent = folder.parent
            }
            state.entries[relative] = Entry(path: relative, kind: .file, size: Int64(bytes.count), mtime: mtime,
                                            precision: features.mtimePrecision, validator: validator, checksum: checksum)
            state.contents[relative] = bytes
        }
    }

    /// Adds or replaces a folder (its parent folders are not added).
    public func setFolder(_ path: String, mtime: FileTime = FileTime(seconds: 1_600_000_000)) {
        let relative = try! RelativePath(validating: path)
        state.withLock { $0.entries[relative] = Entry(path: relative, kind: .folder, mtime: mtime) }
    }

    /// Removes an entry and everything below it.
    public func remove(_ path: String) {
        let relative = try! RelativePath(validating: path)
        state.withLock { state in
            for key in state.entries.keys where key.isWithin(relative) {
                state.entries[key] = nil
                state.contents[key] = nil
            }
        }
    }

    /// Makes the listing report a folder as unreadable (and leave out what is below it).
    public func makeUnreadable(_ path: String) {
        state.withLock { $0.unreadable.append(try! RelativePath(validating: path)) }
    }

    /// Makes `snapshot` throw `error`, as an unreachable root does; nil lists again.
    public func failRoot(with error: SourceError?) { state.withLock { $0.rootError = error } }

    /// Makes every download of `path` throw `error` (a batch leaves the file out); nil lets it through again.
    public func failDownload(_ path: String, with error: SourceError?) {
        state.withLock { $0.failingDownloads[try! RelativePath(validating: path)] = error }
    }

    /// Makes the next download of `path` deliver `bytes` bytes and then fail with `error`, as a dropped connection
    /// does; once.
    public func cutDownload(_ path: String, after bytes: Int, with error: SourceError) {
        state.withLock { $0.cutDownloads[try! RelativePath(validating: path)] = (bytes, error) }
    }

    /// Runs `action` once the single download of `path` has written all its bytes, before its worker takes the
    /// next file: where a stop by hand (which cancels only the progress) lands between two files.
    public func afterDownloading(_ path: String, run action: @escaping @Sendable () -> Void) {
        state.withLock { $0.afterDownload[try! RelativePath(validating: path)] = action }
    }

    /// The action set by `afterDownloading` for `path`, if any.
    fileprivate func actionAfterDownload(of path: RelativePath) -> (@Sendable () -> Void)? {
        state.withLock { $0.afterDownload[path] }
    }

    /// Makes every batch deliver nothing, as a server without `tar` (an SFTP-only account) does.
    public func refuseBatches() { state.withLock { $0.refusesBatches = true } }

    /// Makes each single download take `seconds`, as a far server's three round trips a file do.
    public func delayDownloads(by seconds: TimeInterval) { state.withLock { $0.downloadDelay = seconds } }

    /// How many connections single downloads came through.
    public var connectionsThatFetched: Int { state.withLock { Set($0.fetchedBy.values).count } }

    /// Every download asked for so far: path and starting offset.
    public var downloads: [(RelativePath, Int64)] { state.withLock { $0.downloads } }

    /// Every batch asked for so far (with `features.batchDownloads`): its paths, in order.
    public var batches: [[RelativePath]] { state.withLock { $0.batches } }

    /// Lists the entries set so far, minus excluded ones and what is below a folder made unreadable (which is
    /// reported as `.unreadable`). Throws the error set by `failRoot`.
    public func snapshot(options: ListingOptions) async throws -> Snapshot {
        try state.withLock { state in
            if let error = state.rootError { throw error }
            var builder = SnapshotBuilder()
            for entry in state.entries.values {
                if state.unreadable.contains(where: { entry.path.isWithin($0) && entry.path != $0 }) { continue }
                if options.exclude.excludes(entry.path, isFolder: entry.kind == .folder) { continue }
                if entry.path.components.indices.dropLast().contains(where: { index in
                    let ancestor = try! RelativePath(validating: Array(entry.path.components[0...index].joined(separator: [UInt8(ascii: "/")])))
                    return options.exclude.excludes(ancestor, isFolder: true)
                }) { continue }
                builder.append(entry)
            }
            for folder in state.unreadable {
                builder.note(ListingIssue(path: folder.description, kind: .unreadable("permission denied")))
            }
            return builder.finish()
        }
    }

    /// The link's round trip this source reports; tests set it to play a near or a far server.
    public var roundTrip: Duration? {
        get { state.withLock { $0.roundTrip } }
        set { state.withLock { $0.roundTrip = newValue } }
    }

    /// How many connections the engine has opened.
    public var connections: Int { state.withLock { $0.connections } }

    /// Opens a connection numbered in the order opened (counted in `connections`).
    public func makeConnection() throws -> any SourceConnection {
        let number = state.withLock { state in
            state.connections += 1
            return state.connections
        }
        return MemoryConnection(source: self, number: number)
    }

    /// A batch delivers, as a server-side `tar` would, every file that is there and unchanged; a file set to
    /// fail is left out (the engine then fetches it on its own and gets the error).
    fileprivate func content(forBatch entries: [Entry]) -> [[UInt8]?] {
        state.withLock { state in
            state.batches.append(entries.map(\.path))
            if state.refusesBatches { return entries.map { _ in nil } }
            return entries.map { entry in
                guard state.failingDownloads[entry.path] == nil, state.entries[entry.path] == entry else { return nil }
                return state.contents[entry.path]
            }
        }
    }

    /// The bytes of `entry` from `offset`, and where to cut them off with which error (see `cutDownload`).
    fileprivate func content(for entry: Entry, from offset: Int64, connection: Int) throws -> (bytes: [UInt8], cut: (bytes: Int, error: SourceError)?) {
        let delay = state.withLock { $0.downloadDelay }
        if delay > 0 { Thread.sleep(forTimeInterval: delay) }
        return try state.withLock { state in
            state.downloads.append((entry.path, offset))
            state.fetchedBy[entry.path] = connection
            if let error = state.failingDownloads[entry.path] { throw error }
            guard let bytes = state.contents[entry.path], let current = state.entries[entry.path] else {
                throw SourceError(.notFound, "\(entry.path) disappeared from the source", path: entry.path)
            }
            guard current == entry else {
                throw SourceError(.changed, "\(entry.path) changed on the source since it was listed", path: entry.path)
            }
            return (Array(bytes[Int(offset)...]), state.cutDownloads.removeValue(forKey: entry.path))
        }
    }
}

final class MemoryConnection: SourceConnection {
    private let source: MemorySource
    private let number: Int

    init(source: MemorySource, number: Int) {
        self.source = source
        self.number = number
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        let (bytes, cut) = try source.content(for: entry, from: offset, connection: number)
        try bytes.prefix(cut?.bytes ?? bytes.count).withUnsafeBytes { try sink.write($0) }
        if let cut { throw cut.error }
        source.actionAfterDownload(of: entry.path)?()
    }

    func download(batch: DownloadBatch) throws {
        for (index, content) in source.content(forBatch: batch.entries).enumerated() {
            guard let content else { continue }
            try content.withUnsafeBytes { try batch.sink(for: index).write($0) }
            batch.markComplete(index)
        }
    }

    func close() {}
}
