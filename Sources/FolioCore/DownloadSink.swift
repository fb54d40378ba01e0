import CFolioSys
import Glibc

/// The partial file a download writes into, with the run's progress counters and cancellation flag.
///
/// Owned by one download worker; a source's connection writes through it from that worker's thread only.
public final class DownloadSink {
    /// The open partial file, positioned at `offset`, for sources that copy kernel-side (`copy_file_range`) and
    /// report it with `didWrite`. A source that calls `write` never goes back to writing here itself: what
    /// `write` stages is not in the file yet.
    public let fileDescriptor: Int32
    /// Bytes received so far, including the resumed prefix (the last of them may still be staged: see `finish`).
    public private(set) var offset: Int64
    /// The bytes received by this download (not the resumed prefix).
    public private(set) var bytesTransferred: Int64 = 0
    private let progress: TransferProgress
    private let path: RelativePath
    /// Where the bytes not yet handed to writeback start.
    private var writebackFrom: Int64
    /// Why: the run makes files durable with one `syncfs` per batch (see `Installer`). Handing the data to the
    /// disk as it arrives lets the disk write while the network delivers, so that flush finds little left to
    /// wait for, instead of a large file's whole size.
    static let writebackStep: Int64 = 1 << 20

    /// Bytes received but not yet written, while the file is written with direct I/O (nil: written through the
    /// page cache). Aligned to `directAlignment`; its first byte goes at the file offset `offset - staged`.
    private var staging: UnsafeMutableRawBufferPointer?
    private var staged = 0
    /// Why direct I/O for large files: every file is flushed to disk before the run ends (see `Installer`), so the
    /// page cache only adds work on the way: a copy of every byte into it, fresh pages to allocate and zero, and
    /// writeback later. Direct I/O writes each staged MiB from this buffer to the disk, and leaves the page cache
    /// to what the machine was caching (a mirrored media library would otherwise push it out). Small files stay
    /// buffered: their writes are small and one flush writes a whole batch of them.
    static let directThreshold: Int64 = 2 << 20
    static let directChunk = 1 << 20
    /// Direct I/O needs the buffer, the file offset and the length aligned to the disk's logical block: 4 KiB
    /// covers 512-byte and 4 KiB sectors.
    static let directAlignment = 4096

    /// The size the source listed, where the file system takes direct I/O (`Destination.takesDirectIO`), until
    /// the first `write` decides on it.
    private var directIOCandidate: Int64?
    private let writeCall: (Int32, UnsafeRawPointer, Int) -> Int

    /// The partial file's last bytes before a resume, which the source's first bytes must repeat (see
    /// `DownloadStage.overlap(of:before:)`); empty once they did, or when the download starts at 0.
    private var overlap: [UInt8]
    private var overlapChecked = 0
    /// Set when the source's bytes differed from `overlap`: the partial file holds another version's bytes.
    public private(set) var metOtherVersion = false

    /// - Parameters:
    ///   - expectedSize: the size the source listed.
    ///   - directIO: whether a file large enough is written with direct I/O.
    ///   - writeCall: `write(2)`; tests pass one that writes short or fails, to drive the error paths.
    ///   - overlap: the bytes just before `offset` in the file, which the source sends first (it is asked from
    ///     `offset - overlap.count`) and which are compared, not written.
    init(fileDescriptor: Int32, offset: Int64, expectedSize: Int64, directIO: Bool, path: RelativePath, progress: TransferProgress,
         overlap: [UInt8] = [], writeCall: @escaping (Int32, UnsafeRawPointer, Int) -> Int = { Glibc.write($0, $1, $2) }) {
        self.writeCall = writeCall
        self.fileDescriptor = fileDescriptor
        self.offset = offset - Int64(overlap.count)
        self.overlap = overlap
        directIOCandidate = directIO ? expectedSize : nil
        self.path = path
        self.progress = progress
        self.writebackFrom = offset
    }

    /// How many of the source's next bytes are still to be compared with the partial file's (`overlap`): they
    /// must come through `write`, not be copied kernel-side into `fileDescriptor`, and a source that copies
    /// kernel-side writes exactly these, so that no byte is staged for direct I/O when it goes on.
    public var bytesToCompare: Int { overlap.count - overlapChecked }
    var isComparing: Bool { bytesToCompare > 0 }

    deinit { staging?.deallocate() }

    /// Appends bytes to the partial file (after comparing the overlap of a resume).
    public func write(_ buffer: UnsafeRawBufferPointer) throws {
        try checkCancellation()
        var buffer = buffer
        if isComparing, !buffer.isEmpty {
            let count = min(buffer.count, overlap.count - overlapChecked)
            let same = overlap.withUnsafeBytes { memcmp($0.baseAddress! + overlapChecked, buffer.baseAddress!, count) == 0 }
            guard same else {
                metOtherVersion = true
                throw SourceError(.changed, "\(path) is not the version its partial file began with", path: path)
            }
            overlapChecked += count
            offset += Int64(count)
            if overlapChecked == overlap.count { (overlap, overlapChecked) = ([], 0) }
            buffer = UnsafeRawBufferPointer(rebasing: buffer[count...])
            if buffer.isEmpty { return }
        }
        if let expectedSize = directIOCandidate {
            directIOCandidate = nil
            startDirectIO(expectedSize: expectedSize)
        }
        guard let staging else {
            let (_, code) = writeAll(buffer)
            if code != 0 { throw writeError(code) }
            didWrite(byteCount: buffer.count)
            return
        }
        var done = 0
        while done < buffer.count {
            let count = min(buffer.count - done, staging.count - staged)
            (staging.baseAddress! + staged).copyMemory(from: buffer.baseAddress! + done, byteCount: count)
            staged += count
            done += count
            // Counted as staged, so that `offset` holds every byte a `finish` will write, even after a throw.
            account(byteCount: count)
            if staged == staging.count { try writeStaged() }
        }
    }

