import Glibc

/// A strict reader of the XML that WebDAV servers send (RFC 4918 multistatus bodies): elements with their
/// namespace, text, CDATA sections; comments, processing instructions and the XML declaration are skipped.
///
/// Why not FoundationXML: it brings libxml2 and ICU into every Folio process (~3 ms of start-up and ~4 MB, also
/// for runs that never speak WebDAV) and its delegate bridging cost more CPU than the listing itself.
///
/// Safety: a multistatus never needs a DTD, so `<!DOCTYPE` and `<!ENTITY` are refused: no external entity is
/// fetched and no entity is expanded but XML's five (`&lt;` `&gt;` `&amp;` `&quot;` `&apos;`) and character
/// references. The caller bounds the body's size.
struct XMLScanner {
    /// What the body holds, in document order. Text may come in several pieces (around CDATA sections).
    enum Event: Equatable {
        /// An element opens. `namespace` is its namespace URI (nil when none applies); `name` its local name.
        case start(namespace: String?, name: String)
        case end(namespace: String?, name: String)
        case text(String)
    }

    /// Why the body is not acceptable, phrased to follow "the multistatus": "is not well-formed XML (… at byte
    /// N)", "declares a DTD or entity (<!DOCTYPE); refused".
    struct Failure: Error, Equatable, CustomStringConvertible {
        var description: String

        static func malformed(_ problem: String, at offset: Int) -> Failure {
            Failure(description: "is not well-formed XML (\(problem) at byte \(offset))")
        }
    }

    /// Reads `body` (UTF-8, or ISO-8859-1 when its declaration says so) and hands each event to `handle`.
    static func scan(_ body: [UInt8], _ handle: (Event) -> Void) throws(Failure) {
        let utf8 = try transcodedToUTF8(body)
        var scanner = XMLScanner()
        try utf8.withUnsafeBufferPointer { (bytes) throws(Failure) in try scanner.read(bytes, handle) }
    }

    /// The namespace declarations in scope, by prefix (an empty one for `xmlns="uri"`), innermost last. Why by
    /// prefix: one list of them all, searched for each element, took time in the square of the depth of a body
    /// that declares one at every level (40,000 levels: 100 s).
    private var bindings: [[UInt8]: [String]] = [:]
    /// The last prefix `resolve` looked up and the URI it had, until a declaration comes or goes. Why: a
    /// multistatus declares its one prefix on the root and uses it on every element, and the lookup hashed a new
    /// array for each, twice with the end tag's (with the tag's other copies, most of the 0.95 ms a 51-entry
    /// nginx body took to read; about 0.35 ms without them).
    private var lastLookup: (prefix: [UInt8], uri: String?)?
    /// The open elements, innermost last: where the qualified name is in the body, the namespace and local name
    /// it resolved to (its end tag has the same), and the prefixes it declared.
    private var open: [(name: Range<Int>, namespace: String?, local: String, declared: [[UInt8]])] = []

    private static let lessThan = UInt8(ascii: "<"), greaterThan = UInt8(ascii: ">"), slash = UInt8(ascii: "/")
    private static let ampersand = UInt8(ascii: "&"), colon = UInt8(ascii: ":"), equals = UInt8(ascii: "=")

    private mutating func read(_ bytes: UnsafeBufferPointer<UInt8>, _ handle: (Event) -> Void) throws(Failure) {
        var index = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0  // a UTF-8 byte order mark
        var sawRoot = false
        func fail(_ problem: String, at offset: Int) -> Failure { .malformed(problem, at: offset) }
        func find(_ marker: String, from start: Int) throws(Failure) -> Int {
            let needle = Array(marker.utf8)
            var at = start
            while at + needle.count <= bytes.count {
                if bytes[at] == needle[0], bytes[at..<(at + needle.count)].elementsEqual(needle) { return at }
                at += 1
            }
            throw fail("\(marker) missing", at: start)
        }
        func starts(with marker: String, at offset: Int) -> Bool {
            bytes[offset...].starts(with: marker.utf8)
        }

        while index < bytes.count {
            guard bytes[index] == Self.lessThan else {
                var end = index
                while end < bytes.count, bytes[end] != Self.lessThan { end += 1 }
                let piece = bytes[index..<end]
                if open.isEmpty {
                    guard piece.allSatisfy(Self.isSpace) else { throw fail("text outside the root element", at: index) }
                } else {
                    handle(.text(try Self.decode(piece, at: index)))
                }
                index = end
                continue
            }
            // Why by the byte after `<`: most tags are elements' start and end tags, told apart by a few byte
            // comparisons (four `starts(with:)` scans each before).
            let next = index + 1 < bytes.count ? bytes[index + 1] : 0
            if next == UInt8(ascii: "?") {
                index = try find("?>", from: index + 2) + 2
            } else if next == UInt8(ascii: "!"), starts(with: "<!--", at: index) {
                index = try find("-->", from: index + 4) + 3
            } else if next == UInt8(ascii: "!"), starts(with: "<![CDATA[", at: index) {
                guard !open.isEmpty else { throw fail("CDATA outside the root element", at: index) }
                let end = try find("]]>", from: index + 9)
                guard let text = Self.string(validating: bytes[(index + 9)..<end]) else { throw fail("invalid UTF-8", at: index) }
                handle(.text(text))
                index = end + 3
            } else if next == UInt8(ascii: "!") {
                var end = index + 2
                while end < bytes.count, end < index + 16, !Self.isSpace(bytes[end]), bytes[end] != Self.greaterThan { end += 1 }
                throw Failure(description: "declares a DTD or entity (\(String(decoding: bytes[index..<end], as: UTF8.self))); refused")
            } else if next == Self.slash {
                let nameStart = index + 2
                var end = nameStart
                while end < bytes.count, bytes[end] != Self.greaterThan, !Self.isSpace(bytes[end]) { end += 1 }
                let name = bytes[nameStart..<end]
                while end < bytes.count, Self.isSpace(bytes[end]) { end += 1 }
                guard end < bytes.count, bytes[end] == Self.greaterThan else { throw fail("unterminated end tag", at: index) }
                guard let element = open.popLast(), bytes[element.name].elementsEqual(name) else {
                    throw fail("</\(String(decoding: name, as: UTF8.self))> closes no open element", at: index)
                }
                handle(.end(namespace: element.namespace, name: element.local))
                unbind(element.declared)
                index = end + 1
            } else {
                guard !(open.isEmpty && sawRoot) else { throw fail("a second root element", at: index) }
                sawRoot = true
                index = try readStartTag(bytes, at: index, handle)
            }
        }
        if let element = open.last { throw fail("the body ends inside <\(String(decoding: bytes[element.name], as: UTF8.self))>", at: bytes.count) }
        guard sawRoot else { throw fail("no root element", at: bytes.count) }
    }

