import FolioCore
import Foundation

/// A `MemorySource` that runs `hook` on the download worker's thread just before it sends one file: to hold that
/// download until something happened, or to act (write into the destination) while the run is under way.
public final class HookedSource: Source {
    public let memory: MemorySource
    public let path: String
    let hook: @Sendable () -> Void

    public init(memory: MemorySource, before path: String, hook: @escaping @Sendable () -> Void) {
        self.memory = memory
        self.path = path
        self.hook = hook
    }

    public var displayName: String { memory.displayName }
    public var features: SourceFeatures { memory.features }

    public func snapshot(options: ListingOptions) async throws -> Snapshot { try await memory.snapshot(options: options) }

    public func makeConnection() throws -> any SourceConnection {
        HookedConnection(inner: try memory.makeConnection(), source: self)
    }
}

private final class HookedConnection: SourceConnection {
    let inner: any SourceConnection
    let source: HookedSource

    init(inner: any SourceConnection, source: HookedSource) {
        self.inner = inner
        self.source = source
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        if entry.path.description == source.path { source.hook() }
        try inner.download(entry, into: sink, from: offset)
    }

    func close() { inner.close() }
}
