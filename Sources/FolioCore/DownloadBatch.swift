import Glibc

/// Several small files that one connection fetches in one request (an SFTP server streaming them with `tar`),
/// instead of paying a few round trips per file.
///
/// The connection opens each file's sink as its bytes arrive, ends it when they are all in (the batch then seals
/// and closes the partial file at once), and marks the files that arrived whole and unchanged; the engine
/// installs those and fetches the rest one by one with `download(_:into:from:)`, which reports each file's own
/// error. Owned by one download worker and used on its thread only.
public final class DownloadBatch {
    /// The most bytes one file may have to be fetched in a batch; bigger files gain little from it.
    public static let maxFileSize: Int64 = 256 << 10
    /// The most files, and bytes, one batch holds. Why a thousand files: a batch is one request (over SFTP,
    /// three round trips to start), and a batch holds open only the files still arriving, not the ones done.
    static let maxFiles = 1_024
    static let maxBytes: Int64 = 16 << 20

    /// One file of the batch.
    private enum State {
        case waiting
        /// Bytes are arriving into the open partial file.
        case open(DownloadSink)
        /// All bytes arrived; the partial file is sealed (or refused) and closed.
        case ended(DownloadSink, Result<Installer.Sealed, SourceError>)
    }

    /// The files, in the order the source should send them.
    public let entries: [Entry]
    /// How many workers share the host's requests between their batches (all of them over a near link, where
    /// each takes batches; 1 over a far one): a source that keeps several requests of one batch in flight
    /// takes at most its share.
    public let workers: Int
    private let openPartial: (Int) throws -> Int32
    /// Seals a file whose bytes all arrived: gives it its time, checks its size, closes it.
    private let seal: (Int, DownloadSink) -> Result<Installer.Sealed, SourceError>
    /// Removes the partial file of a file sealed but not installed after all.
    private let discard: (Int) -> Void
    private let progress: TransferProgress
    private var states: [State]
    private var completed: [Bool]

    init(entries: [Entry], workers: Int = 1, progress: TransferProgress, openPartial: @escaping (Int) throws -> Int32,
         seal: @escaping (Int, DownloadSink) -> Result<Installer.Sealed, SourceError>, discard: @escaping (Int) -> Void) {
        self.entries = entries
        self.workers = max(1, workers)
        self.progress = progress
        self.openPartial = openPartial
        self.seal = seal
        self.discard = discard
        states = Array(repeating: .waiting, count: entries.count)
        completed = Array(repeating: false, count: entries.count)
    }

    /// The sink for `entries[index]`: an empty partial file, opened on first use (a batch never resumes).
    public func sink(for index: Int) throws -> DownloadSink {
        switch states[index] {
        case .open(let sink):
            return sink
        case .ended:
            throw SourceError(.protocolViolation, "\(entries[index].path) arrived twice in one batch", path: entries[index].path)
        case .waiting:
            // A batch's files are small (at most `maxFileSize`): through the page cache, flushed together.
            let sink = DownloadSink(fileDescriptor: try openPartial(index), offset: 0, expectedSize: entries[index].size, directIO: false,
                                    path: entries[index].path, progress: progress)
            states[index] = .open(sink)
            progress.started(entries[index].path)
            return sink
        }
    }

    /// Whether any file of the batch has begun to arrive: a source that gives up on one way of fetching the batch
    /// may try another only while none has.
    public var hasStarted: Bool {
        states.contains { state in
            if case .waiting = state { false } else { true }
        }
    }

    /// Whether the run is being stopped: a source checks it between files.
    public var isCancelled: Bool { progress.isCancelled }

    /// Records that all of `entries[index]`'s bytes are in its sink: the partial file is sealed and closed now,
    /// so a batch never holds more files open than are arriving. It is installed only once marked complete.
    public func fileEnded(_ index: Int) {
        guard case .open(let sink) = states[index] else { return }
        states[index] = .ended(sink, seal(index, sink))
    }

    /// Records that `entries[index]` is whole and is the version that was listed (ending it if still open).
    public func markComplete(_ index: Int) {
        fileEnded(index)
        completed[index] = true
    }

    /// A complete entry's sealed partial file (or why it could not be sealed), handed over to the caller; nil
    /// when the entry is not complete.
    func takeComplete(_ index: Int) -> Result<Installer.Sealed, SourceError>? {
        guard completed[index], case .ended(_, let result) = states[index] else { return nil }
        states[index] = .waiting
        progress.ended(entries[index].path)
        return result
    }

    /// Removes every partial file not taken, and takes back their bytes from the progress count, since they will
    /// be fetched again one by one.
    func discardRest() {
        for (index, state) in states.enumerated() {
            switch state {
            case .waiting:
                continue
            case .open(let sink):
                close(sink.fileDescriptor)
                discard(index)
                progress.add(bytes: -sink.bytesTransferred)
            case .ended(let sink, _):
                discard(index)
                progress.add(bytes: -sink.bytesTransferred)
            }
            progress.ended(entries[index].path)
            states[index] = .waiting
        }
    }
}
