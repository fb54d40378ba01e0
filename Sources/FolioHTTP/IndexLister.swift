import FolioCore
import Foundation

/// Lists a tree from a plain web server's folder index pages (nginx or Apache autoindex, HTML or nginx JSON).
///
/// A link counts only when it names one child of the folder (after percent-decoding and the same checks as
/// WebDAV hrefs); parent, sort and foreign links are ignored, and a child's link that fails the checks is an
/// unreadable issue (see `list`). HTML gives no exact size or time, so every file from an HTML page gets a HEAD
/// (queued as its own job, so HEADs run in parallel on all workers), which also brings the file's ETag. nginx's JSON index gives sizes and times to the second and needs no HEAD; its files
/// carry no ETag (a HEAD per file only for the ETag would cost a request per file on every run).
/// An HTML page without an autoindex's title is refused when it asks for a password (a login page), and costs
/// one HEAD more, which tells a folder's index.html, shown in place of a listing, from a listing (`indexFile`);
/// a few more when the page came with an ETag, as a file does, for the other names servers show that way.
struct IndexLister: Sendable {
    let client: HTTPClient
    let exclude: ExcludeFilter
    /// Folders the last run had, listed ahead (see `ListingWalk`).
    var known: [RelativePath] = []

    static let pageLimit = 64 << 20

    /// Lists the whole tree.
    func snapshot(workers: ListingWalk.Workers) async throws -> SnapshotBuilder {
        try await ListingWalk.run(workers: workers, root: .folder(.root), known: known, handles: client.idleHandles) { job, easy, walk, paths in
            switch job {
            case .folder(let folder): try list(folder, easy: easy, walk: walk, paths: &paths)
            case .head(let file): try head(file, easy: easy, walk: walk)
            case .rootDepthOne: return
            }
        }
    }

