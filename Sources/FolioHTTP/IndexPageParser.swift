import Foundation

/// Reads a web server's folder index: nginx's and Apache's autoindex HTML, and nginx's JSON autoindex.
///
/// HTML pages give names and kinds only: their dates are to the minute and Apache's sizes are rounded
/// ("1.2K"), so files listed from HTML get their size, time and ETag from a HEAD each. The JSON format gives
/// exact sizes and times to the second, so it needs no HEAD (and the entries carry no ETag).
enum IndexPageParser {
    /// One link of the page; `href` is still percent-encoded, HTML entities decoded.
    struct Link {
        var href: String
        var isFolder: Bool
        var size: Int64?
        var lastModified: String?
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The links of a page, JSON or HTML by its content type (or its first byte).
    static func parse(_ body: [UInt8], contentType: String?) throws -> [Link] {
        isJSON(body, contentType: contentType) ? try parseJSON(body) : parseHTML(body)
    }

    /// Whether a page is nginx's JSON index rather than HTML.
    static func isJSON(_ body: [UInt8], contentType: String?) -> Bool {
        contentType?.lowercased().contains("json") ?? (body.first == UInt8(ascii: "["))
    }

    /// Whether a page is HTML, by its content type, or else by its first KiB (a server without MIME types sends
    /// its pages as `application/octet-stream`): what is neither this nor JSON (a file served where its folder
    /// was asked for) is no listing, though it has no links, as an empty folder's listing has none.
    static func isHTML(_ body: [UInt8], contentType: String?) -> Bool {
        if let contentType {
            let type = contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            if type == "text/html" || type == "application/xhtml+xml" { return true }
        }
        let lower = body.prefix(1024).map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        return ["<!doctype html", "<html", "<pre", "<a ", "<table", "<ul"].contains { find(Array($0.utf8), in: lower, from: 0) != nil }
    }

    /// Whether an HTML page's title is an autoindex's: "Index of /x/" (nginx, Apache, lighttpd) or "Directory
    /// listing for /x/" (Python's http.server). Other servers' listings (Go's, Caddy's, IIS's) carry no such mark.
    static func isTitledAsAnIndex(_ body: [UInt8]) -> Bool {
        // Why only the head of the page: the title comes first, and a listing may run to tens of MiB.
        let lower = body.prefix(4096).map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        return find(Array("<title>index of ".utf8), in: lower, from: 0) != nil
            || find(Array("<title>directory listing for ".utf8), in: lower, from: 0) != nil
    }

    /// The text of a page's `<title>`, lowercased; nil when its head has none.
    static func title(of body: [UInt8]) -> String? {
        let lower = body.prefix(4096).map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        guard let open = find(Array("<title>".utf8), in: lower, from: 0),
              let close = find(Array("</title>".utf8), in: lower, from: open + 7) else { return nil }
        return String(decoding: lower[(open + 7)..<close], as: UTF8.self)
    }

    /// Whether a page is an XML document (nginx's `autoindex_format xml`, which Folio does not read).
    static func isXML(_ body: [UInt8]) -> Bool {
        body.drop { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }.starts(with: Array("<?xml".utf8))
    }

    /// Whether an HTML page has a password field (`<input type="password">`): a login page, which no folder
    /// listing is.
    static func asksForPassword(_ body: [UInt8]) -> Bool {
        let lower = body.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        let input = Array("<input".utf8)
        let forms = ["type=\"password\"", "type='password'", "type=password"].map { Array($0.utf8) }
        var index = 0
        while let start = find(input, in: lower, from: index) {
            let end = lower[start...].firstIndex(of: UInt8(ascii: ">")) ?? lower.endIndex
            let tag = Array(lower[start..<end])
            if forms.contains(where: { find($0, in: tag, from: 0) != nil }) { return true }
            index = end
        }
        return false
    }

    /// nginx `autoindex_format json`: `[{"name":"a","type":"file","mtime":"<HTTP date>","size":1}, …]`.
    /// What a JSON decoding error says, in words rather than the decoder's dump.
    private static func reason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        func place(_ path: [any CodingKey]) -> String {
            path.map { $0.intValue.map { "entry \($0 + 1)" } ?? "its \"\($0.stringValue)\"" }.joined(separator: ", ")
        }
        switch error {
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return context.codingPath.isEmpty ? "it is not a list" : "\(place(context.codingPath)) is not what nginx writes"
        case .keyNotFound(let key, let context):
            return "\(context.codingPath.isEmpty ? "an entry" : place(context.codingPath)) has no \"\(key.stringValue)\""
        case .dataCorrupted:
            return "it is not valid JSON"
        @unknown default:
            return "\(error)"
        }
    }