    /// Reads `<name attribute="value" …>` or `<name …/>` from `start`; returns the index after it.
    private mutating func readStartTag(_ bytes: UnsafeBufferPointer<UInt8>, at start: Int, _ handle: (Event) -> Void) throws(Failure) -> Int {
        func fail(_ problem: String) -> Failure { .malformed(problem, at: start) }
        var index = start + 1
        func readName() -> Range<Int> {
            let nameStart = index
            while index < bytes.count, !Self.isSpace(bytes[index]), bytes[index] != Self.greaterThan,
                  bytes[index] != Self.slash, bytes[index] != Self.equals { index += 1 }
            return nameStart..<index
        }
        func skipSpace() { while index < bytes.count, Self.isSpace(bytes[index]) { index += 1 } }

        let name = readName()
        guard !name.isEmpty else { throw fail("an element without a name") }
        var declared: [[UInt8]] = []
        var selfClosing = false
        while true {
            skipSpace()
            guard index < bytes.count else { throw fail("unterminated start tag") }
            if bytes[index] == Self.greaterThan { index += 1; break }
            if bytes[index] == Self.slash {
                guard index + 1 < bytes.count, bytes[index + 1] == Self.greaterThan else { throw fail("unterminated start tag") }
                index += 2
                selfClosing = true
                break
            }
            let attribute = readName()
            skipSpace()
            guard !attribute.isEmpty, index < bytes.count, bytes[index] == Self.equals else { throw fail("an attribute without a value") }
            index += 1
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'") else {
                throw fail("an unquoted attribute value")
            }
            let quote = bytes[index]
            let valueStart = index + 1
            index = valueStart
            while index < bytes.count, bytes[index] != quote { index += 1 }
            guard index < bytes.count else { throw fail("an unterminated attribute value") }
            let value = bytes[valueStart..<index]
            index += 1
            let attributeName = bytes[attribute]
            if attributeName.elementsEqual("xmlns".utf8) || attributeName.starts(with: "xmlns:".utf8) {
                let prefix = Array(attributeName.dropFirst(attribute.count == 5 ? 5 : 6))
                bindings[prefix, default: []].append(try Self.decode(value, at: valueStart))
                declared.append(prefix)
                lastLookup = nil
            }
        }
        let (namespace, local) = try resolve(bytes[name], at: start)
        handle(.start(namespace: namespace, name: local))
        if selfClosing {
            handle(.end(namespace: namespace, name: local))
            unbind(declared)
        } else {
            open.append((name: name, namespace: namespace, local: local, declared: declared))
        }
        return index
    }

    /// The namespace URI and local name of a qualified name, by the declarations in scope (innermost wins).
    private mutating func resolve(_ qualified: Slice<UnsafeBufferPointer<UInt8>>, at offset: Int) throws(Failure) -> (String?, String) {
        let colon = qualified.firstIndex(of: Self.colon)
        let prefix = colon.map { qualified[..<$0] } ?? qualified[qualified.startIndex..<qualified.startIndex]
        let local = String(decoding: colon.map { qualified[($0 + 1)...] } ?? qualified, as: UTF8.self)
        let uri: String?
        if let lastLookup, lastLookup.prefix.elementsEqual(prefix) {
            uri = lastLookup.uri
        } else {
            uri = bindings[Array(prefix)]?.last
            lastLookup = (Array(prefix), uri)
        }
        guard let uri else {
            guard prefix.isEmpty else {
                throw .malformed("undeclared namespace prefix \(String(decoding: prefix, as: UTF8.self))", at: offset)
            }
            return (nil, local)
        }
        return (uri.isEmpty ? nil : uri, local)
    }

    /// Ends the declarations of an element that closed.
    private mutating func unbind(_ prefixes: [[UInt8]]) {
        if !prefixes.isEmpty { lastLookup = nil }
        for prefix in prefixes {
            bindings[prefix]?.removeLast()
            if bindings[prefix]?.isEmpty == true { bindings[prefix] = nil }
        }
    }

    /// Text or an attribute value with its references replaced; fails on invalid UTF-8 or an unknown entity.
    private static func decode(_ raw: Slice<UnsafeBufferPointer<UInt8>>, at offset: Int) throws(Failure) -> String {
        guard raw.contains(ampersand) else {
            guard let text = string(validating: raw) else { throw .malformed("invalid UTF-8", at: offset) }
            return text
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(raw.count)
        var index = raw.startIndex
        while index < raw.endIndex {
            guard raw[index] == ampersand else {
                decoded.append(raw[index])
                index += 1
                continue
            }
            guard let semicolon = raw[index...].firstIndex(of: UInt8(ascii: ";")) else {
                throw .malformed("an unterminated reference", at: index)
            }
            let reference = String(decoding: raw[(index + 1)..<semicolon], as: UTF8.self)
            switch reference {
            case "lt": decoded.append(lessThan)
            case "gt": decoded.append(greaterThan)
            case "amp": decoded.append(ampersand)
            case "quot": decoded.append(UInt8(ascii: "\""))
            case "apos": decoded.append(UInt8(ascii: "'"))
            default:
                let number: UInt32? = reference.hasPrefix("#x") ? UInt32(reference.dropFirst(2), radix: 16)
                    : reference.hasPrefix("#") ? UInt32(reference.dropFirst(), radix: 10) : nil
                guard let number, number != 0, let scalar = Unicode.Scalar(number) else {
                    throw .malformed("unknown reference &\(reference);", at: index)
                }
                decoded.append(contentsOf: String(Character(scalar)).utf8)
            }
            index = semicolon + 1
        }
        guard let text = decoded.withUnsafeBufferPointer({ string(validating: $0[...]) }) else { throw .malformed("invalid UTF-8", at: offset) }
        return text
    }

    /// `bytes` as a string, or nil when they are not valid UTF-8. Why not `String(validating:as:)`: it reaches
    /// the standard library's check through generic code that is not specialized, which looked up type metadata
    /// for every text of a listing (a 51-entry body's reading about 0.35 → 0.25 ms without it).
    private static func string(validating bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        let buffer = UnsafeBufferPointer(rebasing: bytes)
        guard let base = buffer.baseAddress, !buffer.isEmpty else { return "" }
        let text = String(decoding: buffer, as: UTF8.self)
        // Decoding puts U+FFFD in place of each invalid sequence, so the bytes come back unchanged exactly when
        // they were valid: an invalid sequence is never EF BF BD itself, the replacement's own bytes.
        guard text.utf8.count == buffer.count else { return nil }
        let unchanged = text.utf8.withContiguousStorageIfAvailable { decoded in
            decoded.baseAddress.map { memcmp($0, base, buffer.count) == 0 } ?? false
        } ?? text.utf8.elementsEqual(buffer)
        return unchanged ? text : nil
    }

    /// XML white space (the `S` production): space, tab, CR, LF.
    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    /// The body in UTF-8: as is unless its declaration names ISO-8859-1 (each byte is its code point), which
    /// some servers still send; any other declared encoding is refused.
    private static func transcodedToUTF8(_ body: [UInt8]) throws(Failure) -> [UInt8] {
        guard body.starts(with: "<?xml".utf8), let end = body.firstIndex(of: greaterThan) else { return body }
        let declaration = Array(String(decoding: body[..<end], as: UTF8.self).lowercased().utf8)
        let key = Array("encoding".utf8)
        guard let at = declaration.indices.first(where: { declaration[$0...].starts(with: key) }) else { return body }
        let name = String(decoding: declaration[(at + key.count)...]
            .drop { $0 == UInt8(ascii: " ") || $0 == equals || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "'") }
            .prefix { $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "'") && !isSpace($0) && $0 != UInt8(ascii: "?") }, as: UTF8.self)
        switch name {
        case "utf-8", "utf8", "us-ascii", "ascii": return body
        case "iso-8859-1", "latin1", "iso8859-1":
            var utf8: [UInt8] = []
            utf8.reserveCapacity(body.count)
            for byte in body {
                if byte < 0x80 { utf8.append(byte) } else { utf8.append(0xC0 | byte >> 6); utf8.append(0x80 | byte & 0x3F) }
            }
            return utf8
        default:
            throw Failure(description: "is in encoding \(name); Folio reads UTF-8 and ISO-8859-1")
        }
    }
}
