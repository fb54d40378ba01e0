/// SFTP version 3 spoken by Folio itself over a channel of its own (the `sftp` subsystem), so that any number of
/// requests can be in flight at once, matched to their answers by id.
///
/// Why not libssh2's SFTP calls: libssh2 1.10 keeps one request under way per kind of call and per channel, and
/// one unfinished write, so at most two requests can safely ride together (see `LibSSH2.readWithAttributes`).
/// A batch of small files then costs two round trips a file. Here a round trip carries 128 files' opens with the
/// reads, checks and closes of the 128 before (`SFTPBatchFetch`). Only the framing is Folio's: the bytes go
/// through libssh2's channel, encrypted and flow-controlled as any channel's.
///
/// Not Sendable: like its session, it is used on one thread at a time, and never after the session closed.
final class SFTPPipe {
    /// Message types of SFTP version 3 (draft-ietf-secsh-filexfer-02).
    enum Message: UInt8 {
        case initialize = 1, version = 2, open = 3, close = 4, read = 5, fstat = 8, openFolder = 11, readFolder = 12
        case realpath = 16, stat = 17
        case status = 101, handle = 102, data = 103, name = 104, attributes = 105
    }

    /// One answer: its type, the id of the request it answers, and what follows the id.
    struct Answer {
        var type: UInt8
        var id: UInt32
        var body: ArraySlice<UInt8>
    }

    /// What the server sent that does not follow the protocol (a packet too large, a field cut short).
    struct Malformed: Error {}

    /// The largest answer taken: OpenSSH's largest packet (a read of `SFTPBatchFetch.chunkSize` is far below).
    static let largestPacket = 256 << 10

