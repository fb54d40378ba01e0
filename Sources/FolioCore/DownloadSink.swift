import CFolioSys
import Glibc

/// The partial file a download writes into, with the run's progress counters and cancellation flag.
///
/// Owned by one download worker; a source's connection writes through it from that worker's thread only.
public final class DownloadSink {
    /// The open partial file, positioned at `offset`, for sources that copy kernel-side (`copy_file_range`).
    public let fileDescriptor: Int32
    /// Bytes in the file so far, including the resumed prefix.
    public private(set) var offset: Int64
    /// The bytes written by this download (not the resumed prefix).
    public private(set) var bytesTransferred: Int64 = 0
    private let progress: TransferProgress
    private let path: RelativePath
    /// Where the bytes not yet handed to writeback start.
    private var writebackFrom: Int64
    /// Why: the run makes files durable with one `syncfs` per batch (see `Installer`). Handing the data to the
    /// disk as it arrives lets the disk write while the network delivers, so that flush finds little left to
    /// wait for, instead of a large file's whole size.
    static let writebackStep: Int64 = 1 << 20

    init(fileDescriptor: Int32, offset: Int64, path: RelativePath, progress: TransferProgress) {
        self.fileDescriptor = fileDescriptor
        self.offset = offset
        self.path = path
        self.progress = progress
        self.writebackFrom = offset
    }

    /// Appends bytes to the partial file.
    public func write(_ buffer: UnsafeRawBufferPointer) throws {
        try checkCancellation()
        var done = 0
        while done < buffer.count {
            let result = Glibc.write(fileDescriptor, buffer.baseAddress! + done, buffer.count - done)
            if result < 0 {
                if errno == EINTR { continue }
                throw SourceError(.localIO, "cannot write the partial file for \(path): \(String(cString: strerror(errno)))",
                                  path: path, underlying: "errno \(errno)")
            }
            done += result
        }
        didWrite(byteCount: done)
    }

    /// Accounts for bytes a source wrote to `fileDescriptor` itself (with `copy_file_range`, say).
    public func didWrite(byteCount: Int) {
        offset += Int64(byteCount)
        bytesTransferred += Int64(byteCount)
        progress.add(bytes: Int64(byteCount))
        if offset - writebackFrom >= Self.writebackStep {
            // Advice only: a failure here changes nothing, the flush before the rename still waits for the data.
            _ = folio_start_writeback(fileDescriptor, off_t(writebackFrom), off_t(offset - writebackFrom))
            writebackFrom = offset
        }
    }

    /// Throws `.cancelled` once the run is being stopped; sources call it between chunks.
    public func checkCancellation() throws {
        if progress.isCancelled {
            throw SourceError(.cancelled, "cancelled while copying \(path)", path: path, isRetryable: true)
        }
    }

    /// Whether the run is being stopped, for sources that poll rather than throw.
    public var isCancelled: Bool { progress.isCancelled }
}

extension DownloadSink {
    /// A sink with its own counters, for source tests that call a connection directly.
    public static func forTesting(fileDescriptor: Int32, offset: Int64, path: RelativePath, progress: TransferProgress = TransferProgress()) -> DownloadSink {
        DownloadSink(fileDescriptor: fileDescriptor, offset: offset, path: path, progress: progress)
    }
}
