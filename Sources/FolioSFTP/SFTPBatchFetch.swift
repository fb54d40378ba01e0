import FolioCore

/// Fetches a batch of small files over SFTP itself, for a server that runs no `tar` (an SFTP-only account): one
/// round trip a file rather than two, as each flight (`LibSSH2.flight`) carries the next file's open with the
/// current file's reads and check, and the close of the file before.
///
/// A file counts as fetched only when all its listed bytes arrived and its fstat, which the server answers after
/// those reads, shows the listed size and time; anything else (a file gone, unreadable, changed) is fetched again
/// one by one, which reports that file's own error. Used on the download worker's thread only.
enum SFTPBatchFetch {
    /// Streams `batch`'s files and marks the ones that arrived whole and as listed. Throws when the connection
    /// was lost; returns early, marking no more, when the run is being stopped.
    static func fetch(_ batch: DownloadBatch, with session: SSHSession, buffer: UnsafeMutableRawBufferPointer) throws {
        let entries = batch.entries
        var current: (index: Int, handle: OpaquePointer)?
        var previous: OpaquePointer?
        // Whatever way this ends, no handle is left behind: the last goes out with the session's next request.
        defer {
            if let previous { session.closeFileLater(previous) }
            if let current { session.closeFileLater(current.handle) }
        }
        var next = 0
        while (current != nil || next < entries.count) && !batch.isCancelled {
            let opening = next < entries.count ? session.endpoint.remotePath(entries[next].path) : nil
            // At least one byte asked for, so that an empty file's read finds its end in the same flight.
            let asked = current.map { Int(max(1, entries[$0.index].size)) } ?? 0
            let flight: LibSSH2.Flight
            do {
                flight = try session.flight(opening: opening, reading: current?.handle, count: asked, into: buffer, closing: previous)
            } catch {
                throw session.sourceError(error, doing: "reading", remote: opening ?? [])
            }
            previous = nil
            if let reading = current {
                current = nil
                previous = reading.handle
                try finish(reading.index, of: batch, handle: reading.handle, flight: flight, session: session, buffer: buffer)
            }
            if let opened = flight.opened {
                switch opened {
                case .success(let handle): current = (next, handle)
                case .failure(let error) where error.isConnectionLoss: throw session.sourceError(error, doing: "opening", remote: opening ?? [])
                case .failure: break  // fetched again alone, which says why
                }
                next += 1
            }
        }
    }

    /// Takes the first read's bytes from `flight`, reads the rest (already asked for), checks the file against
    /// its listing and marks it complete when it is as listed.
    private static func finish(_ index: Int, of batch: DownloadBatch, handle: OpaquePointer, flight: LibSSH2.Flight, session: SSHSession,
                               buffer: UnsafeMutableRawBufferPointer) throws {
        let entry = batch.entries[index]
        let remote = session.endpoint.remotePath(entry.path)
        guard case .success(var count)? = flight.read else {
            if case .failure(let error)? = flight.read, error.isConnectionLoss { throw session.sourceError(error, doing: "reading", remote: remote) }
            return
        }
        let sink = try batch.sink(for: index)
        var remaining = entry.size
        while count > 0 {
            guard Int64(count) <= remaining else { return }  // longer than listed: changed
            try sink.write(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            remaining -= Int64(count)
            guard remaining > 0 else { break }
            do { count = try session.read(handle, into: buffer, count: Int(remaining)) } catch {
                if error.isConnectionLoss { throw session.sourceError(error, doing: "reading", remote: remote) }
                return
            }
        }
        guard remaining == 0 else { return }
        // Sealed and closed now, so that a batch holds open only the file arriving.
        batch.fileEnded(index)
        let attributes: RemoteAttributes
        if let answered = flight.attributes {
            attributes = answered
        } else {
            do { attributes = try session.fstat(handle) } catch {
                if error.isConnectionLoss { throw session.sourceError(error, doing: "checking", remote: remote) }
                return
            }
        }
        guard attributes.size == entry.size, attributes.hasTime(entry.mtime.seconds) else { return }
        batch.markComplete(index)
    }
}
