/// A validated path inside a target, relative to its root: names joined by `/`, kept as the source's exact bytes.
///
/// Every remote name becomes a `RelativePath` before Folio uses it (guarantee 5): a name may not be empty, `.`
/// or `..`, contain `/`, NUL or a control character, or be longer than 255 bytes. Names are never normalised:
/// the NFC and NFD spellings of "é" are two distinct names, as they are on a Linux filesystem.
public struct RelativePath: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// Where the bytes live: a block of their own, or a share of a `PathArena` block that a listing fills with
    /// many paths. Why: as one array each, 100,000 paths of ~37 bytes cost 8 MB (a 32-byte array header and
    /// malloc's rounding per path); packed, 3.7 MB, and a no-change run holds two listings at its peak.
    private let storage: PathBlock.Shared
    private var block: PathBlock { storage.block }
    private let start: UInt32
    private let length: UInt32

    /// The longest name a Linux filesystem accepts.
    public static let maximumNameLength = 255
    /// The longest relative path Folio accepts (PATH_MAX less room for the destination prefix).
    public static let maximumPathLength = 3_800

    /// The target's root folder.
    public static let root = RelativePath(block: PathBlock.empty.block, start: 0, length: 0)

    private init(block: PathBlock, start: Int, length: Int) {
        storage = PathBlock.Shared(block: block)
        self.start = UInt32(start)
        self.length = UInt32(length)
    }

    private init<Bytes: Collection>(trusted bytes: Bytes) where Bytes.Element == UInt8 {
        self.init(block: PathBlock.holding(bytes), start: 0, length: bytes.count)
    }

    /// A copy in a block of its own: it no longer keeps a shared block (and every other path in it) alive.
    public func detached() -> RelativePath {
        withBytes { RelativePath(trusted: $0) }
    }

    /// The path's bytes: validated names separated by single `/` bytes. Empty for the target's root. A copy:
    /// `withBytes` reads them in place.
    public var bytes: [UInt8] { withBytes { Array($0) } }

    /// The number of bytes in the path.
    public var byteCount: Int { Int(length) }

    /// Calls `body` with the path's bytes, in place.
    @inline(__always)
    public func withBytes<Result, Failure: Error>(_ body: (UnsafeBufferPointer<UInt8>) throws(Failure) -> Result) throws(Failure) -> Result {
        try block.withBytes(start: Int(start), count: Int(length), body)
    }

    /// Equal when the bytes are; two shares of one block at one offset answer without comparing them.
    public static func == (lhs: RelativePath, rhs: RelativePath) -> Bool {
        lhs.length == rhs.length && (lhs.block === rhs.block && lhs.start == rhs.start || compare(lhs, rhs) == 0)
    }

    /// Hashes the path's bytes.
    public func hash(into hasher: inout Hasher) {
        withBytes { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }

    /// Validates a `/`-separated relative path.
    public init(validating bytes: [UInt8]) throws(NameError) {
        guard !bytes.isEmpty else { throw NameError(problem: .empty, name: bytes) }
        guard bytes.count <= Self.maximumPathLength else { throw NameError(problem: .pathTooLong, name: bytes) }
        for component in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if let problem = Self.problem(inName: component) { throw NameError(problem: problem, name: bytes) }
        }
        self.init(trusted: bytes)
    }

    /// Validates a `/`-separated relative path given as a string (its UTF-8 bytes, unnormalised).
    public init(validating string: String) throws(NameError) {
        try self.init(validating: Array(string.utf8))
    }

    /// This path with one more name appended; the name is validated.
    public func appending<Name: Collection>(name: Name) throws(NameError) -> RelativePath where Name.Element == UInt8 {
        try appendingName(name)
    }

    /// `appending(name:)` for a name held in an array of bytes, specialized (see `appending(name:in:)`'s).
    public func appending(name: [UInt8]) throws(NameError) -> RelativePath {
        try appendingName(name)
    }

    private func appendingName<Name: Collection>(_ name: Name) throws(NameError) -> RelativePath where Name.Element == UInt8 {
        let total = try joinedLength(name)
        let block = PathBlock.make(capacity: total)
        block.withMutableBytes(count: total) { write(name, into: $0) }
        return RelativePath(block: block, start: 0, length: total)
    }

    /// This path with one more name appended, its bytes packed into `arena`; the name is validated.
    public func appending<Name: Collection>(name: Name, in arena: inout PathArena) throws(NameError) -> RelativePath
    where Name.Element == UInt8 {
        try appendingName(name, in: &arena)
    }

    /// `appending(name:in:)` for the names listings hold: an array of bytes, or a share of one. Why these: a
    /// listing in another module called the generic one through its unspecialized entry point, which asked a
    /// witness table for each byte of each name (a tenth of a 100,000-file WebDAV listing's CPU); from
    /// here, the compiler specializes it.
    public func appending(name: [UInt8], in arena: inout PathArena) throws(NameError) -> RelativePath {
        try appendingName(name, in: &arena)
    }

    /// `appending(name:in:)` for a share of an array of bytes, specialized (see the array's).
    public func appending(name: ArraySlice<UInt8>, in arena: inout PathArena) throws(NameError) -> RelativePath {
        try appendingName(name, in: &arena)
    }

    private func appendingName<Name: Collection>(_ name: Name, in arena: inout PathArena) throws(NameError) -> RelativePath
    where Name.Element == UInt8 {
        let total = try joinedLength(name)
        let (block, start) = arena.reserve(total)
        block.withMutableBytes(count: start + total) { write(name, into: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
        return RelativePath(block: block, start: start, length: total)
    }

    /// The length of this path joined with `name`, once `name` is checked.
    private func joinedLength<Name: Collection>(_ name: Name) throws(NameError) -> Int where Name.Element == UInt8 {
        if let problem = Self.problem(inName: name) { throw NameError(problem: problem, name: Array(name)) }
        let total = byteCount + (isRoot ? 0 : 1) + name.count
        guard total <= Self.maximumPathLength else { throw NameError(problem: .pathTooLong, name: Array(name)) }
        return total
    }

    /// Writes this path, a `/` and `name` to the start of `target`.
    private func write<Name: Collection>(_ name: Name, into target: UnsafeMutableBufferPointer<UInt8>) where Name.Element == UInt8 {
        var next = withBytes { own in
            _ = target.initialize(fromContentsOf: own)
            return own.count
        }
        if next > 0 {
            target[next] = UInt8(ascii: "/")
            next += 1
        }
        _ = UnsafeMutableBufferPointer(rebasing: target[next...]).initialize(fromContentsOf: name)
    }

    /// What is wrong with a single name, or nil when it is acceptable.
    public static func problem<Name: Collection>(inName name: Name) -> NameError.Problem? where Name.Element == UInt8 {
        if name.isEmpty { return .empty }
        if name.count > maximumNameLength { return .tooLong }
        if name.count <= 2, name.allSatisfy({ $0 == UInt8(ascii: ".") }) { return .dotName }
        for byte in name {
            if byte == UInt8(ascii: "/") { return .slash }
            if byte == 0 { return .nul }
            if byte < 0x20 || byte == 0x7F { return .controlCharacter }
        }
        return nil
    }

    /// Whether this is the target's root (the empty path).
    public var isRoot: Bool { length == 0 }

    /// The number of names in the path (0 for the root).
    public var depth: Int {
        withBytes { $0.isEmpty ? 0 : $0.reduce(1) { $0 + ($1 == UInt8(ascii: "/") ? 1 : 0) } }
    }

    /// The last name's bytes.
    public var name: ArraySlice<UInt8> {
        withBytes { bytes in Array(bytes[(bytes.lastIndex(of: UInt8(ascii: "/")).map { $0 + 1 } ?? 0)...])[...] }
    }

    /// The folder holding this path (the root for a top-level name); nil for the root itself.
    public var parent: RelativePath? {
        if isRoot { return nil }
        guard let slash = withBytes({ $0.lastIndex(of: UInt8(ascii: "/")) }) else { return .root }
        return RelativePath(block: block, start: Int(start), length: slash)
    }

    /// The names, root first.
    public var components: [ArraySlice<UInt8>] {
        isRoot ? [] : bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
    }

    /// Whether `self` is `other` or lies below it.
    public func isWithin(_ other: RelativePath) -> Bool {
        if other.isRoot { return true }
        return withBytes { mine in
            other.withBytes { theirs in
                guard mine.count >= theirs.count, mine.starts(with: theirs) else { return false }
                return mine.count == theirs.count || mine[theirs.count] == UInt8(ascii: "/")
            }
        }
    }

    /// The most bytes `display` shows: more than any path Folio takes (`maximumPathLength`) and its line.
    public static let displayLimit = 8_192

    /// The path for people: UTF-8 where valid, `\xNN` for the bytes that are not, control characters escaped.
    public var description: String { withBytes { Self.display($0) } }

    /// Renders any name or path bytes for a message, never letting a control byte reach a terminal, nor a
    /// character that reorders what a terminal shows (a right-to-left override makes `gpj.exe` read `exe.jpg`).
    /// Past `displayLimit` bytes (a server's name of megabytes, which printed whole), the start is shown and
    /// the length said.
    public static func display<Bytes: Collection>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        if bytes.count > displayLimit { return display(bytes.prefix(displayLimit)) + "… (\(bytes.count) bytes)" }
        let decoded = String(decoding: bytes, as: UTF8.self)
        if decoded.utf8.elementsEqual(bytes), !decoded.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || isHidden($0) }) {
            return decoded
        }
        var out = ""
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte < 0x20 || byte == 0x7F {
                out += "\\x" + String(byte, radix: 16).leftPadded(to: 2)
                index = bytes.index(after: index)
                continue
            }
            // Take the longest valid UTF-8 scalar starting here, else escape one byte.
            let length = byte < 0x80 ? 1 : byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : byte >= 0xC0 ? 2 : 0
            if length > 0, let end = bytes.index(index, offsetBy: length, limitedBy: bytes.endIndex) {
                let scalar = bytes[index..<end]
                let text = String(decoding: scalar, as: UTF8.self)
                if text.utf8.elementsEqual(scalar) {
                    if let hidden = text.unicodeScalars.first, isHidden(hidden) {
                        out += "\\u{" + String(hidden.value, radix: 16, uppercase: true) + "}"
                    } else {
                        out += text
                    }
                    index = end
                    continue
                }
            }
            out += "\\x" + String(byte, radix: 16).leftPadded(to: 2)
            index = bytes.index(after: index)
        }
        return out
    }

    /// C1 control characters, and the marks and overrides that reorder bidirectional text: shown escaped.
    private static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x80...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Component-wise order (a folder's children come right after it, before its next sibling): bytes compare
    /// as unsigned, with `/` ranked below every byte a name may hold.
    public static func < (lhs: RelativePath, rhs: RelativePath) -> Bool {
        compare(lhs, rhs) < 0
    }

    /// Three-way comparison in the order of `<`.
    @inline(__always)
    public static func compare(_ lhs: RelativePath, _ rhs: RelativePath) -> Int {
        lhs.withBytes { left in rhs.withBytes { right in compare(left, right) } }
    }

    /// Three-way comparison in the order of `<`.
    @inline(__always)
    public static func compare(_ lhs: [UInt8], _ rhs: [UInt8]) -> Int {
        lhs.withUnsafeBufferPointer { left in
            rhs.withUnsafeBufferPointer { right in compare(left, right) }
        }
    }

    /// Three-way comparison in the order of `<`, of bytes wherever they are.
    @inline(__always)
    public static func compare(_ left: UnsafeBufferPointer<UInt8>, _ right: UnsafeBufferPointer<UInt8>) -> Int {
        let count = min(left.count, right.count)
        var i = 0
        // Eight bytes at a time while they agree: sibling paths share long prefixes ("folder 0123/file-0"), and
        // sorting a listing of 100,000 paths is mostly spent walking them. Unaligned loads; only equality is
        // decided here, so byte order does not matter.
        if let l = left.baseAddress, let r = right.baseAddress {
            while i + 8 <= count,
                  UnsafeRawPointer(l + i).loadUnaligned(as: UInt64.self) == UnsafeRawPointer(r + i).loadUnaligned(as: UInt64.self) {
                i += 8
            }
        }
        while i < count {
            let a = left[i], b = right[i]
            if a != b {
                let ra = a == UInt8(ascii: "/") ? 0 : Int(a)
                let rb = b == UInt8(ascii: "/") ? 0 : Int(b)
                return ra - rb
            }
            i += 1
        }
        return left.count - right.count
    }
}

