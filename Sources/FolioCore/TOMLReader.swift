/// A TOML reader for folio.toml that keeps the line of every key, so errors can say `file:line`.
///
/// It reads the TOML that a configuration file uses: comments, `key = value` with bare or quoted keys, basic
/// and literal strings (single- and multi-line), integers, floats, booleans, arrays (across lines), `[table]`
/// and `[[array.of.tables]]` headers. Inline tables and dates are refused with a line saying so.
struct TOMLReader {
    enum Value: Equatable {
        case string(String)
        case integer(Int64)
        case float(Double)
        case bool(Bool)
        case array([Value])

        var typeName: String {
            switch self {
            case .string: "a string"
            case .integer: "an integer"
            case .float: "a number"
            case .bool: "true or false"
            case .array: "a list"
            }
        }
    }

    struct Key {
        var name: String
        var value: Value
        var line: Int
    }

    /// A group of keys: the top level, or one `[[name]]` / `[name]` table.
    struct Table {
        var header: String?
        var isArrayElement: Bool
        var line: Int
        var keys: [Key] = []
    }

    struct ParseError: Error {
        var line: Int
        var message: String
    }

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1

    static func parse(_ text: String) throws(ParseError) -> [Table] {
        var reader = TOMLReader(bytes: Array(text.utf8))
        return try reader.document()
    }

    private init(bytes: [UInt8]) { self.bytes = bytes }

    private var current: UInt8? { index < bytes.count ? bytes[index] : nil }

    private func fail(_ message: String) -> ParseError { ParseError(line: line, message: message) }

    private mutating func document() throws(ParseError) -> [Table] {
        var tables = [Table(header: nil, isArrayElement: false, line: 1)]
        while true {
            skipWhitespaceAndComments(acrossLines: true)
            guard let c = current else { break }
            if c == UInt8(ascii: "[") {
                let startLine = line
                index += 1
                let isArray = current == UInt8(ascii: "[")
                if isArray { index += 1 }
                skipSpaces()
                let name = try key()
                skipSpaces()
                if current == UInt8(ascii: ".") {
                    // `[target.photos]` is how many TOML files name a table; say how this one does.
                    throw fail(name == "target" ? "targets are written [[target]] with name = \"…\" inside, not [target.NAME]"
                                                : "dotted table names ([\(name).…]) are not used in this file")
                }
                guard current == UInt8(ascii: "]") else { throw fail("expected ] to close the table header") }
                index += 1
                if isArray {
                    guard current == UInt8(ascii: "]") else { throw fail("expected ]] to close [[\(name)]]") }
                    index += 1
                }
                try endOfLine()
                tables.append(Table(header: name, isArrayElement: isArray, line: startLine))
            } else {
                let startLine = line
                let name = try key()
                skipSpaces()
                if current == UInt8(ascii: ".") { throw fail("dotted keys (\(name).…) are not used in this file; write the key in its table") }
                guard current == UInt8(ascii: "=") else { throw fail("expected = after \(name)") }
                index += 1
                skipSpaces()
                let parsed = try value()
                try endOfLine()
                if tables[tables.count - 1].keys.contains(where: { $0.name == name }) {
                    let first = tables[tables.count - 1].keys.first { $0.name == name }!.line
                    throw ParseError(line: startLine, message: "key \(name) is set twice in the same table (first on line \(first)); keep one")
                }
                tables[tables.count - 1].keys.append(Key(name: name, value: parsed, line: startLine))
            }
        }
        return tables
    }

    private mutating func skipSpaces() {
        while let c = current, c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") { index += 1 }
    }

    private mutating func skipWhitespaceAndComments(acrossLines: Bool) {
        while let c = current {
            if c == UInt8(ascii: " ") || c == UInt8(ascii: "\t") || c == UInt8(ascii: "\r") {
                index += 1
            } else if c == UInt8(ascii: "\n") && acrossLines {
                index += 1
                line += 1
            } else if c == UInt8(ascii: "#") {
                while let d = current, d != UInt8(ascii: "\n") { index += 1 }
            } else {
                return
            }
        }
    }

    private mutating func endOfLine() throws(ParseError) {
        skipWhitespaceAndComments(acrossLines: false)
        guard let c = current else { return }
        guard c == UInt8(ascii: "\n") else { throw fail("unexpected text after the value; one key per line") }
    }

