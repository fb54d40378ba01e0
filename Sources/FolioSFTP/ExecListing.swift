import FolioCore

/// The fast listing path: the root resolved and the whole tree listed in one `find -printf` over one exec
/// channel, when the server allows exec and has GNU find. Records are NUL-separated, so any byte but NUL and `/`
/// in a name survives intact.
enum ExecListing {
    static let endMarker: [UInt8] = Array("folio-listing-end".utf8)

    /// The shell command listing `root` (the path as configured): the root's real path (`pwd -P`, then a NUL),
    /// then type, size, mtime with nanoseconds and relative path of every entry, each field NUL-terminated; the
    /// end marker is printed only when find succeeded completely. Nothing at all when the root cannot be entered:
    /// the caller then asks over SFTP, which says why.
    ///
    /// Why the root is resolved here: asking SFTP (realpath, then stat) first would cost three round trips to
    /// start the subsystem and two for the requests, before the listing could start.
    static func command(root: [UInt8]) -> String {
        let quoted = "'" + String(decoding: root, as: UTF8.self).replacingOccurrences(of: "'", with: "'\\''") + "'"
        return "CDPATH= cd -P -- \(quoted) 2>/dev/null && pwd -P && printf '\\0' && LC_ALL=C find . -mindepth 1 -printf '%y\\0%s\\0%T@\\0%P\\0' 2>/dev/null && printf '\(String(decoding: endMarker, as: UTF8.self))\\0'"
    }

    struct Record {
        var type: UInt8
        var size: Int64
        var mtime: FileTime
        /// The path relative to the root, as raw bytes.
        var path: ArraySlice<UInt8>
    }

    /// Parses the command's output in one pass over the bytes: the root's real path and the records; nil when it
    /// is truncated or malformed in any way (the caller then lists by readdir).
    static func parse(_ output: [UInt8]) -> (realRoot: [UInt8], records: [Record])? {
        guard output.last == 0 else { return nil }
        var records: [Record] = []
        records.reserveCapacity(output.count / 48)
        var cursor = output.startIndex
        /// The next NUL-terminated field, or nil at the end of the output.
        func field() -> ArraySlice<UInt8>? {
            guard cursor < output.endIndex, let end = output[cursor...].firstIndex(of: 0) else { return nil }
            defer { cursor = end + 1 }
            return output[cursor..<end]
        }
        // `pwd -P` prints an absolute path and a newline.
        guard let rootField = field(), rootField.first == UInt8(ascii: "/"), rootField.last == UInt8(ascii: "\n") else { return nil }
        let realRoot = Array(rootField.dropLast())
        while let typeField = field() {
            if cursor == output.endIndex { return typeField.elementsEqual(endMarker) ? (realRoot, records) : nil }
            guard typeField.count == 1, let sizeField = field(), let timeField = field(), let path = field(),
                  let size = parseInteger(sizeField), let mtime = parseTime(timeField),
                  !path.isEmpty, path.first != UInt8(ascii: "/") else { return nil }
            records.append(Record(type: typeField.first!, size: size, mtime: mtime, path: path))
        }
        return nil  // no end marker: find did not finish
    }

    /// A non-negative decimal integer of at most 18 digits.
    static func parseInteger(_ digits: ArraySlice<UInt8>) -> Int64? {
        guard !digits.isEmpty, digits.count <= 18 else { return nil }
        var value: Int64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + Int64(byte - UInt8(ascii: "0"))
        }
        return value
    }

    /// `%T@`: seconds, a dot and up to ten fractional digits (GNU find prints nanoseconds and a trailing 0).
    static func parseTime(_ field: ArraySlice<UInt8>) -> FileTime? {
        var text = field
        let negative = text.first == UInt8(ascii: "-")
        if negative { text = text.dropFirst() }
        let dot = text.firstIndex(of: UInt8(ascii: "."))
        guard let seconds = parseInteger(text[..<(dot ?? text.endIndex)]) else { return nil }
        var nanoseconds: Int64 = 0
        if let dot {
            let fraction = text[(dot + 1)...]
            guard let digits = parseInteger(fraction.prefix(9)), fraction.dropFirst(9).allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            nanoseconds = digits
            for _ in fraction.prefix(9).count..<9 { nanoseconds *= 10 }
        }
        let total = seconds * 1_000_000_000 + nanoseconds
        return FileTime(nanoseconds: negative ? -total : total)
    }
}
