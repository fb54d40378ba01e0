import FolioCore

/// The source's URL split into what Folio needs: the origin (scheme, host, port) and the root folder's names,
/// to build request URLs for paths and to map the server's hrefs back to paths, refusing anything outside.
struct SourceURL: Sendable {
    /// Why an href was refused; each becomes a protocol error for the folder that listed it.
    enum HrefProblem: Error, CustomStringConvertible {
        case foreignOrigin
        case outsideRoot
        case traversal
        case badEscape
        case queryOrFragment

        var description: String {
            switch self {
            case .foreignOrigin: "points to another server"
            case .outsideRoot: "lies outside the source folder"
            case .traversal: "contains . or .. or an empty segment"
            case .badEscape: "has a bad %-escape or encodes / or NUL"
            case .queryOrFragment: "has a query or fragment"
            }
        }
    }

    let scheme: String
    let host: String
    let port: Int
    /// `scheme://authority`, as requests use it.
    let origin: String
    /// The root folder's names, decoded.
    let rootNames: [[UInt8]]

    init(secure: Bool, host: String, port: Int, path: String) {
        scheme = secure ? "https" : "http"
        self.host = host.lowercased()
        self.port = port
        let bracketed = host.contains(":") ? "[\(host)]" : host
        let defaultPort = secure ? 443 : 80
        origin = "\(scheme)://\(bracketed)" + (port == defaultPort ? "" : ":\(port)")
        rootNames = path.utf8.split(separator: UInt8(ascii: "/")).map(Array.init)
    }

    /// The URL of a path below the root; folders end in `/` (servers redirect otherwise).
    func url(for path: RelativePath, folder: Bool) -> String {
        var text = origin + "/"
        for name in rootNames { text += Self.encode(name[...]) + "/" }
        for name in path.components { text += Self.encode(name) + "/" }
        if !folder, !path.isRoot { text.removeLast() }
        return text
    }

