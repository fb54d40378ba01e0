import Glibc

/// Writing to a descriptor with write(2) directly: no `Data` or `FileHandle` per call.
enum FileDescriptorOutput {
    /// Writes everything, retrying on EINTR; any other error (EPIPE: the reader went away) drops the rest.
    static func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: Int32) {
        var offset = 0
        while offset < bytes.count {
            let written = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                return
            }
            offset += written
        }
    }

    /// Writes `text` to standard error. Why not `FileHandle.standardError.write`: Folio ignores SIGPIPE, and
    /// Foundation's write traps on EPIPE (SIGILL) where this drops the text, as the closed reader asks.
    static func writeToStandardError(_ text: String) {
        var text = text
        text.withUTF8 { writeAll(UnsafeRawBufferPointer($0), to: STDERR_FILENO) }
    }
}
