/// The `exclude` globs of a target. Excluded entries are neither copied nor removed on the destination.
///
/// Rules, as in rsync and .gitignore: `*` matches within a name, `?` one byte, `[abc]`/`[!a-z]` a set, `**` any
/// number of folders. A pattern without a `/` matches a name at any depth; one with a `/` is anchored at the
/// target's root (a leading `/` is allowed). A trailing `/` matches folders only.
public struct ExcludeFilter: Sendable, Equatable {
    struct Pattern: Sendable, Equatable {
        var bytes: [UInt8]
        var anchored: Bool
        var foldersOnly: Bool
    }

    let patterns: [Pattern]
    /// The globs as written, for messages and the state database.
    public let globs: [String]

    /// Compiles `globs`; an empty one (or a lone `/`) is dropped.
    public init(_ globs: [String] = []) {
        self.globs = globs
        patterns = globs.compactMap { glob in
            var bytes = Array(glob.utf8)
            var foldersOnly = false
            if bytes.last == UInt8(ascii: "/") {
                foldersOnly = true
                bytes.removeLast()
            }
            var anchored = bytes.contains(UInt8(ascii: "/"))
            if bytes.first == UInt8(ascii: "/") {
                anchored = true
                bytes.removeFirst()
            }
            return bytes.isEmpty ? nil : Pattern(bytes: bytes, anchored: anchored, foldersOnly: foldersOnly)
        }
    }

    /// The globs whose `[` no `]` closes. Such a `[` matches itself, as fnmatch has it, which is seldom what was
    /// meant (`*.[jJpg` for `*.[jJ]pg`); a `[` meant as itself is written `\[` (in TOML, `"\\["`).
    public static func unclosedSets(in globs: [String]) -> [String] {
        globs.filter { glob in
            let bytes = Array(glob.utf8)[...]
            var i = bytes.startIndex
            while i < bytes.endIndex {
                switch bytes[i] {
                case UInt8(ascii: "\\"): i += 2
                case UInt8(ascii: "["):
                    guard let (_, next) = matchSet(bytes, from: i, byte: 0) else { return true }
                    i = next
                default: i += 1
                }
            }
            return false
        }
    }

    /// Whether no pattern is left, so nothing is excluded.
    public var isEmpty: Bool { patterns.isEmpty }

    /// Whether an entry is excluded. Callers check folders before descending, so children of an excluded
    /// folder are never asked about.
    public func excludes(_ path: RelativePath, isFolder: Bool) -> Bool {
        if patterns.isEmpty { return false }
        // Matched in place: every listed entry comes through here.
        return path.withBytes { bytes in
            let whole = bytes[...]
            let name = whole[((whole.lastIndex(of: UInt8(ascii: "/"))).map { $0 + 1 } ?? whole.startIndex)...]
            return patterns.contains { pattern in
                (!pattern.foldersOnly || isFolder) && Self.match(pattern.bytes[...], pattern.anchored ? whole : name)
            }
        }
    }

    /// Backtracking glob match over bytes; patterns are short, so this stays cheap.
    static func match<Text: RandomAccessCollection<UInt8>>(_ pattern: ArraySlice<UInt8>, _ text: Text) -> Bool
    where Text.Index == Int, Text.SubSequence == Text {
        let slash = UInt8(ascii: "/")
        var p = pattern.startIndex, t = text.startIndex
        while p < pattern.endIndex {
            let c = pattern[p]
            switch c {
            case UInt8(ascii: "*"):
                let isDouble = p + 1 < pattern.endIndex && pattern[p + 1] == UInt8(ascii: "*")
                var rest = p + (isDouble ? 2 : 1)
                // `**/` also matches zero folders.
                if isDouble, rest < pattern.endIndex, pattern[rest] == slash, match(pattern[(rest + 1)...], text[t...]) {
                    return true
                }
                if isDouble { while rest < pattern.endIndex && pattern[rest] == UInt8(ascii: "*") { rest += 1 } }
                var candidate = t
                while true {
                    if match(pattern[rest...], text[candidate...]) { return true }
                    if candidate == text.endIndex { return false }
                    if !isDouble && text[candidate] == slash { return false }
                    candidate += 1
                }
            case UInt8(ascii: "?"):
                guard t < text.endIndex, text[t] != slash else { return false }
                p += 1; t += 1
            case UInt8(ascii: "["):
                guard t < text.endIndex, text[t] != slash,
                      let (matched, next) = matchSet(pattern, from: p, byte: text[t]) else {
                    if t < text.endIndex, text[t] == c, matchSet(pattern, from: p, byte: 0) == nil { p += 1; t += 1; continue }
                    return false
                }
                guard matched else { return false }
                p = next; t += 1
            case UInt8(ascii: "\\") where p + 1 < pattern.endIndex:
                guard t < text.endIndex, text[t] == pattern[p + 1] else { return false }
                p += 2; t += 1
            default:
                guard t < text.endIndex, text[t] == c else { return false }
                p += 1; t += 1
            }
        }
        return t == text.endIndex
    }

    /// Matches `[...]` at `start`; nil when the set is not closed (then `[` is a plain byte).
    private static func matchSet(_ pattern: ArraySlice<UInt8>, from start: Int, byte: UInt8) -> (Bool, Int)? {
        var i = start + 1
        var negate = false
        if i < pattern.endIndex, pattern[i] == UInt8(ascii: "!") || pattern[i] == UInt8(ascii: "^") {
            negate = true
            i += 1
        }
        var matched = false
        var first = true
        while i < pattern.endIndex {
            let c = pattern[i]
            if c == UInt8(ascii: "]") && !first { return (matched != negate, i + 1) }
            first = false
            if i + 2 < pattern.endIndex, pattern[i + 1] == UInt8(ascii: "-"), pattern[i + 2] != UInt8(ascii: "]") {
                if c <= byte && byte <= pattern[i + 2] { matched = true }
                i += 3
            } else {
                if c == byte { matched = true }
                i += 1
            }
        }
        return nil
    }
}