    /// Turns direct I/O on for a large file. Why at the first `write`, not on opening: copies made kernel-side
    /// (`copy_file_range`) keep the page cache. A resumed file continues at any offset; direct I/O starts only at
    /// an aligned one, and only once the prefix is on the disk. Why flush it first: a direct write past the end
    /// sets the file's size on the disk, and if the prefix's last pages were still unwritten (delayed
    /// allocation), a power cut would leave zeros below that size, which the next run would resume after.
    private func startDirectIO(expectedSize: Int64) {
        guard expectedSize - offset >= Self.directThreshold, offset % Int64(Self.directAlignment) == 0,
              offset == 0 || fdatasync(fileDescriptor) == 0, folio_set_direct_io(fileDescriptor, 1) == 0 else { return }
        staging = .allocate(byteCount: Self.directChunk, alignment: Self.directAlignment)
    }

    /// Writes the bytes still staged, through the page cache (the file's tail need not be aligned); a sink must
    /// be finished before its file is sealed. Later writes go through the page cache too.
    public func finish() throws(SourceError) {
        guard staging != nil else { return }
        _ = folio_set_direct_io(fileDescriptor, 0)
        try writeStaged()
        staging?.deallocate()
        staging = nil
    }

    /// Writes the staged bytes; a file system that turns down a direct write (EINVAL) gets them, and every later
    /// write, through the page cache.
    private func writeStaged() throws(SourceError) {
        guard let staging, staged > 0 else { return }
        var (written, code) = writeAll(UnsafeRawBufferPointer(rebasing: staging[0..<staged]))
        if code == EINVAL, folio_is_direct_io(fileDescriptor) == 1, folio_set_direct_io(fileDescriptor, 0) == 0 {
            let rest = writeAll(UnsafeRawBufferPointer(rebasing: staging[written..<staged]))
            written += rest.written
            code = rest.error
        }
        // Why only the bytes not written stay: a failed download is finished too (to keep what arrived for the
        // next run), and bytes written twice would corrupt the partial file it resumes from.
        if written > 0, written < staged { staging.baseAddress!.copyMemory(from: staging.baseAddress! + written, byteCount: staged - written) }
        staged -= written
        if code != 0 { throw writeError(code) }
    }

    /// Writes `buffer` at the file's position: how many bytes went, and the errno that stopped it (0 when none).
    private func writeAll(_ buffer: UnsafeRawBufferPointer) -> (written: Int, error: Int32) {
        var done = 0
        while done < buffer.count {
            let result = writeCall(fileDescriptor, buffer.baseAddress! + done, buffer.count - done)
            if result < 0 {
                if errno == EINTR { continue }
                return (done, errno)
            }
            done += result
        }
        return (done, 0)
    }

    private func writeError(_ code: Int32) -> SourceError {
        Destination.error(code, "cannot write the partial file for \(path)", path: path)
    }

    /// Accounts for bytes a source wrote to `fileDescriptor` itself (with `copy_file_range`, say).
    public func didWrite(byteCount: Int) {
        precondition(staged == 0, "bytes written to the partial file of \(path) in front of bytes still staged")
        precondition(!isComparing, "bytes copied into the partial file of \(path) before its overlap was compared")
        account(byteCount: byteCount)
        if offset - writebackFrom >= Self.writebackStep {
            // Advice only: a failure here changes nothing, the flush before the rename still waits for the data.
            _ = folio_start_writeback(fileDescriptor, off_t(writebackFrom), off_t(offset - writebackFrom))
            writebackFrom = offset
        }
    }

    private func account(byteCount: Int) {
        offset += Int64(byteCount)
        bytesTransferred += Int64(byteCount)
        progress.add(bytes: Int64(byteCount))
        let wait = progress.pace(byteCount)
        if wait > .zero { pause(wait) }
    }

    /// Waits out a bandwidth limit's `wait` on this worker's thread (a sink is never used on the cooperative
    /// pool), in steps of at most 0.1 s so that a stop is not held up by it.
    private func pause(_ wait: Duration) {
        let end = ContinuousClock.now + wait
        while !progress.isCancelled {
            let left = end - ContinuousClock.now
            guard left > .zero else { return }
            let step = min(left, .milliseconds(100))
            usleep(useconds_t(step.components.seconds * 1_000_000 + step.components.attoseconds / 1_000_000_000_000))
        }
    }

    /// The most a source should read at once under the run's bandwidth limit; nil without one.
    public var largestPacedRead: Int? { progress.largestPacedRead }

    /// Whether the file's writes go past the page cache now (direct I/O).
    var writesDirectly: Bool { folio_is_direct_io(fileDescriptor) == 1 }

    /// Throws `.cancelled` once the run is being stopped; sources call it between chunks.
    public func checkCancellation() throws {
        if progress.isCancelled {
            throw SourceError(.cancelled, "cancelled while copying \(path)", path: path)
        }
    }

    /// Whether the run is being stopped, for sources that poll rather than throw.
    public var isCancelled: Bool { progress.isCancelled }
}

extension DownloadSink {
    /// A sink with its own counters, for source tests that call a connection directly.
    public static func forTesting(fileDescriptor: Int32, offset: Int64, expectedSize: Int64 = 0, directIO: Bool = false, path: RelativePath,
                                  progress: TransferProgress = TransferProgress()) -> DownloadSink {
        DownloadSink(fileDescriptor: fileDescriptor, offset: offset, expectedSize: expectedSize, directIO: directIO, path: path, progress: progress)
    }
}
