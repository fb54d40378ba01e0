/// A command (or a subsystem) running on its own channel of an SSH session: the caller writes its stdin, ends it, and reads its
/// stdout as it arrives. stderr is discarded, so a chatty command cannot stall the channel.
///
/// Not Sendable: like its session, it is used on one thread at a time, and never after the session closed (the
/// session frees a channel it holds before it frees itself).
final class ExecChannel {
    private let session: OpaquePointer
    private let channel: OpaquePointer

    /// Opens a channel on `session` (connected by `socket`) and starts `command` on it (two round trips).
    init(session: OpaquePointer, socket: Int32, command: String) throws(LibSSH2Error) {
        self.session = session
        channel = try LibSSH2.startExec(session, socket: socket, command: command)
    }

    /// Opens a channel on `session` (connected by `socket`) and starts the subsystem `subsystem` on it (two round
    /// trips).
    init(session: OpaquePointer, socket: Int32, subsystem: String) throws(LibSSH2Error) {
        self.session = session
        channel = try LibSSH2.startSubsystem(session, socket: socket, name: subsystem)
    }

    func write(_ bytes: [UInt8]) throws(LibSSH2Error) { try LibSSH2.write(channel, session, bytes) }

    /// Sends EOF: the command reads no more input.
    func endInput() throws(LibSSH2Error) { try LibSSH2.sendEOF(channel, session) }

    /// Reads some of the command's output, waiting for it to arrive; 0 once the command's output ended.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(LibSSH2Error) -> Int {
        try LibSSH2.read(channel, session, into: buffer)
    }

    /// Writes `input`, ends it, and hands the output to `body` chunk by chunk as it arrives; returns the exit
    /// status (nil: unknown, see `close`). When `body` throws, the channel is closed and the error rethrown.
    func run(input: [UInt8], buffer: UnsafeMutableRawBufferPointer, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int32? {
        try write(input)
        try endInput()
        while true {
            let count = try read(into: buffer)
            if count == 0 { break }
            do {
                try body(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            } catch {
                close()
                throw error
            }
        }
        return close()
    }

    /// Closes the channel (waiting for the server's side to close) and returns the command's exit status; nil
    /// when the connection failed before it arrived, or a signal ended the command.
    @discardableResult
    func close() -> Int32? { LibSSH2.close(channel: channel) }

    deinit { LibSSH2.free(channel: channel) }
}