    private let channel: ExecChannel
    private var received: [UInt8] = []
    private var start = 0
    private var nextID: UInt32 = 1
    /// Requests whose answers nobody waits for (closes): `receive` reads past them.
    private var forgotten: Set<UInt32> = []
    /// Whether the channel's output has ended.
    private var ended = false
    /// Where channel reads land before they join `received`.
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256 << 10, alignment: 16)

    /// Opens a channel, starts the `sftp` subsystem on it and agrees on version 3: three round trips. A subsystem
    /// that ends before it answers (its program missing, a `ForceCommand` that is not an SFTP server) is
    /// LIBSSH2_ERROR_CHANNEL_CLOSED, with its exit status in the message; one that sends text first (a shell
    /// start-up file that prints) is `isTextBeforeSFTP`, with the text.
    init(session: OpaquePointer, socket: Int32) throws(LibSSH2Error) {
        do {
            channel = try ExecChannel(session: session, socket: socket, subsystem: "sftp")
        } catch {
            buffer.deallocate()
            throw error
        }
        var hello = Request()
        hello.begin(.initialize)
        hello.uint32(3)
        hello.end()
        try send(hello)
        let answer: Answer
        do {
            answer = try receive()
        } catch let error as LibSSH2Error {
            throw error
        } catch {
            if ended && received.isEmpty { throw Self.subsystemEnded(exitStatus: channel.close()) }
            if let text = Self.leadingText(received) {
                // nologin's line: the account has no shell, through which sshd runs an external sftp-server.
                let cause = text.contains("account is currently not available")
                    ? "the account's shell is nologin, through which sshd starts an external sftp-server; set \"Subsystem sftp internal-sftp\" in the server's sshd_config (it needs no shell), or give the account a shell"
                    : "a shell start-up file of the account (such as ~/.bashrc) prints it; make it print nothing when the session is not interactive (ssh HOST true must print nothing)"
                throw LibSSH2Error(code: -31, message: "the server's SFTP subsystem sent text before SFTP (\"\(text)\"): \(cause)", sftpStatus: nil, isTextBeforeSFTP: true)
            }
            throw LibSSH2Error(code: -31, message: "the server's SFTP subsystem did not answer as version 3")
        }
        guard answer.type == Message.version.rawValue else {
            throw LibSSH2Error(code: -31, message: "the server's SFTP subsystem did not answer as version 3")
        }
    }

    /// What a subsystem that ended before its first answer gets: what ended it, and where to fix it.
    private static func subsystemEnded(exitStatus: Int32?) -> LibSSH2Error {
        let why = switch exitStatus {
        case 127?: ": its program was not found (exit status 127)"
        case let status?: " (exit status \(status))"
        case nil: " (a signal ended it, or its exit status is not known)"
        }
        return LibSSH2Error(code: -26, message: "the server's SFTP subsystem ended before it answered\(why); fix the \"Subsystem sftp\" line (or a ForceCommand) in the server's sshd_config: \"Subsystem sftp internal-sftp\" needs no program")
    }

    /// The first line of `bytes` when they start as text (at least 4 printable ASCII characters, where an SFTP
    /// answer starts with its length's zero bytes), cut to 60 characters; nil otherwise.
    private static func leadingText(_ bytes: [UInt8]) -> String? {
        let line = bytes.prefix { $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: "\r") }.prefix(60)
        guard line.count >= 4, line.allSatisfy({ (0x20...0x7E).contains($0) || $0 == UInt8(ascii: "\t") }) else { return nil }
        return String(decoding: line, as: UTF8.self)
    }

    /// A new request id.
    func makeID() -> UInt32 {
        defer { nextID &+= 1 }
        return nextID
    }

    /// Lets the answer to request `id` go unread: `receive` skips it whenever it comes. For closes, whose outcome
    /// changes nothing, so that a close never costs a round trip of its own.
    func forget(_ id: UInt32) { forgotten.insert(id) }

    /// Requests being written, each framed with its length.
    struct Request {
        private(set) var bytes: [UInt8] = []
        private var packetStart = 0

        /// Starts a packet of `type`; ids and fields follow.
        mutating func begin(_ type: Message) {
            packetStart = bytes.count
            bytes += [0, 0, 0, 0, type.rawValue]
        }

        /// Ends the packet begun last: writes its length.
        mutating func end() {
            let length = UInt32(bytes.count - packetStart - 4)
            for shift in 0..<4 { bytes[packetStart + shift] = UInt8(truncatingIfNeeded: length >> (24 - 8 * UInt32(shift))) }
        }

        mutating func uint32(_ value: UInt32) {
            bytes += [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
        }

        mutating func uint64(_ value: UInt64) {
            uint32(UInt32(truncatingIfNeeded: value >> 32))
            uint32(UInt32(truncatingIfNeeded: value))
        }

        mutating func string<Bytes: Collection<UInt8>>(_ value: Bytes) {
            uint32(UInt32(value.count))
            bytes += value
        }

        /// SSH_FXP_OPEN for reading, with no attributes.
        mutating func open(id: UInt32, path: [UInt8]) {
            begin(.open)
            uint32(id)
            string(path)
            uint32(1)  // SSH_FXF_READ
            uint32(0)  // no attributes
            end()
        }

        mutating func read(id: UInt32, handle: [UInt8], offset: Int64, length: Int) {
            begin(.read)
            uint32(id)
            string(handle)
            uint64(UInt64(offset))
            uint32(UInt32(length))
            end()
        }

        mutating func openFolder(id: UInt32, path: [UInt8]) { request(.openFolder, id: id, path) }

        mutating func readFolder(id: UInt32, handle: [UInt8]) { request(.readFolder, id: id, handle) }

        mutating func fstat(id: UInt32, handle: [UInt8]) { request(.fstat, id: id, handle) }

        mutating func close(id: UInt32, handle: [UInt8]) { request(.close, id: id, handle) }

        mutating func realpath(id: UInt32, path: [UInt8]) { request(.realpath, id: id, path) }

        /// SSH_FXP_STAT, which follows links.
        mutating func stat(id: UInt32, path: [UInt8]) { request(.stat, id: id, path) }

        /// A request whose only field is a path or a handle.
        private mutating func request(_ type: Message, id: UInt32, _ field: [UInt8]) {
            begin(type)
            uint32(id)
            string(field)
            end()
        }
    }

    /// Writes every request, in order. Why all at once is safe: the caller keeps a batch's requests far below the
    /// 2 MiB window OpenSSH gives a channel, so the server takes them in while its answers wait for us.
    func send(_ requests: Request) throws(LibSSH2Error) {
        try channel.write(requests.bytes)
    }

    /// The next answer, waiting for it to arrive. Its body is valid until the next call.
    func receive() throws -> Answer {
        while true {
            if received.count - start >= 4 {
                let length = received[start..<start + 4].reduce(0) { $0 << 8 | Int($1) }
                guard length >= 5, length <= Self.largestPacket else { throw Malformed() }
                if received.count - start >= 4 + length {
                    let packet = received[start + 4 ..< start + 4 + length]
                    start += 4 + length
                    var reader = FieldReader(packet)
                    let type = try reader.byte()
                    let id = try reader.uint32()
                    if forgotten.remove(id) != nil { continue }
                    return Answer(type: type, id: id, body: reader.rest)
                }
            }
            if start > 0 {
                received.removeSubrange(0..<start)
                start = 0
            }
            let count = try channel.read(into: buffer)
            guard count > 0 else {
                ended = true
                throw Malformed()
            }
            received += UnsafeRawBufferPointer(rebasing: buffer[0..<count])
        }
    }

    /// The next answer, with what its request waited for, taken out of `awaited`; an answer to a request not
    /// there does not follow the protocol.
    func receive<Waiting>(from awaited: inout [UInt32: Waiting]) throws -> (Waiting, Answer) {
        let answer = try receive()
        guard let waiting = awaited.removeValue(forKey: answer.id) else { throw Malformed() }
        return (waiting, answer)
    }

    deinit { buffer.deallocate() }
}

