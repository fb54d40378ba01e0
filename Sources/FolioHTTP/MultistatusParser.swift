/// Reads a WebDAV `207 Multi-Status` body (RFC 4918 §14.16) into one record per `<response>`, from the events
/// of an `XMLScanner` (which refuses DTDs and entities; the caller bounds the body's size).
struct MultistatusParser {
    /// One `<response>`: its href and the properties of its `200 OK` propstat.
    struct Response {
        var href = ""
        var isCollection = false
        var contentLength: Int64?
        var lastModified: String?
        var etag: String?
        /// Whether a `200 OK` propstat came: a response with only a status (404, 403) lists nothing.
        var hasProperties = false
        /// The last status other than 200 the response carried (its own, or a propstat's), as the server wrote it
        /// (`HTTP/1.1 403 Forbidden`): why a response without properties has none.
        var refusal: String?
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static let dav = "DAV:"

    /// `text` without leading and trailing XML white space (space, tab, CR, LF: the XML `S` production). Why not
    /// `trimmingCharacters(in:)`: it bridges through NSString, once per property of every entry, and was a
    /// sixth of a no-change WebDAV run's CPU.
    static func trimmingXMLSpace(_ text: String) -> String {
        let utf8 = text.utf8
        guard let first = utf8.firstIndex(where: { !XMLScanner.isSpace($0) }),
              let last = utf8.lastIndex(where: { !XMLScanner.isSpace($0) }) else { return "" }
        if first == utf8.startIndex, utf8.index(after: last) == utf8.endIndex { return text }
        return String(text[first...last])
    }
    /// The code of a status line (`HTTP/1.1 200 OK` → `200`): its second word, words separated by spaces (U+0020
    /// bytes; a tab is part of a word). Why not `split`: it made an array of the words twice for every entry of a
    /// listing.
    static func code(of status: String) -> Substring? {
        let utf8 = status.utf8
        var index = utf8.startIndex
        func skip(spaces: Bool) {
            while index != utf8.endIndex, (utf8[index] == UInt8(ascii: " ")) == spaces { utf8.formIndex(after: &index) }
        }
        skip(spaces: true)
        skip(spaces: false)  // the protocol's version
        skip(spaces: true)
        let start = index
        skip(spaces: false)
        return start == index ? nil : status[start..<index]
    }

    private var responses: [Response] = []
    private var current: Response?
    private var pending = Response()  // the properties of the propstat being read
    private var propstatStatus = ""
    private var text = ""
    private var inProp = false

    /// The parsed responses, or a `Failure` saying why the body is not an acceptable multistatus.
    static func parse(_ body: [UInt8]) throws(Failure) -> [Response] {
        var parser = MultistatusParser()
        do {
            try XMLScanner.scan(body) { event in
                switch event {
                case let .start(namespace, name): parser.start(namespace: namespace, name: name)
                case let .end(namespace, name): parser.end(namespace: namespace, name: name)
                case let .text(piece):
                    // Why bounded: a hostile server could send one huge text node; no property we read is longer.
                    if parser.text.utf8.count < 64 * 1024 { parser.text += piece }
                }
            }
        } catch {
            throw Failure(description: "the multistatus \(error)")
        }
        return parser.responses
    }

    private mutating func start(namespace: String?, name: String) {
        text = ""
        guard namespace == Self.dav else { return }
        switch name {
        case "response": current = Response()
        case "propstat":
            pending = Response()
            propstatStatus = ""
        case "prop": inProp = true
        case "collection" where inProp: pending.isCollection = true
        default: break
        }
    }

    private mutating func end(namespace: String?, name: String) {
        guard namespace == Self.dav else { return }
        let value = Self.trimmingXMLSpace(text)
        switch name {
        case "href" where current != nil && !inProp:
            current?.href = value
        case "status" where !inProp:
            propstatStatus = value
            if Self.code(of: value) != "200" { current?.refusal = value }
        case "getcontentlength" where inProp:
            pending.contentLength = Int64(value)
        case "getlastmodified" where inProp:
            pending.lastModified = value
        case "getetag" where inProp:
            pending.etag = value.isEmpty ? nil : value
        case "prop":
            inProp = false
        case "propstat":
            // Properties the server could not give come in a 404 propstat; only the 200 one counts.
            if Self.code(of: propstatStatus) == "200" {
                current?.hasProperties = true
                if pending.isCollection { current?.isCollection = true }
                if let length = pending.contentLength { current?.contentLength = length }
                if let modified = pending.lastModified { current?.lastModified = modified }
                if let etag = pending.etag { current?.etag = etag }
            }
        case "response":
            if let current { responses.append(current) }
            current = nil
        default:
            break
        }
        text = ""
    }
}
