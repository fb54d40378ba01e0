import Glibc

/// Several small files that one connection fetches in one request (an SFTP server streaming them with `tar`),
/// instead of paying a few round trips per file.
///
/// The connection opens each file's sink as its bytes arrive and marks the files that arrived whole and
/// unchanged; the engine installs those and fetches the rest one by one with `download(_:into:from:)`, which
/// reports each file's own error. Owned by one download worker and used on its thread only.
public final class DownloadBatch {
    /// The most bytes one file may have to be fetched in a batch; bigger files gain little from it.
    public static let maxFileSize: Int64 = 256 << 10
    /// The most files, and bytes, one batch holds.
    static let maxFiles = 256
    static let maxBytes: Int64 = 16 << 20

    /// The files, in the order the source should send them.
    public let entries: [Entry]
    private let openPartial: (Int) throws -> Int32
    private let progress: TransferProgress
    private var sinks: [DownloadSink?]
    private var completed: [Bool]

    init(entries: [Entry], progress: TransferProgress, openPartial: @escaping (Int) throws -> Int32) {
        self.entries = entries
        self.progress = progress
        self.openPartial = openPartial
        sinks = Array(repeating: nil, count: entries.count)
        completed = Array(repeating: false, count: entries.count)
    }

    /// The sink for `entries[index]`: an empty partial file, opened on first use (a batch never resumes).
    public func sink(for index: Int) throws -> DownloadSink {
        if let sink = sinks[index] { return sink }
        let sink = DownloadSink(fileDescriptor: try openPartial(index), offset: 0, path: entries[index].path, progress: progress)
        sinks[index] = sink
        progress.started(entries[index].path)
        return sink
    }

    /// Whether the run is being stopped: a source checks it between files.
    public var isCancelled: Bool { progress.isCancelled }

    /// Records that `entries[index]` is whole in its sink and is the version that was listed.
    public func markComplete(_ index: Int) { completed[index] = true }

    /// The open partial file of a complete entry, handed over to the caller (which seals and closes it).
    func takeComplete(_ index: Int) -> DownloadSink? {
        guard completed[index], let sink = sinks[index] else { return nil }
        sinks[index] = nil
        progress.ended(entries[index].path)
        return sink
    }

    /// Empties and closes every partial file not taken, and takes back their bytes from the progress count,
    /// since they will be fetched again one by one.
    func discardRest() {
        for (index, sink) in sinks.enumerated() {
            guard let sink else { continue }
            ftruncate(sink.fileDescriptor, 0)
            close(sink.fileDescriptor)
            progress.add(bytes: -sink.bytesTransferred)
            progress.ended(entries[index].path)
            sinks[index] = nil
        }
    }
}