/// Reads the fields of an SFTP packet in order.
struct FieldReader {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// What is left unread.
    var rest: ArraySlice<UInt8> { bytes }

    mutating func byte() throws(SFTPPipe.Malformed) -> UInt8 {
        guard let first = bytes.first else { throw SFTPPipe.Malformed() }
        bytes = bytes.dropFirst()
        return first
    }

    mutating func uint32() throws(SFTPPipe.Malformed) -> UInt32 {
        guard bytes.count >= 4 else { throw SFTPPipe.Malformed() }
        defer { bytes = bytes.dropFirst(4) }
        return bytes.prefix(4).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func uint64() throws(SFTPPipe.Malformed) -> UInt64 {
        let high = UInt64(try uint32())
        return high << 32 | UInt64(try uint32())
    }

    mutating func string() throws(SFTPPipe.Malformed) -> ArraySlice<UInt8> {
        let length = Int(try uint32())
        guard bytes.count >= length else { throw SFTPPipe.Malformed() }
        defer { bytes = bytes.dropFirst(length) }
        return bytes.prefix(length)
    }

    /// A STATUS answer as the error libssh2 would give for it (`LIBSSH2_ERROR_SFTP_PROTOCOL` with the status), so
    /// that callers read it the same way; nil for SSH_FX_OK and SSH_FX_EOF.
    mutating func statusError() throws(SFTPPipe.Malformed) -> LibSSH2Error? {
        let code = try uint32()
        guard code > 1 else { return nil }
        let message = (try? string()).map { String(decoding: $0, as: UTF8.self) } ?? ""
        return LibSSH2Error(code: -31, message: message, sftpStatus: UInt(code))
    }

    /// A NAME answer's entries: each name with its attributes (the `ls -l` line between them read past).
    mutating func names() throws(SFTPPipe.Malformed) -> [(name: [UInt8], attributes: RemoteAttributes)] {
        let count = try uint32()
        var names: [(name: [UInt8], attributes: RemoteAttributes)] = []
        names.reserveCapacity(Int(min(count, 1_024)))
        for _ in 0..<count {
            let name = Array(try string())
            _ = try string()
            names.append((name, try attributes()))
        }
        return names
    }

    /// An ATTRS structure: size and modification time when present; the rest read past.
    mutating func attributes() throws(SFTPPipe.Malformed) -> RemoteAttributes {
        let flags = try uint32()
        var attributes = RemoteAttributes()
        if flags & 0x1 != 0 { attributes.size = Int64(bitPattern: try uint64()) }
        if flags & 0x2 != 0 { _ = try uint64() }  // uid, gid
        if flags & 0x4 != 0 { attributes.mode = try uint32() }
        if flags & 0x8 != 0 {
            _ = try uint32()  // atime
            attributes.mtime = Int64(try uint32())
        }
        if flags & 0x8000_0000 != 0 {
            for _ in 0..<(try uint32()) {
                _ = try string()
                _ = try string()
            }
        }
        return attributes
    }
}