    private mutating func key() throws(ParseError) -> String {
        if current == UInt8(ascii: "\"") { return try basicString() }
        if current == UInt8(ascii: "'") { return try literalString() }
        let start = index
        while let c = current, isBareKeyByte(c) { index += 1 }
        guard index > start else { throw fail("expected a key name") }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    private func isBareKeyByte(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
    }

    private mutating func value() throws(ParseError) -> Value {
        guard let c = current else { throw fail("expected a value") }
        switch c {
        case UInt8(ascii: "\""): return .string(try basicString())
        case UInt8(ascii: "'"): return .string(try literalString())
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "{"): throw fail("inline tables are not used in this file")
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            let start = index
            while let d = current, isBareKeyByte(d) { index += 1 }
            switch String(decoding: bytes[start..<index], as: UTF8.self) {
            case "true": return .bool(true)
            case "false": return .bool(false)
            case let word: throw fail(Self.unknownValue(word))
            }
        default:
            let start = index
            while let d = current, isBareKeyByte(d) || d == UInt8(ascii: "+") || d == UInt8(ascii: ".") || d == UInt8(ascii: ":") {
                index += 1
            }
            let word = String(decoding: bytes[start..<index], as: UTF8.self)
            let digits = word.replacingUnderscores()
            if let integer = Int64(digits) { return .integer(integer) }
            let unsigned = digits.first == "+" || digits.first == "-" ? digits.dropFirst() : Substring(digits)
            if !unsigned.isEmpty, unsigned.allSatisfy({ ("0"..."9").contains($0) }) { throw fail("number \(word) is too large") }
            // A float has a fraction or an exponent (`2.5`, `1e-05`, as `folio mirror` writes a small rate).
            if digits.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }), let float = Double(digits), float.isFinite {
                return .float(float)
            }
            if word.isEmpty { throw fail("expected a value") }
            throw fail(Self.unknownValue(word))
        }
    }

    /// The message for a bare word where a value goes: a yes or no meant as a boolean is told the TOML words.
    private static func unknownValue(_ word: String) -> String {
        ["yes", "no", "on", "off", "True", "False", "TRUE", "FALSE", "y", "n"].contains(word)
            ? "unknown value \(word); TOML writes yes and no as true and false (no quotes)"
            : "unknown value \(word); strings need quotes: \"\(word)\""
    }

    private mutating func array() throws(ParseError) -> Value {
        index += 1
        var items: [Value] = []
        while true {
            skipWhitespaceAndComments(acrossLines: true)
            guard let c = current else { throw fail("list is not closed with ]") }
            if c == UInt8(ascii: "]") {
                index += 1
                return .array(items)
            }
            items.append(try value())
            skipWhitespaceAndComments(acrossLines: true)
            if current == UInt8(ascii: ",") {
                index += 1
            } else if current != UInt8(ascii: "]") {
                throw fail("expected , or ] in the list")
            }
        }
    }

    private mutating func literalString() throws(ParseError) -> String {
        if bytes[index...].starts(with: Array("'''".utf8)) {
            index += 3
            if current == UInt8(ascii: "\n") { index += 1; line += 1 }
            let start = index
            while index < bytes.count, !bytes[index...].starts(with: Array("'''".utf8)) {
                if bytes[index] == UInt8(ascii: "\n") { line += 1 } else { try checkNotControl(bytes[index]) }
                index += 1
            }
            guard index < bytes.count else { throw fail("''' string is not closed") }
            let text = String(decoding: bytes[start..<index], as: UTF8.self)
            index += 3
            return text
        }
        index += 1
        let start = index
        while let c = current, c != UInt8(ascii: "'") {
            if c == UInt8(ascii: "\n") { throw fail("string is not closed on its line") }
            try checkNotControl(c)
            index += 1
        }
        guard current != nil else { throw fail("string is not closed") }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        index += 1
        return text
    }

    /// TOML allows no raw control character in a string but a tab (and a multi-line string's line ends): one
    /// there is a stray byte (a terminal's escape pasted in, a NUL from a binary file), never what was meant,
    /// and printed back in a message it would act on the terminal.
    private func checkNotControl(_ byte: UInt8) throws(ParseError) {
        let isLineEnd = byte == 0x0D && index + 1 < bytes.count && bytes[index + 1] == 0x0A
        guard byte < 0x20 && byte != 0x09 && !isLineEnd || byte == 0x7F else { return }
        throw fail("a string holds the control character \(RelativePath.display([byte])); remove it")
    }

    private mutating func basicString() throws(ParseError) -> String {
        let multiline = bytes[index...].starts(with: Array("\"\"\"".utf8))
        index += multiline ? 3 : 1
        if multiline, current == UInt8(ascii: "\n") { index += 1; line += 1 }
        var out: [UInt8] = []
        while true {
            guard let c = current else { throw fail("string is not closed") }
            if multiline {
                if bytes[index...].starts(with: Array("\"\"\"".utf8)) { index += 3; break }
            } else if c == UInt8(ascii: "\"") {
                index += 1
                break
            }
            if c == UInt8(ascii: "\n") {
                guard multiline else { throw fail("string is not closed on its line") }
                line += 1
            } else {
                try checkNotControl(c)
            }
            if c == UInt8(ascii: "\\") {
                index += 1
                guard let e = current else { throw fail("string is not closed") }
                index += 1
                switch e {
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "\""): out.append(e)
                case UInt8(ascii: "\\"): out.append(e)
                case UInt8(ascii: "u"), UInt8(ascii: "U"):
                    let width = e == UInt8(ascii: "u") ? 4 : 8
                    guard index + width <= bytes.count,
                          let code = UInt32(String(decoding: bytes[index..<index + width], as: UTF8.self), radix: 16),
                          let scalar = Unicode.Scalar(code) else {
                        throw fail("\\\(Character(Unicode.Scalar(e))) in a string starts a Unicode escape; for a backslash (a Windows path), write \\\\ or put the text in single quotes")
                    }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                    index += width
                default: throw fail("unknown escape \\\(Character(Unicode.Scalar(e))) in a string; write \\\\ for a backslash")
                }
                continue
            }
            out.append(c)
            index += 1
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension String {
    func replacingUnderscores() -> String { String(filter { $0 != "_" }) }
}