    static func parseJSON(_ body: [UInt8]) throws -> [Link] {
        struct Item: Decodable {
            var name: String
            var type: String
            var mtime: String?
            var size: Int64?
        }
        let items: [Item]
        do {
            items = try JSONDecoder().decode([Item].self, from: Data(body))
        } catch {
            // nginx writes a name that is not UTF-8 into its JSON index as it is, which no JSON reader takes.
            if String(validating: body, as: UTF8.self) == nil {
                throw Failure(description: "the JSON index is not UTF-8, as JSON must be (a name on the server is in another encoding); have the server list this folder as HTML (autoindex_format html) or over WebDAV")
            }
            throw Failure(description: "the JSON index is not nginx's list of entries (\(Self.reason(error))); have the server list this folder as nginx's autoindex does (HTML or JSON), or over WebDAV")
        }
        // The JSON gives decoded names; encode them so every link goes through the same href checks.
        return items.compactMap { item in
            guard item.type == "file" || item.type == "directory" else { return nil }
            let encoded = SourceURL.encode(Array(item.name.utf8)[...])
            return Link(href: encoded + (item.type == "directory" ? "/" : ""), isFolder: item.type == "directory",
                        size: item.size, lastModified: item.mtime)
        }
    }

    /// Every `<a href="…">` of the page. Sort links (`?C=N;O=D`), the parent link and links elsewhere are
    /// dropped later, by the lister, as they name no child of the folder.
    static func parseHTML(_ body: [UInt8]) -> [Link] {
        var links: [Link] = []
        let lower = body.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
        let block = listingBlock(lower)
        var index = block.lowerBound
        let anchor = Array("<a ".utf8), hrefKey = Array("href=".utf8)
        while let start = find(anchor, in: lower, from: index), start < block.upperBound {
            guard let close = lower[start...].firstIndex(of: UInt8(ascii: ">")) else { break }
            index = close + 1
            // Within the tag only: searched to the page's end, a page of anchors without an href took time in the
            // square of its size (20,000 of them: over a minute).
            guard let key = find(hrefKey, in: lower, from: start, before: close) else { continue }
            var valueStart = key + hrefKey.count
            var valueEnd: Int
            if valueStart < close, lower[valueStart] == UInt8(ascii: "\"") || lower[valueStart] == UInt8(ascii: "'") {
                let quote = lower[valueStart]
                valueStart += 1
                valueEnd = lower[valueStart..<close].firstIndex(of: quote) ?? close
            } else {
                valueEnd = lower[valueStart..<close].firstIndex(where: { $0 == UInt8(ascii: " ") }) ?? close
            }
            let href = decodeEntities(String(decoding: body[valueStart..<valueEnd], as: UTF8.self))
            guard !href.isEmpty, !href.hasPrefix("?"), !href.hasPrefix("#") else { continue }
            links.append(Link(href: href, isFolder: href.hasSuffix("/")))
        }
        return links
    }

    /// Where the listing is on a page that shows a folder's own HTML around it: Apache's `HeaderName` and
    /// `ReadmeName` (Debian's default shows a folder's HEADER.html above the listing and README.html below it) and
    /// lighttpd's readme. Their links are the author's, not the folder's: read as entries, a link to `docs/`
    /// made a folder that does not exist, failing every run. From the listing's first mark (Apache's sort links,
    /// or a "Parent Directory" link) to the end of the table, `<pre>` or list holding it; the whole page where
    /// there is no such mark (nginx's, Python's).
    private static func listingBlock(_ lower: [UInt8]) -> Range<Int> {
        let marks = ["?c=n;o=", "parent directory</a>"].compactMap { find(Array($0.utf8), in: lower, from: 0) }
        guard let mark = marks.min() else { return 0..<lower.count }
        // From the link that holds the mark: the parent's link is the listing's first.
        let anchor = Array("<a ".utf8)
        let start = (0...max(0, mark - anchor.count)).reversed().first { lower[$0..<$0 + anchor.count].elementsEqual(anchor) } ?? mark
        let ends = ["</table>", "</pre>", "</ul>"].compactMap { find(Array($0.utf8), in: lower, from: start) }
        return start..<(ends.min() ?? lower.count)
    }

    /// Where `needle` first starts in `haystack` from `start`, ending before `end` (the haystack's end by default).
    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int, before end: Int? = nil) -> Int? {
        let end = min(end ?? haystack.count, haystack.count)
        guard needle.count <= end else { return nil }
        var i = start
        while i + needle.count <= end {
            if haystack[i] == needle[0], haystack[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    /// `&amp;`, `&lt;`, `&gt;`, `&quot;`, `&#39;`, `&#NN;` and `&#xNN;`: what autoindex pages put in hrefs.
    static func decodeEntities(_ text: String) -> String {
        guard text.contains("&") else { return text }
        var out = ""
        var rest = Substring(text)
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            let after = rest[rest.index(after: amp)...]
            guard let semicolon = after.prefix(10).firstIndex(of: ";") else {
                out += "&"
                rest = after
                continue
            }
            let name = after[..<semicolon]
            var replacement: String?
            switch name {
            case "amp": replacement = "&"
            case "lt": replacement = "<"
            case "gt": replacement = ">"
            case "quot": replacement = "\""
            case "apos": replacement = "'"
            default:
                if name.hasPrefix("#x") || name.hasPrefix("#X") {
                    replacement = UInt32(name.dropFirst(2), radix: 16).flatMap(Unicode.Scalar.init).map { String($0) }
                } else if name.hasPrefix("#") {
                    replacement = UInt32(name.dropFirst()).flatMap(Unicode.Scalar.init).map { String($0) }
                }
            }
            if let replacement {
                out += replacement
                rest = after[after.index(after: semicolon)...]
            } else {
                out += "&"
                rest = after
            }
        }
        return out + rest
    }
}