    private func list(_ folder: RelativePath, easy: CurlEasy, walk: ListingWalk.Scope, paths: inout PathArena) throws {
        let url = client.urls.url(for: folder, folder: true)
        let response = try client.send(with: easy, cancelled: { walk.isStopped }, makeRequest: {
            CurlEasy.Request(method: "GET", url: url, bodyLimit: Self.pageLimit)
        })
        guard response.status == 200 else {
            if folder.isRoot, response.status == 404 || response.status == 410 {
                throw SourceError(.notFound, "source folder \(url) does not exist (HTTP \(response.status)); check the URL", underlying: "HTTP \(response.status)")
            }
            throw client.error(status: response.status, url: url, path: folder)
        }
        let contentType = response.headers["content-type"]
        guard IndexPageParser.isJSON(response.body, contentType: contentType) || IndexPageParser.isHTML(response.body, contentType: contentType) else {
            // Why an error, not an empty folder: lighttpd serves a file's old bytes for a moment after the file
            // was replaced by a folder of its name, and every file below would have been removed.
            throw SourceError(.protocolViolation, "\(url) answers with \(contentType.map { "a body of type \($0)" } ?? "a body that is neither HTML nor JSON"), not a listing of the folder, so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder (an HTML or JSON index, or WebDAV), or exclude it", path: folder)
        }
        let links: [IndexPageParser.Link]
        do {
            links = try IndexPageParser.parse(response.body, contentType: response.headers["content-type"])
        } catch {
            throw SourceError(.protocolViolation, "index page \(url): \(error)", path: folder)
        }
        // Why errors (which hold back every removal) and not the page's links: a login page or a folder's
        // index.html links what its author chose, and every file it leaves out would look removed at the source.
        let untitled = !IndexPageParser.isJSON(response.body, contentType: response.headers["content-type"])
            && !IndexPageParser.isTitledAsAnIndex(response.body)
        if untitled, IndexPageParser.asksForPassword(response.body) {
            throw SourceError(.permission, "\(url) answers with a login page (it asks for a password), not a listing of the folder; nothing is removed until Folio can list it: check username and password-file or token-file, and the URL", path: folder)
        }
        let folderNames = folder.components.map(Array.init)
        let base = client.urls.rootNames + folderNames
        var entries: [Entry] = []
        var issues: [ListingIssue] = []
        var seen = Set<RelativePath>()
        var childLinks = 0
        for link in links {
            let names: [[UInt8]]
            do {
                names = try client.urls.names(ofHref: link.href, base: base)
            } catch {
                // Why unreadable (which holds back every removal), not skipped: Folio cannot tell which name this
                // link means, so a local copy of that entry cannot be told from one the source no longer has.
                // Dropped without a word, the entry vanished from the snapshot and its local copy was removed.
                if SourceURL.looksLikeChild(link.href) {
                    let shown = folder.isRoot ? link.href : "\(folder)/\(link.href)"
                    issues.append(ListingIssue(path: shown, kind: .unreadable("the index page's link \(error), so Folio cannot tell which file it names; nothing is removed until it can")))
                }
                continue
            }
            guard names.count == folderNames.count + 1, names[..<folderNames.count].elementsEqual(folderNames) else { continue }
            childLinks += 1
            let path: RelativePath
            do {
                path = try folder.appending(name: names[folderNames.count], in: &paths)
            } catch {
                issues.append(ListingIssue(path: RelativePath.display(Array(names.joined(separator: [UInt8(ascii: "/")]))), kind: .skipped("\(error)")))
                continue
            }
            if !exclude.isEmpty, exclude.excludes(path, isFolder: link.isFolder) { continue }
            guard seen.insert(path).inserted else {
                issues.append(ListingIssue(path: path.description, kind: .skipped("listed twice by the index page; kept the first")))
                continue
            }
            let mtime = link.lastModified.flatMap(HTTPDate.parse).map { FileTime(seconds: $0) }
            if link.isFolder {
                entries.append(Entry(path: path, kind: .folder, mtime: mtime ?? .unknown, precision: .second))
                walk.push(.folder(path))
            } else if let size = link.size, let mtime {
                entries.append(Entry(path: path, kind: .file, size: size, mtime: mtime, precision: .second))
            } else {
                walk.push(.head(path))
            }
        }
        // A page that links nothing below the folder and is an XML document, or carries a title that neither is
        // an index's nor names the folder, is no listing (nginx's XML index, an application's welcome page):
        // taken for an empty folder, it had every file below the folder removed, and below the root the
        // empty-source guard does not look. Why not every page without links: an empty folder's listing on Go's
        // file server has no title, and Caddy's is titled with the folder's path.
        let named = folder.isRoot ? "/" : RelativePath.display(folder.name).lowercased()
        if untitled, childLinks == 0, issues.isEmpty,
           IndexPageParser.isXML(response.body) || IndexPageParser.title(of: response.body).map({ !$0.contains(named) }) == true {
            throw SourceError(.protocolViolation, "\(url) answers with a page that is not a listing (no \"Index of\" title, no link to anything in the folder), so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder (an HTML or JSON index, or WebDAV), or exclude it", path: folder)
        }
        // Why after the links' folders are queued: the HEAD of index.html costs a round trip, which other workers
        // spend listing those folders meanwhile. Should the page be the folder's index.html after all, its links
        // are real paths below the folder, and the error holds back every removal.
        if untitled, let name = try indexFile(of: url, page: response, easy: easy, walk: walk) {
            throw SourceError(.protocolViolation, "\(url) shows its \(name), a web page, instead of a listing of the folder, so Folio cannot tell which files it holds; nothing is removed until it can: have the server list this folder, or exclude it", path: folder)
        }
        walk.add(entries, issues: issues)
    }

    /// The names besides index.html and index.htm that servers show in place of a folder's listing: Apache's
    /// and lighttpd's other defaults on Debian, and IIS's.
    static let otherIndexNames = ["index.xhtml", "default.htm", "Default.htm", "default.html"]

    /// Which file a folder's page (with no autoindex title) is, if it is the folder's index page, which servers
    /// show in place of a listing. That file answers HEAD itself (not by a redirect, as Go's server redirects
    /// `…/index.html` to its folder) with the page's ETag or the page's length. Asked of `index.html` always; of
    /// `index.htm` too (nginx, Apache and Python's http.server show it) when the page came as a file from disk
    /// does, with a Last-Modified or an ETag; of `otherIndexNames` only with an ETag (IIS, lighttpd), so that a
    /// listing a server writes costs one HEAD, or two with a Last-Modified (Go's). Any other answer says no, a
    /// server error at once (no retries: the folder's own page has just listed).
    private func indexFile(of folderURL: String, page: CurlEasy.Response, easy: CurlEasy, walk: ListingWalk.Scope) throws -> String? {
        let tag = page.headers["etag"]
        let fromDisk = tag != nil || page.headers["last-modified"] != nil
        let names = ["index.html"] + (fromDisk ? ["index.htm"] : []) + (tag != nil ? Self.otherIndexNames : [])
        for name in names {
            let response = try client.send(with: easy, cancelled: { walk.isStopped }, followRedirects: false, retriesServerErrors: false, makeRequest: {
                CurlEasy.Request(method: "HEAD", url: folderURL + name)
            })
            guard response.status == 200 else { continue }
            // Either: a server behind a balancer may give the same file another ETag on another backend.
            if (tag != nil && response.headers["etag"] == tag) || response.headers["content-length"] == String(page.body.count) { return name }
        }
        return nil
    }

