import FolioCore

/// One download worker's session: reads files with a large buffer so libssh2 keeps at least 2 MiB requested
/// ahead (it reads ahead four times the buffer), and checks at the end that the file is still the listed one.
///
/// Used on the worker's thread only (see `SourceConnection`), which is what libssh2 requires of a session.
final class SFTPConnection: SourceConnection {
    /// 512 KiB per read call: libssh2 then keeps 2 MiB in flight.
    static let bufferSize = 512 << 10

    private let session: SSHSession
    private let tarBatch: TarBatch
    private var buffer: UnsafeMutableRawBufferPointer

    init(session: SSHSession, tarBatch: TarBatch) {
        self.session = session
        self.tarBatch = tarBatch
        buffer = .allocate(byteCount: Self.bufferSize, alignment: 16)
    }

    func download(batch: DownloadBatch) throws {
        try tarBatch.fetch(batch, with: session, buffer: buffer)
    }

    func download(_ entry: Entry, into sink: DownloadSink, from offset: Int64) throws {
        let remote = session.endpoint.remotePath(entry.path)
        do {
            try session.keepalive()
        } catch {
            throw session.sourceError(error, doing: "reading", remote: remote, path: entry.path)
        }
        let handle: OpaquePointer
        do { handle = try session.openFile(remote) } catch {
            throw session.sourceError(error, doing: "opening", remote: remote, path: entry.path)
        }
        defer { session.closeFile(handle) }
        if offset > 0 { session.seek(handle, to: offset) }
        var remaining = entry.size - offset
        while remaining > 0 {
            try sink.checkCancellation()
            let count: Int
            do { count = try session.read(handle, into: buffer, count: Int(min(Int64(buffer.count), remaining))) } catch {
                throw session.sourceError(error, doing: "reading", remote: remote, path: entry.path)
            }
            if count == 0 { break }
            try sink.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            remaining -= Int64(count)
        }
        // Why re-check at the end: a file rewritten during the copy must not be installed half old, half new.
        let attributes: RemoteAttributes
        do { attributes = try session.fstat(handle) } catch {
            throw session.sourceError(error, doing: "checking", remote: remote, path: entry.path)
        }
        guard remaining == 0, attributes.size == entry.size, attributes.mtime == entry.mtime.seconds else {
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