    /// Percent-encodes one name: everything but RFC 3986 unreserved bytes, so `#`, `?`, `%`, `&`, spaces and
    /// non-ASCII bytes all travel safely.
    static func encode(_ name: ArraySlice<UInt8>) -> String {
        var out = [UInt8]()
        out.reserveCapacity(name.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in name {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.append(byte)
            default:
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 15)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The names below the root that an href names (empty for the root itself), decoded but not yet validated
    /// as names. `base` resolves a relative href (an index page's link): the names of the folder it came from.
    ///
    /// Refuses another origin, a query or fragment, `..` segments (also as `%2e%2e`), encoded `/` or NUL, and
    /// anything not below the root: such an href must never become a path. A `.` segment is refused in an
    /// absolute href and dropped from a relative one (RFC 3986 remove_dot_segments): Apache's autoindex links a
    /// name with a `:` before its first `/` as `./12:30 notes.txt`, so that it is not read as a scheme.
    func names(ofHref href: String, base: [[UInt8]]? = nil) throws(HrefProblem) -> [[UInt8]] {
        var path = Substring(href)
        if let schemeEnd = Self.schemeSeparator(in: href) {
            guard isSameOrigin(href) else { throw .foreignOrigin }
            let rest = href[schemeEnd.upperBound...]
            path = rest.firstIndex(of: "/").map { rest[$0...] } ?? "/"
        } else if href.hasPrefix("//") || Self.isOtherResource(href) {
            throw .foreignOrigin
        }
        guard !path.utf8.contains(UInt8(ascii: "?")), !path.utf8.contains(UInt8(ascii: "#")) else { throw .queryOrFragment }
        let absolute = path.hasPrefix("/")
        let utf8 = path.utf8
        var names: [[UInt8]] = absolute ? [] : (base ?? rootNames)
        // The segments between slashes, read in place (a listing reads one href per entry): an empty one is
        // refused, but for the last, which a folder's trailing slash leaves.
        var segmentStart = absolute ? utf8.index(after: utf8.startIndex) : utf8.startIndex
        while true {
            let segmentEnd = utf8[segmentStart...].firstIndex(of: UInt8(ascii: "/")) ?? utf8.endIndex
            let isLast = segmentEnd == utf8.endIndex
            let segment = utf8[segmentStart..<segmentEnd]
            if segment.isEmpty {
                if isLast { break }
                throw .traversal
            }
            guard let name = Self.decode(segment) else { throw .badEscape }
            // Why dropping `.` keeps the href inside the folder: it names the folder it is in, so the names so far
            // stand; `..` would climb out of it, and stays refused.
            let dropped = !absolute && name == [UInt8(ascii: ".")]
            if !dropped {
                guard name != [UInt8(ascii: ".")], name != [UInt8(ascii: "."), UInt8(ascii: ".")] else { throw .traversal }
                names.append(name)
            }
            if isLast { break }
            segmentStart = utf8.index(after: segmentEnd)
        }
        guard names.count >= rootNames.count, names[..<rootNames.count].elementsEqual(rootNames) else { throw .outsideRoot }
        names.removeFirst(rootNames.count)
        return names
    }

    /// Whether a relative href (an index page's link) has the shape of a link to one child of its folder: no
    /// scheme, query or fragment (a child's `?` or `#` arrives %-escaped; a raw one is a page's own link, such as
    /// `notes.html#usage` in an Apache header, or a sort order), no leading `/`, and one segment that is not `..`
    /// once `.` segments and a trailing `/` are left out. Such a link that `names(ofHref:base:)` refuses is an
    /// entry Folio cannot read, not a link elsewhere.
    static func looksLikeChild(_ href: String) -> Bool {
        guard !href.hasPrefix("/"), !href.utf8.contains(UInt8(ascii: "?")), !href.utf8.contains(UInt8(ascii: "#")),
              schemeSeparator(in: href) == nil, !isOtherResource(href) else { return false }
        var segments = href.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).filter { !$0.elementsEqual(".".utf8) }
        if segments.last?.isEmpty == true { segments.removeLast() }
        return segments.count == 1 && !segments[0].elementsEqual("..".utf8)
    }

    /// Whether `href` is a link to something other than a file (`mailto:`, `javascript:`, `tel:`, `data:`, `sms:`,
    /// `about:`), which a page's footer or script may hold. Taken for a file of that name, it failed every run
    /// and held back every removal. Only these: an autoindex page writes a name with a colon as `./a:b`, but a
    /// page that does not would have its file skipped, and its copy removed, were every `word:` taken so.
    static func isOtherResource(_ href: String) -> Bool {
        guard let colon = href.utf8.firstIndex(of: UInt8(ascii: ":")) else { return false }
        return ["mailto", "javascript", "tel", "data", "sms", "about"].contains(String(href[..<colon]).lowercased())
    }

    /// Where `://` first occurs in `text`. Why not `range(of:)`: Foundation's goes through NSString, and a
    /// listing asks this once per entry (a tenth of a no-change WebDAV run's CPU at 1,000 entries).
    static func schemeSeparator(in text: String) -> Range<String.Index>? {
        let utf8 = text.utf8
        var index = utf8.startIndex
        while let colon = utf8[index...].firstIndex(of: UInt8(ascii: ":")) {
            let rest = utf8[utf8.index(after: colon)...]
            if rest.starts(with: "//".utf8) { return colon..<utf8.index(colon, offsetBy: 3) }
            index = utf8.index(after: colon)
        }
        return nil
    }

    /// Whether an absolute URL has this source's scheme, host and port.
    func isSameOrigin(_ url: String) -> Bool {
        guard let schemeEnd = Self.schemeSeparator(in: url) else { return false }
        let rest = url[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? rest.endIndex
        return url[..<schemeEnd.lowerBound].lowercased() == scheme && sameAuthority(rest[..<authorityEnd])
    }

    private func sameAuthority(_ authority: Substring) -> Bool {
        var hostPart = Substring(authority.lowercased())
        if hostPart.contains("@") { return false }  // userinfo in an href: never ours
        var port = scheme == "https" ? 443 : 80
        if hostPart.hasPrefix("["), let close = hostPart.firstIndex(of: "]") {
            let after = hostPart[hostPart.index(after: close)...]
            if after.hasPrefix(":") { guard let p = Int(after.dropFirst()) else { return false }; port = p }
            hostPart = hostPart[hostPart.index(after: hostPart.startIndex)..<close]
        } else if let colon = hostPart.lastIndex(of: ":") {
            guard let p = Int(hostPart[hostPart.index(after: colon)...]) else { return false }
            port = p
            hostPart = hostPart[..<colon]
        }
        return hostPart == host && port == self.port
    }

    /// Percent-decodes one segment to bytes; nil for a bad escape or an encoded `/` or NUL.
    static func decode(_ segment: Substring.UTF8View.SubSequence) -> [UInt8]? {
        var out = [UInt8]()
        out.reserveCapacity(segment.count)
        var index = segment.startIndex
        while index != segment.endIndex {
            let byte = segment[index]
            if byte == UInt8(ascii: "%") {
                let first = segment.index(after: index)
                guard first != segment.endIndex else { return nil }
                let second = segment.index(after: first)
                guard second != segment.endIndex, let high = hexValue(segment[first]), let low = hexValue(segment[second]) else { return nil }
                let value = high << 4 | low
                guard value != 0, value != UInt8(ascii: "/") else { return nil }
                out.append(value)
                index = segment.index(after: second)
            } else {
                out.append(byte)
                index = segment.index(after: index)
            }
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