    private func head(_ file: RelativePath, easy: CurlEasy, walk: ListingWalk.Scope) throws {
        let url = client.urls.url(for: file, folder: false)
        var response = try client.send(with: easy, cancelled: { walk.isStopped }, makeRequest: {
            CurlEasy.Request(method: "HEAD", url: url)
        })
        // A server that does not take HEAD (405, 501) answers the one-byte GET, whose headers tell the same.
        var rangeSize: Int64?
        if response.status == 405 || response.status == 501 {
            (rangeSize, response) = try sizeFromRange(url, file: file, easy: easy, walk: walk)
        }
        guard response.status == 200 || rangeSize != nil else { throw client.error(status: response.status, url: url, path: file) }
        // A file that redirects to a web page (a login page, a "file not available" page) would be listed with that
        // page's size and time, fetched, and installed in its place; so it cannot be listed, which keeps the
        // copy here and holds back removals. A page of its own (an .html file) may redirect to another page.
        if let target = response.redirectedTo, response.headers["content-type"]?.lowercased().hasPrefix("text/html") == true,
           !["html", "htm", "xhtml"].contains((String(decoding: file.name, as: UTF8.self) as NSString).pathExtension.lowercased()) {
            throw SourceError(.protocolViolation, "\(url) redirects to \(target), a web page (a login page?), not the file; nothing is fetched or removed in its place until the server sends the file: check username and password-file or token-file, or exclude it", path: file)
        }
        guard let size = try rangeSize ?? response.headers["content-length"].flatMap({ Int64($0) }) ?? sizeFromRange(url, file: file, easy: easy, walk: walk).size else {
            throw SourceError(.protocolViolation, "HEAD and a one-byte GET of \(url) gave no size; cannot tell the file's size", path: file)
        }
        let mtime = response.headers["last-modified"].flatMap(HTTPDate.parse).map { FileTime(seconds: $0) } ?? .unknown
        walk.add([Entry(path: file, kind: .file, size: size, mtime: mtime, precision: .second, validator: EntityTag.normalized(response.headers["etag"]))])
    }

    /// Some servers (Apache for an empty file) answer HEAD without Content-Length; a GET of the first byte tells
    /// the size in its Content-Range (`bytes 0-0/N`, or `bytes */0` with 416 for an empty file). A server that
    /// ignores Range answers 200 with the whole file: its Content-Length is the size, and the body is not read.
    /// And the answer, whose headers (Last-Modified, ETag, Content-Type) stand for a HEAD's.
    private func sizeFromRange(_ url: String, file: RelativePath, easy: CurlEasy, walk: ListingWalk.Scope) throws -> (size: Int64?, response: CurlEasy.Response) {
        let response: CurlEasy.Response
        do {
            response = try client.send(with: easy, cancelled: { walk.isStopped }, makeRequest: {
                CurlEasy.Request(method: "GET", url: url, headers: ["Range: bytes=0-0"], bodyLimit: 1)
            }, decide: { status, headers in
                // Why stop here: the whole file follows a 200, which the listing must not download (nor refuse
                // as a body over its one-byte bound, which made the file unreadable and held back every removal).
                if status == 200 { throw WholeFileAnswered(headers: headers) }
                return false
            })
        } catch let answered as WholeFileAnswered {
            guard let length = answered.headers["content-length"].flatMap({ Int64($0) }) else {
                throw SourceError(.protocolViolation, "\(url) states no size: HEAD gave no Content-Length, and a one-byte GET was answered with the whole file and no Content-Length either; nothing is removed until the server states it", path: file)
            }
            return (length, CurlEasy.Response(status: 200, headers: answered.headers, body: []))
        }
        switch response.status {
        case 206, 416: return (response.headers["content-range"].flatMap { $0.split(separator: "/").last }.flatMap { Int64($0) }, response)
        default: throw client.error(status: response.status, url: url, path: file)
        }
    }

    /// The one-byte GET was answered with the whole file (the server ignores Range): stops that transfer before
    /// its body, with the headers it gave.
    private struct WholeFileAnswered: Error {
        var headers: HTTPHeaders
    }
}