/// A name or path that Folio refuses to use, and why.
public struct NameError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with a name; the raw value ends the message (`name ".." is . or ..`).
    public enum Problem: String, Sendable {
        case empty = "is empty"
        case dotName = "is . or .."
        case slash = "contains /"
        case nul = "contains a NUL byte"
        case controlCharacter = "contains a control character"
        case tooLong = "is too long"
        /// Why a limit below Linux's 4,096: the trash keeps a removed file under `.folio/trash/<run>/`, and that
        /// path must fit too.
        case pathTooLong = "makes a path longer than 3800 bytes, the most Folio mirrors (it keeps room for its trash under Linux's 4096)"
    }
    /// What is wrong.
    public var problem: Problem
    /// The refused bytes: the name, or the whole path when a path was validated at once.
    public var name: [UInt8]

    /// `name "<bytes>" <problem>`, e.g. `name "a/\x01" contains a control character`; unprintable bytes escaped.
    public var description: String { "name \"\(RelativePath.display(name))\" \(problem.rawValue)" }
}

extension String {
    /// The string padded on the left to `width` characters (for fixed-width numbers).
    public func leftPadded(to width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

extension RandomAccessCollection where Index == Int {
    /// The index of the element whose path's bytes are `bytes`, by binary search; the collection must be sorted
    /// in `RelativePath` order (a snapshot's entries, a record).
    @inline(__always)
    func index(ofPath bytes: UnsafeBufferPointer<UInt8>, path: (Element) -> RelativePath) -> Int? {
        var low = startIndex, high = endIndex
        while low < high {
            let mid = low + (high - low) / 2
            let order = path(self[mid]).withBytes { RelativePath.compare($0, bytes) }
            if order == 0 { return mid }
            if order < 0 { low = mid + 1 } else { high = mid }
        }
        return nil
    }
}

extension UnsafeMutableBufferPointer {
    /// Sorts stably in `RelativePath` order of `path(element)`, with 6 bytes of scratch per element: it sorts 32-bit
    /// positions, then moves each element once along the cycles of the permutation. Why not `sort(by:)`: its
    /// merge buffer holds half the elements (2 MB for 100,000 entries of 40 bytes), and the listings, the record
    /// and their sorts meet at a run's memory peak.
    func sortByPath(_ path: (Element) -> RelativePath) {
        guard count > 1 else { return }
        precondition(count <= Int(Int32.max), "too many entries to sort by position")
        var order = (0..<Int32(count)).map { $0 }
        order.sort { RelativePath.compare(path(self[Int($0)]), path(self[Int($1)])) < 0 }
        // Position i takes the element from order[i]; following i -> order[i] walks one cycle, which closes where
        // it began. A visited position is marked -1.
        for start in 0..<count where order[start] >= 0 {
            let first = self[start]
            var position = start
            while true {
                let from = Int(order[position])
                order[position] = -1
                if from == start {
                    self[position] = first
                    break
                }
                self[position] = self[from]
                position = from
            }
        }
    }
}
