import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// Reads a WebDAV `207 Multi-Status` body (RFC 4918 §14.16) into one record per `<response>`, with a SAX parser.
///
/// Safety: a multistatus never needs a DTD, so a body with `<!DOCTYPE` or `<!ENTITY` is refused before parsing
/// (no external entity is fetched, no entity is expanded); external entity resolution is off as well; the
/// body's size is bounded by the caller.
final class MultistatusParser: NSObject, XMLParserDelegate {
    /// One `<response>`: its href and the properties of its `200 OK` propstat.
    struct Response {
        var href = ""
        var isCollection = false
        var contentLength: Int64?
        var lastModified: String?
        var etag: String?
        /// Whether a `200 OK` propstat came: a response with only a status (404, 403) lists nothing.
        var hasProperties = false
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private static let dav = "DAV:"

    /// `<!DOCTYPE` or `<!ENTITY` if the body holds one: one pass over the bytes, looking only past each `<!`.
    static func declaration(in body: [UInt8]) -> String? {
        let markers = ["<!DOCTYPE", "<!ENTITY"].map { ($0, Array($0.utf8)) }
        var index = 0
        while index + 1 < body.count {
            if body[index] == UInt8(ascii: "<"), body[index + 1] == UInt8(ascii: "!") {
                for (text, bytes) in markers where body[index...].starts(with: bytes) { return text }
            }
            index += 1
        }
        return nil
    }

    /// `text` without leading and trailing XML white space (space, tab, CR, LF: the XML `S` production). Why not
    /// `trimmingCharacters(in:)`: it bridges through NSString, once per property of every entry, and was a
    /// sixth of a no-change WebDAV run's CPU.
    static func trimmingXMLSpace(_ text: String) -> String {
        let utf8 = text.utf8
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }
        guard let first = utf8.firstIndex(where: { !isSpace($0) }), let last = utf8.lastIndex(where: { !isSpace($0) }) else { return "" }
        if first == utf8.startIndex, utf8.index(after: last) == utf8.endIndex { return text }
        return String(text[first...last])
    }
    private var responses: [Response] = []
    private var current: Response?
    private var pending = Response()  // the properties of the propstat being read
    private var propstatStatus = ""
    private var text = ""
    private var inProp = false

    /// The parsed responses, or a `Failure` saying why the body is not an acceptable multistatus.
    static func parse(_ body: [UInt8]) throws -> [Response] {
        if let marker = declaration(in: body) {
            throw Failure(description: "the multistatus declares a DTD or entity (\(marker)); refused")
        }
        let data = Data(body)
        let delegate = MultistatusParser()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        guard parser.parse() else {
            throw Failure(description: "the multistatus is not well-formed XML (\(parser.parserError.map { "\($0.localizedDescription)" } ?? "unknown error"))")
        }
        return delegate.responses
    }

    func parser(_ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
        text = ""
        guard namespaceURI == Self.dav else { return }
        switch elementName {
        case "response": current = Response()
        case "propstat":
            pending = Response()
            propstatStatus = ""
        case "prop": inProp = true
        case "collection" where inProp: pending.isCollection = true
        default: break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        // Why bounded: a hostile server could send one huge text node; no property we read is longer.
        if text.utf8.count < 64 * 1024 { text += string }
    }

    func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName: String?) {
        guard namespaceURI == Self.dav else { return }
        let value = Self.trimmingXMLSpace(text)
        switch elementName {
        case "href" where current != nil && !inProp:
            current?.href = value
        case "status" where !inProp:
            propstatStatus = value
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
            if propstatStatus.split(separator: " ").dropFirst().first == "200" {
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
