import FolioCore

/// One download worker's session: reads files with a large buffer so libssh2 keeps megabytes requested ahead
/// (it reads ahead four times what one read call asks for), and checks at the end that the file is still the
/// listed one.
///
/// Used on the worker's thread only (see `SourceConnection`), which is what libssh2 requires of a session.
final class SFTPConnection: SourceConnection {
    /// The most one read call asks for: libssh2 then keeps 4 MiB in flight, which a 20 ms link needs to carry
    /// 200 MB/s.
    static let bufferSize = 1 << 20
    /// What one read call asks for on a link of under `nearRoundTrip`: 2 MiB in flight already saturate it, and
    /// more only churns libssh2's packet buffers (5% slower over loopback, 12 MB more memory).
    static let nearReadSize = 512 << 10
    /// What one read of a batch's tar stream takes in at most.
    static let batchReadSize = 256 << 10
    static let nearRoundTrip = Duration.milliseconds(2)

    private let session: SSHSession
    private let tarBatch: TarBatch
    /// The read buffer, owned by this connection (one worker thread) and freed in `close`, which the download
    /// stage calls for every connection it made.
    private var buffer: UnsafeMutableRawBufferPointer
    /// Set once the server refused the pipe batches go through, or answered it wrongly: not asked again.
    private var pipeRefused = false
    /// The quickest `openFile` so far: the session's round trip, or near it.
    private var fastestOpen = Duration.seconds(60)

    init(session: SSHSession, tarBatch: TarBatch) {
        self.session = session
        self.tarBatch = tarBatch
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 16)
    }

    /// With tar where the server has it; else, or once tar turned out missing before any file arrived, over SFTP
    /// with many requests in flight (`SFTPBatchFetch`). A stop of the run cuts a transfer its server holds up
    /// (see `SocketInterrupter.transferGrace`).
    func download(batch: DownloadBatch) throws {
        try session.interruptibly(transfer: true, doing: "copying a batch of small files") { try fetch(batch) }
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        try session.interruptibly(transfer: true, doing: "copying \(entry.path)") { try copy(entry, into: sink, from: offset) }
    }

    private func fetch(_ batch: DownloadBatch) throws {
        // A quarter of the buffer: a batch holds small files, and reads of its stream as large as the buffer only
        // made more of it resident in each worker (a first mirror of 100,000 small files peaked 3 MB higher).
        if tarBatch.isAvailable { try tarBatch.fetch(batch, with: session, buffer: UnsafeMutableRawBufferPointer(rebasing: buffer[..<Self.batchReadSize])) }
        guard !tarBatch.isAvailable, !pipeRefused, !batch.hasStarted else { return }
        do {
            try SFTPBatchFetch.fetch(batch, over: try session.pipe(), endpoint: session.endpoint)
        } catch let error as LibSSH2Error {
            session.dropPipe()
            if error.isConnectionLoss { throw session.sourceError(error, doing: "reading", remote: session.endpoint.remotePath(.root)) }
            // The subsystem refused or not SFTP version 3: files go one by one, through libssh2's SFTP.
            pipeRefused = true
        } catch is SFTPPipe.Malformed {
            session.dropPipe()
            pipeRefused = true
        } catch {
            session.dropPipe()
            throw error
        }
    }

    private func copy(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        let remote = session.endpoint.remotePath(entry.path)
        let handle: OpaquePointer
        do {
            try session.startSFTP()
            let opening = ContinuousClock.now
            handle = try session.openFile(remote)
            // Opening a file is one round trip, plus the server's work: the fastest so far sizes the read-ahead
            // to the link.
            fastestOpen = min(fastestOpen, ContinuousClock.now - opening)
            session.endpoint.roundTrips.record(fastestOpen)
        } catch where error.isNoSuchFile {
            // Listed a moment ago: gone since (moved, renamed, deleted), not a path to check, as the line for a
            // source root that does not exist says.
            throw SourceError(.notFound, "\(session.endpoint.url(remote)) disappeared from the server since it was listed; the next run mirrors what is there then",
                              path: entry.path, underlying: error.description)
        } catch {
            throw session.sourceError(error, doing: "opening", remote: remote, path: entry.path)
        }
        let readSize = min(fastestOpen < Self.nearRoundTrip ? Self.nearReadSize : buffer.count, sink.largestPacedRead ?? .max)
        defer { session.closeLater(handle) }
        if offset > 0 { session.seek(handle, to: offset) }
        var remaining = entry.size - offset
        // Why re-check at the end: a file rewritten during the copy must not be installed half old, half new. A
        // file whose rest the first read asks for whole (libssh2 asks for four times a read's size at once) has
        // its fstat go out behind those reads, in the same round trip, rather than one more round trip per
        // file: from an SFTP-only account over 20 ms, 500 small files took 5.3 s with it waited for alone.
        var attributes: RemoteAttributes?
        var first = remaining > 0 && remaining <= Int64(readSize)
        while remaining > 0 {
            try sink.checkCancellation()
            let count: Int
            do {
                let asked = Int(min(Int64(readSize), remaining))
                if first {
                    first = false
                    (count, attributes) = try session.readWithAttributes(handle, into: buffer, count: asked)
                } else {
                    count = try session.read(handle, into: buffer, count: asked)
                }
            } catch {
                throw session.sourceError(error, doing: "reading", remote: remote, path: entry.path)
            }
            if count == 0 { break }
            try sink.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            remaining -= Int64(count)
        }
        if attributes == nil {
            do { attributes = try session.fstat(handle) } catch {
                throw session.sourceError(error, doing: "checking", remote: remote, path: entry.path)
            }
        }
        guard remaining == 0, let attributes, attributes.size == entry.size, attributes.hasTime(entry.mtime.seconds) else {
            throw SourceError(.changed, "\(session.endpoint.url(remote)) changed on the server while it was being copied; it will be fetched again next run",
                              path: entry.path)
        }
    }

    func close() {
        session.close()
        buffer.deallocate()
        buffer = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    }
}
