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

    /// Parses find's output; nil when it is truncated or malformed in any way (the caller then lists by readdir).
    static func parse(_ output: [UInt8]) -> [Record]? {
        guard output.last == 0 else { return nil }
        var fields = output.dropLast().split(separator: 0, omittingEmptySubsequences: false)
        guard let last = fields.popLast(), last.elementsEqual(endMarker), fields.count % 4 == 0 else { return nil }
        var records: [Record] = []
        records.reserveCapacity(fields.count / 4)
        var index = 0
        while index < fields.count {
            let typeField = fields[index], sizeField = fields[index + 1], timeField = fields[index + 2], path = fields[index + 3]
            index += 4
            guard typeField.count == 1, let size = Int64(String(decoding: sizeField, as: UTF8.self)), size >= 0,
                  let mtime = parseTime(timeField), !path.isEmpty, path.first != UInt8(ascii: "/") else { return nil }
            records.append(Record(type: typeField.first!, size: size, mtime: mtime, path: path))
        }
        return records
    }

    /// `%T@`: seconds, a dot and up to ten fractional digits (GNU find prints nanoseconds and a trailing 0).
    static func parseTime(_ field: ArraySlice<UInt8>) -> FileTime? {
        var text = Substring(String(decoding: field, as: UTF8.self))
        let negative = text.hasPrefix("-")
        if negative { text = text.dropFirst() }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count <= 2, let seconds = Int64(parts[0]), !parts[0].isEmpty, parts[0].allSatisfy(\.isASCII) else { return nil }
        var nanoseconds: Int64 = 0
        if parts.count == 2 {
            let digits = parts[1]
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
            let nine = String(digits.prefix(9)).paddedToNanoseconds
            guard let value = Int64(nine) else { return nil }
            nanoseconds = value
        }
        let total = seconds * 1_000_000_000 + nanoseconds
        return FileTime(nanoseconds: negative ? -total : total)
    }
}

extension String {
    /// Fractional-second digits right-padded with zeros to nine (nanoseconds).
    fileprivate var paddedToNanoseconds: String { self + String(repeating: "0", count: max(0, 9 - count)) }
}
