/// Where a source is, parsed from the text a user wrote: a local path, `file://`, `sftp://` or `http(s)://`.
public struct SourceLocation: Sendable, Equatable, CustomStringConvertible {
    /// Which kind of source, with the parts parsed from the text.
    public enum Kind: Sendable, Equatable {
        /// An absolute local path (a folder or a mounted share).
        case local(String)
        /// `sftp://[user@]host[:port]/path`; the path is percent-decoded.
        case sftp(user: String?, host: String, port: Int, path: String)
        /// `http://` or `https://`; `url` is as written (without credentials), `path` is its decoded path.
        case http(secure: Bool, host: String, port: Int, path: String, url: String)
    }

    /// What the text names.
    public var kind: Kind
    /// The text as written, minus any `user:password@` credentials.
    public var description: String

    /// Why the text is not a source Folio can use.
    public struct ParseError: Error, Sendable {
        /// One line naming the problem and what to write instead.
        public var message: String
    }

    /// Parses a source as written: an absolute path, `file://`, `sftp://` or `http(s)://`. Throws for anything else,
    /// and for a URL with a password, a query, a bad port or a bad %-escape.
    public init(parsing text: String) throws(ParseError) {
        if text.hasPrefix("/") {
            kind = .local(text)
            description = text
            return
        }
        guard let schemeEnd = text.range(of: "://") else {
            throw ParseError(message: "source \"\(Self.redacted(text))\" is neither an absolute path nor a URL; write /path, sftp://host/path or https://host/path")
        }
        let scheme = text[..<schemeEnd.lowerBound].lowercased()
        let rest = text[schemeEnd.upperBound...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        // No path is the server's root for http(s), and for sftp the account's home folder, as scp, sftp, rsync
        // and lftp read it: taken for `/`, a run copied the server's whole filesystem.
        let rawPath = authorityEnd < rest.endIndex ? String(rest[authorityEnd...]) : scheme == "sftp" ? "/~" : "/"
        guard !rawPath.contains("?"), !rawPath.contains("#") || scheme == "file" else {
            throw ParseError(message: "source \(scheme)://… has a query or fragment; give the folder's URL only (encode # as %23)")
        }
        guard let path = Self.percentDecoded(rawPath) else {
            throw ParseError(message: "source \(Self.redacted(text)) has a bad %-escape or encodes / or NUL in its path")
        }
        // An HTTP URL's `.` and `..` are resolved by the client before it asks (libcurl does), so the folder asked
        // for is not the one written, and every name the server then lists lies outside the one written. (SFTP's
        // go to the server's realpath, which resolves them as meant.)
        guard !["http", "https"].contains(scheme) || !path.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == "." || $0 == ".." }) else {
            throw ParseError(message: "source \(Self.redacted(text)) has . or .. in its path; write the folder's path without them")
        }
        var user: String?
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            if userInfo.contains(":") {
                throw ParseError(message: "source URL contains a password; put the password in a file only this user can read and give that file as password-file (folio mirror: --password-file)")
            }
            user = Self.percentDecoded(String(userInfo))
            authority = authority[authority.index(after: at)...]
        }
        var host = String(authority)
        var port: Int?
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw ParseError(message: "source \(Self.redacted(text)) has a host with an unclosed [") }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let number = Int(after.dropFirst()), (1...65_535).contains(number) else {
                    throw ParseError(message: "bad port in \(Self.redacted(text)); write [address]:port with a number from 1 to 65535")
                }
                port = number
            } else if !after.isEmpty {
                throw ParseError(message: "source \(Self.redacted(text)) has text after its host's ]; write [address]:port")
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let number = Int(host[host.index(after: colon)...]), (1...65_535).contains(number) else {
                throw ParseError(message: "bad port in \(Self.redacted(text)); write host:port with a number from 1 to 65535")
            }
            port = number
            host = String(host[..<colon])
        }
        switch scheme {
        case "file":
            guard host.isEmpty || host == "localhost" else { throw ParseError(message: "file:// URLs name this machine only; write file:///path") }
            kind = .local(path)
            description = "file://" + rawPath
        case "sftp":
            guard !host.isEmpty else { throw ParseError(message: "source \(Self.redacted(text)) has no host; write sftp://[user@]host[:port]/path") }
            kind = .sftp(user: user, host: host, port: port ?? 22, path: path)
            description = "sftp://" + (user.map { "\($0)@" } ?? "") + String(authority) + rawPath
        case "http", "https":
            guard !host.isEmpty else { throw ParseError(message: "source \(Self.redacted(text)) has no host") }
            guard user == nil else { throw ParseError(message: "source URL contains a user name; use the username key instead (folio mirror: --username)") }
            let secure = scheme == "https"
            let url = scheme + "://" + String(authority) + rawPath
            kind = .http(secure: secure, host: host, port: port ?? (secure ? 443 : 80), path: path, url: url)
            description = url
        default:
            throw ParseError(message: "source scheme \(scheme):// is not supported; use a path, sftp://, http:// or https://")
        }
    }

    /// `text` fit for an error message: what may be `user:password@` is cut to `…@`. Why not only the userinfo
    /// the parser finds: a password with a `/` in it ends the authority early (`https://me:pa/ss@host/`), and the
    /// parser then reads `me:pa` as a host and port; so everything from the scheme (or the start, for
    /// `user:pass@host:/path`) to the last `@` goes, when it holds a `:`.
    static func redacted(_ text: String) -> String {
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        guard let at = text[start...].lastIndex(of: "@"), text[start..<at].contains(":") else { return text }
        return String(text[..<start]) + "…" + String(text[at...])
    }

    /// For a relative path that begins with a scheme Folio reads and a colon but not `://` (`http:/host/x`,
    /// `sftp:host/x`): the URL it most likely means, passwords left out; nil for any other text. Why: such a
    /// typo is a relative local path, which is then "missing" in the working folder, with a hint about mounts.
    public static func urlMissingSlashes(_ text: String) -> String? {
        guard !text.contains("://"), let colon = text.firstIndex(of: ":"),
              ["http", "https", "sftp"].contains(text[..<colon].lowercased()) else { return nil }
        let rest = text[text.index(after: colon)...].drop { $0 == "/" }
        return redacted(String(text[..<colon]) + "://" + rest)
    }

    /// Percent-decodes a URL path; refuses bad escapes and encoded `/` or NUL inside a name.
    public static func percentDecoded(_ text: String) -> String? {
        var out: [UInt8] = []
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, let value = UInt8(String(decoding: bytes[(i + 1)...(i + 2)], as: UTF8.self), radix: 16) else { return nil }
                guard value != 0, value != UInt8(ascii: "/") else { return nil }
                out.append(value)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(validating: out, as: UTF8.self)
    }
}
