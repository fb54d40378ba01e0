import FolioCore
import Synchronization

/// Fetches many small files in one request: `tar` over an exec channel, fed the file names on stdin, streamed
/// straight into the partial files. One request instead of three round trips per file (open, read, close).
///
/// A file counts as fetched only when its header names it, it is a regular file with the listed size and mtime,
/// its bytes all arrived, and tar exited 0 (GNU tar exits non-zero when a file changed while it read it, or
/// shrank, or could not be read). Anything else is fetched again over SFTP, which reports that file's own error.
/// Servers without exec or GNU tar (an SFTP-only account) are found out on the first batch and never asked again.
final class TarBatch: Sendable {
    /// The most bytes of names one request carries: far below the 2 MiB of stdin sshd accepts before tar reads
    /// any, so writing them can never wait on tar while tar waits on us.
    static let maxNameBytes = 512 << 10

    private let rootPath: String
    // Why an atomic: every download worker's connection reads it, and the first to find tar missing clears it.
    private let available = Atomic<Bool>(true)

    init(rootPath: String) { self.rootPath = rootPath }

    var isAvailable: Bool { available.load(ordering: .relaxed) }

    /// Never asks for tar again: the server runs no commands (found out by the listing) or has no tar.
    func markMissing() { available.store(false, ordering: .relaxed) }

    /// tar of exactly the names given on stdin, NUL-separated, taken verbatim (a name starting with `-` stays a
    /// name), relative to the current folder, not recursing, hard links archived as contents, symlinks as links
    /// (which the caller refuses: a batch never follows a link).
    static let tarCommand = "LC_ALL=C exec tar --format=gnu --hard-dereference --no-recursion --null --verbatim-files-from -cf - -T -"

    /// The shell command: into the root, then `tarCommand`.
    var command: String {
        "cd \(SFTPEndpoint.shellQuoted(rootPath)) && \(Self.tarCommand)"
    }

    /// Streams `batch`'s files and marks the ones that arrived whole and as listed. Throws when the connection
    /// failed; returns quietly when tar did not cooperate (its files are then fetched one by one).
    func fetch(_ batch: DownloadBatch, with session: SSHSession, buffer: UnsafeMutableRawBufferPointer) throws {
        guard isAvailable else { return }
        var names: [UInt8] = []
        for entry in batch.entries {
            entry.path.withBytes { names.append(contentsOf: $0) }
            names.append(0)
        }
        guard names.count <= Self.maxNameBytes else { return }
        var reader = TarReader()
        var next = 0
        var current: (index: Int, sink: DownloadSink)?
        var arrived: [Int] = []
        let status: Int32?
        do {
            // The tar the listing left waiting, in the root, saves the two round trips of starting one.
            let tar = try session.takeWaiting() ?? session.start(command)
            status = try tar.run(input: names, buffer: buffer) { chunk in
                try reader.feed(chunk) { event in
                    switch event {
                    case let .member(member):
                        // tar keeps the order of its input; a name it skipped (gone, unreadable) is just absent.
                        guard let position = batch.entries[next...].firstIndex(where: { entry in entry.path.withBytes { $0.elementsEqual(member.name) } }) else {
                            throw TarReader.Malformed()
                        }
                        next = position + 1
                        let entry = batch.entries[position]
                        let asListed = member.isRegularFile && member.size == entry.size && member.mtime == entry.mtime.seconds
                        current = asListed ? (position, try batch.sink(for: position)) : nil
                    case let .data(bytes):
                        try current?.sink.write(bytes)
                    case .memberEnd:
                        if let current {
                            arrived.append(current.index)
                            batch.fileEnded(current.index)
                        }
                        current = nil
                    }
                }
            }
        } catch let error as LibSSH2Error {
            if error.isConnectionLoss { throw session.sourceError(error, doing: "reading", remote: Array(rootPath.utf8)) }
            // exec refused: this server allows SFTP only.
            markMissing()
            return
        } catch is TarReader.Malformed {
            if !reader.sawValidBlock { markMissing() }
            return
        }
        guard reader.isFinished else {
            // No tar stream at all (tar missing: exit 127 and no output) means no tar; a cut stream is a failure.
            if !reader.sawValidBlock { markMissing() }
            return
        }
        guard status == 0 else { return }
        for index in arrived { batch.markComplete(index) }
    }
}
