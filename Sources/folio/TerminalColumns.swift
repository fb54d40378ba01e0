/// How many columns of a terminal text takes, and text cut to fit: a CJK character or an emoji takes two, a
/// combining mark or a zero-width character none. Why not `String.count`: counted in characters, a line of
/// Japanese names wrapped, the live block's redraw then moved up too few rows, and stale lines piled up.
enum TerminalColumns {
    /// The columns `text` takes.
    static func of(_ text: String) -> Int {
        text.reduce(0) { $0 + of($1) }
    }

    /// `line` cut to at most `width` columns, ending in `…` where it was cut.
    static func clip(_ line: String, to width: Int) -> String {
        guard of(line) > width else { return line }
        let room = max(10, width - 1)
        var used = 0
        var kept = ""
        for character in line {
            let columns = of(character)
            if used + columns > room { break }
            used += columns
            kept.append(character)
        }
        return kept + "…"
    }

    /// `text` cut at its start to at most `width` columns, beginning with `…` where it was cut.
    static func clipStart(_ text: String, to width: Int) -> String {
        guard of(text) > width else { return text }
        var kept = ""
        var used = 1
        for character in text.reversed() {
            used += of(character)
            if used > width { break }
            kept.insert(character, at: kept.startIndex)
        }
        return "…" + kept
    }

    /// The columns one character (a grapheme cluster) takes: two if any of its scalars is wide, none if all take
    /// none, else one.
    static func of(_ character: Character) -> Int {
        var widest = 0
        for scalar in character.unicodeScalars {
            widest = max(widest, of(scalar))
            if widest == 2 { break }
        }
        return widest
    }

    private static func of(_ scalar: Unicode.Scalar) -> Int {
        let properties = scalar.properties
        switch properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format, .control: return 0
        default: break
        }
        if properties.isEmojiPresentation { return 2 }
        switch scalar.value {
        // East Asian Wide and Fullwidth (Unicode's EastAsianWidth.txt, W and F): Hangul Jamo, CJK and kana,
        // Hangul syllables, CJK compatibility, fullwidth forms, and the supplementary ideographic planes.
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
            return 2
        default:
            return 1
        }
    }
}
