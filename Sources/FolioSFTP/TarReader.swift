import FolioCore

/// Reads a tar stream (GNU and POSIX ustar headers, GNU long names) as it arrives, chunk by chunk, without
/// holding more than one 512-byte header in memory.
///
/// Every header's checksum is verified, so output that is not tar (an SFTP-only server answering an exec, a
/// shell's error text) is refused at its first block instead of being taken for file contents.
struct TarReader {
    struct Member {
        /// The path as stored: raw bytes, no charset conversion.
        var name: [UInt8]
        var size: Int64
        var mtime: Int64
        /// The type flag: `0` (or NUL) for a regular file, `5` a folder, `1`/`2` links.
        var type: UInt8
        var isRegularFile: Bool { type == UInt8(ascii: "0") || type == 0 || type == UInt8(ascii: "7") }
    }

    enum Event {
        case member(Member)
        case data(UnsafeRawBufferPointer)
        case memberEnd
    }

    struct Malformed: Error {}

    private enum State {
        case header
        /// Member data still to come, then padding to the next block.
        case data(remaining: Int64, padding: Int64)
        /// A GNU long name's bytes being collected.
        case longName(remaining: Int64, padding: Int64)
        case skip(remaining: Int64)
        case finished
    }

    private var state = State.header
    private var block: [UInt8] = []
    private var longName: [UInt8]?
    /// Whether a valid header or the end-of-archive block was seen: the stream really is tar.
    private(set) var sawValidBlock = false
    /// Whether the end-of-archive block was read.
    var isFinished: Bool { if case .finished = state { return true } else { return false } }

    /// Feeds the next bytes of the stream; events are delivered in order as soon as their bytes are here.
    mutating func feed(_ chunk: UnsafeRawBufferPointer, _ body: (Event) throws -> Void) throws {
        var cursor = 0
        while cursor < chunk.count {
            switch state {
            case .finished:
                return  // the zero padding after the end marker
            case .header:
                let take = min(512 - block.count, chunk.count - cursor)
                block.append(contentsOf: chunk[cursor..<(cursor + take)])
                cursor += take
                if block.count == 512 {
                    let header = block
                    block.removeAll(keepingCapacity: true)
                    try readHeader(header, body)
                }
            case let .data(remaining, padding):
                let take = Int(min(remaining, Int64(chunk.count - cursor)))
                if take > 0 { try body(.data(UnsafeRawBufferPointer(rebasing: chunk[cursor..<(cursor + take)]))) }
                cursor += take
                if remaining - Int64(take) > 0 {
                    state = .data(remaining: remaining - Int64(take), padding: padding)
                } else {
                    try body(.memberEnd)
                    state = padding > 0 ? .skip(remaining: padding) : .header
                }
            case let .longName(remaining, padding):
                let take = Int(min(remaining, Int64(chunk.count - cursor)))
                longName = (longName ?? []) + chunk[cursor..<(cursor + take)]
                cursor += take
                if remaining - Int64(take) == 0 {
                    if let end = longName?.firstIndex(of: 0) { longName?.removeSubrange(end...) }
                    state = padding > 0 ? .skip(remaining: padding) : .header
                } else {
                    state = .longName(remaining: remaining - Int64(take), padding: padding)
                }
            case let .skip(remaining):
                let take = Int(min(remaining, Int64(chunk.count - cursor)))
                cursor += take
                state = remaining - Int64(take) > 0 ? .skip(remaining: remaining - Int64(take)) : .header
            }
        }
    }

    private mutating func readHeader(_ header: [UInt8], _ body: (Event) throws -> Void) throws {
        if header.allSatisfy({ $0 == 0 }) {
            sawValidBlock = true
            state = .finished
            return
        }
        guard let stored = Self.number(header[148..<156]), stored == Self.checksum(header) else { throw Malformed() }
        sawValidBlock = true
        // A size past `Entry.maximumFileSize` is no member Folio asked for, and its padding would overflow.
        guard let size = Self.number(header[124..<136]), (0...Entry.maximumFileSize).contains(size),
              let mtime = Self.number(header[136..<148]) else { throw Malformed() }
        let padding = (512 - size % 512) % 512
        let type = header[156]
        switch type {
        case UInt8(ascii: "L"):
            guard size <= 64 << 10 else { throw Malformed() }
            longName = []
            state = size > 0 ? .longName(remaining: size, padding: padding) : .header
            return
        case UInt8(ascii: "x"), UInt8(ascii: "g"), UInt8(ascii: "K"):
            // Extended headers and GNU long link names say nothing Folio uses; --format=gnu never writes the first two.
            state = size + padding > 0 ? .skip(remaining: size + padding) : .header
            return
        default:
            break
        }
        var name = longName ?? Self.string(header[0..<100])
        longName = nil
        // POSIX ustar ("ustar\0") keeps a name's leading folders in the prefix field; GNU tar ("ustar ") does not.
        if header[257..<263].elementsEqual(Array("ustar\0".utf8)) {
            let prefix = Self.string(header[345..<500])
            if !prefix.isEmpty { name = prefix + [UInt8(ascii: "/")] + name }
        }
        let member = Member(name: name, size: size, mtime: mtime, type: type)
        try body(.member(member))
        // Only regular files carry data; a hard link's or folder's size field is not followed by bytes.
        let dataSize = member.isRegularFile ? size : 0
        if dataSize > 0 {
            state = .data(remaining: dataSize, padding: padding)
        } else {
            try body(.memberEnd)
            state = .header
        }
    }

    /// A NUL-terminated field's bytes.
    private static func string(_ field: ArraySlice<UInt8>) -> [UInt8] {
        Array(field.prefix { $0 != 0 })
    }

    /// A numeric field: octal digits (space or NUL padded), or GNU's base-256 form for big values.
    static func number(_ field: ArraySlice<UInt8>) -> Int64? {
        guard let first = field.first else { return nil }
        if first & 0x80 != 0 {
            // Base-256, big-endian, two's complement; the first byte's top bit only marks the form.
            let negative = first & 0x40 != 0
            var value: Int64 = negative ? -1 : 0
            for (offset, byte) in field.enumerated() {
                let bits = offset == 0 && !negative ? byte & 0x7f : byte
                guard value >> 55 == 0 || value >> 55 == -1 else { return nil }
                value = value << 8 | Int64(bits)
            }
            return value
        }
        var value: Int64 = 0
        var seenDigit = false
        for byte in field {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "7"):
                guard value >> 60 == 0 else { return nil }
                value = value << 3 | Int64(byte - UInt8(ascii: "0"))
                seenDigit = true
            case UInt8(ascii: " ") where !seenDigit:
                continue
            case 0, UInt8(ascii: " "):
                return seenDigit ? value : nil
            default:
                return nil
            }
        }
        return seenDigit ? value : nil
    }

    /// The header's checksum: the sum of its bytes, with the checksum field counted as spaces.
    private static func checksum(_ header: [UInt8]) -> Int64 {
        var sum: Int64 = 0
        for (index, byte) in header.enumerated() { sum += (148..<156).contains(index) ? 32 : Int64(byte) }
        return sum
    }
}
