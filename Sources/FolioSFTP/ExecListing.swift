import FolioCore

/// The fast listing path: the whole tree in one `find -printf` over an exec channel, when the server allows
/// exec and has GNU find. Records are NUL-separated, so any byte but NUL and `/` in a name survives intact.
enum ExecListing {
    static let endMarker: [UInt8] = Array("folio-listing-end".utf8)

    /// The shell command listing `root` (an absolute real path): type, size, mtime with nanoseconds, relative
    /// path, each field NUL-terminated; the end marker is printed only when find succeeded completely.
    static func command(root: [UInt8]) -> String {
        let quoted = "'" + String(decoding: root, as: UTF8.self).replacingOccurrences(of: "'", with: "'\\''") + "'"
        return "LC_ALL=C find \(quoted) -mindepth 1 -printf '%y\\0%s\\0%T@\\0%P\\0' 2>/dev/null && printf '\(String(decoding: endMarker, as: UTF8.self))\\0'"
    }

    struct Record {
        var type: UInt8
        var size: Int64
        var mtime: FileTime
        /// The path relative to the root, as raw bytes.
        var path: ArraySlice<UInt8>
    }

    /// Parses find's output in one pass over the bytes; nil when it is truncated or malformed in any way (the
    /// caller then lists by readdir).
    static func parse(_ output: [UInt8]) -> [Record]? {
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
        while let typeField = field() {
            if cursor == output.endIndex { return typeField.elementsEqual(endMarker) ? records : nil }
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
