@testable import FolioHTTP
import FolioCore
import XCTest

/// The pure parts of listing: HTTP dates, index pages, href checks.
final class ListingParserTests: XCTestCase {
    func testHTTPDateForms() {
        XCTAssertEqual(HTTPDate.parse("Sun, 06 Nov 1994 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sunday, 06-Nov-94 08:49:37 GMT"), 784_111_777)
        XCTAssertEqual(HTTPDate.parse("Sun Nov  6 08:49:37 1994"), 784_111_777)
        XCTAssertNil(HTTPDate.parse("yesterday"))
        XCTAssertEqual(HTTPDate.parse("Sun, 06 NOV 1994 08:49:37 GMT"), 784_111_777, "month names in any case")
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:49 GMT"), "a clock without seconds")
        XCTAssertNil(HTTPDate.parse("Sun, 32 Nov 1994 08:49:37 GMT"), "day 32")
        XCTAssertNil(HTTPDate.parse("Sun, 06 Nov 1994 08:x9:37 GMT"), "a letter in the clock")
        XCTAssertEqual(HTTPDate.format(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT")
        XCTAssertEqual(HTTPDate.format(1_700_000_000), "Tue, 14 Nov 2023 22:13:20 GMT")
    }

    func testNginxAndApacheHTMLLinks() {
        let nginx = """
            <html><body><h1>Index of /x/</h1><hr><pre><a href="../">../</a>
            <a href="sub/">sub/</a>                 22-Nov-2026 04:45       -
            <a href="100%25%20%231%20%26more%3F.txt">100% #1 &amp;more?.txt</a>   22-Nov-2026 04:45    9
            </pre></body></html>
            """
        XCTAssertEqual(IndexPageParser.parseHTML(Array(nginx.utf8)).map(\.href), ["../", "sub/", "100%25%20%231%20%26more%3F.txt"])
        let apache = """
            <ul><li><a href="/"> Parent Directory</a></li>
            <li><a href="?C=N;O=D">Name</a></li>
            <li><A HREF='a&amp;b.txt'> a&amp;b.txt</a></li>
            </ul>
            """
        let links = IndexPageParser.parseHTML(Array(apache.utf8))
        XCTAssertEqual(links.map(\.href), ["/", "a&b.txt"])
        XCTAssertEqual(links.map(\.isFolder), [true, false])
    }

    /// Debian's Apache shows a folder's HEADER.html above its listing and README.html below it; their links are
    /// not entries (a README's link to `docs/` made a folder that does not exist, and failed every run). Three
    /// layouts: HTMLTable, FancyIndexing's `<pre>`, and the plain list.
    func testApacheHeaderAndReadmeLinksAreNotEntries() {
        let header = #"<h2>Release files</h2><p>See <a href="old-release.tar.gz">the old release</a>.</p>"#
        let readme = #"<p>Docs are in <a href="docs/">docs</a>; start with <a href="file1.txt">file1.txt</a>.</p><address>Apache/2.4.62 (Debian)</address>"#
        let pages = [
            #"<table><tr><th><a href="?C=N;O=D">Name</a></th></tr><tr><td><a href="/r/">Parent Directory</a></td></tr><tr><td><a href="file1.txt">file1.txt</a></td></tr><tr><td><a href="sub/">sub/</a></td></tr></table>"#,
            #"<pre><a href="?C=N;O=D">Name</a> <a href="?C=M;O=A">Last modified</a><hr><a href="/r/">Parent Directory</a>  -\#n"#
                + #"<a href="file1.txt">file1.txt</a>  12-Jan-2026 10:00  1.2K\#n<a href="sub/">sub/</a>  12-Jan-2026 10:00  -\#n<hr></pre>"#,
            #"<ul><li><a href="/r/"> Parent Directory</a></li><li><a href="file1.txt"> file1.txt</a></li><li><a href="sub/"> sub/</a></li></ul>"#,
        ]
        for page in pages {
            let links = IndexPageParser.parseHTML(Array((header + page + readme).utf8))
            XCTAssertEqual(links.map(\.href), ["/r/", "file1.txt", "sub/"], page)
        }
    }

    func testNginxJSONIndex() throws {
        let json = #"[{ "name":"d", "type":"directory", "mtime":"Sun, 22 Nov 2026 04:45:58 GMT" }, { "name":"a b#.txt", "type":"file", "mtime":"Sun, 22 Nov 2026 04:45:58 GMT", "size":2 }, { "name":"l", "type":"other" }]"#
        let links = try IndexPageParser.parse(Array(json.utf8), contentType: "application/json")
        XCTAssertEqual(links.map(\.href), ["d/", "a%20b%23.txt"])
        XCTAssertEqual(links.map(\.size), [nil, 2])
    }

    /// nginx writes a name that is not UTF-8 into its JSON index raw; the line says so and what to do, not
    /// Swift's decoding error.
    func testAJSONIndexThatIsNotUTF8SaysSo() {
        let json = Array(#"[{ "name":"caf"#.utf8) + [0xE9] + Array(#".txt", "type":"file", "size":2 }]"#.utf8)
        XCTAssertThrowsError(try IndexPageParser.parse(json, contentType: "application/json")) { error in
            XCTAssertEqual("\(error)", "the JSON index is not UTF-8, as JSON must be (a name on the server is in another encoding); have the server list this folder as HTML (autoindex_format html) or over WebDAV")
        }
    }

    /// JSON that is not nginx's list of entries says how, in words: it showed the decoder's dump.
    func testAJSONIndexOfAnotherShapeSaysHowInWords() {
        let cases = [
            (#"{"files": []}"#, "it is not a list"),
            (#"[{"type":"file"}]"#, #"entry 1 has no "name""#),
            (#"[{"name":"a","type":"file","size":"big"}]"#, #"entry 1, its "size" is not what nginx writes"#),
            (#"[{"name":"a""#, "it is not valid JSON"),
        ]
        for (json, reason) in cases {
            XCTAssertThrowsError(try IndexPageParser.parse(Array(json.utf8), contentType: "application/json")) { error in
                XCTAssertEqual("\(error)", "the JSON index is not nginx's list of entries (\(reason)); have the server list this folder as nginx's autoindex does (HTML or JSON), or over WebDAV", json)
            }
        }
    }

    func testHrefChecks() {
        let urls = SourceURL(secure: false, host: "127.0.0.1", port: 8080, path: "/files/my dir")
        XCTAssertEqual(urls.url(for: .root, folder: true), "http://127.0.0.1:8080/files/my%20dir/")
        XCTAssertEqual(try urls.names(ofHref: "/files/my%20dir/a%23b/c.txt"), [Array("a#b".utf8), Array("c.txt".utf8)])
        XCTAssertEqual(try urls.names(ofHref: "http://127.0.0.1:8080/files/my%20dir/"), [])
        XCTAssertEqual(try urls.names(ofHref: "c.txt", base: urls.rootNames), [Array("c.txt".utf8)])
        XCTAssertEqual(try urls.names(ofHref: "/files/my%20dir/a:b/c"), [Array("a:b".utf8), Array("c".utf8)], "a colon is not a scheme")
        XCTAssertEqual(try urls.names(ofHref: "/files/my%20dir"), [], "the root, without its trailing slash")
        XCTAssertEqual(try urls.names(ofHref: "/files/my%20dir/d/"), [Array("d".utf8)], "a folder's trailing slash")
        XCTAssertEqual(try urls.names(ofHref: "", base: urls.rootNames + [Array("sub".utf8)]), [Array("sub".utf8)], "an empty link is its folder")
        let refused: [(String, SourceURL.HrefProblem)] = [
            ("/files/my%20dir/../x", .traversal), ("/files/my%20dir/%2E%2e/x", .traversal), ("/files/my%20dir//x", .traversal),
            ("/files/my%20dir/d//", .traversal), ("/", .outsideRoot), ("http://127.0.0.1:8080", .outsideRoot),
            ("http://127.0.0.1:8080//files/my%20dir/x", .traversal), ("/files/my%20dir/%2e/x", .traversal), ("/files/my%20dir/a%2Fb", .badEscape), ("/files/my%20dir/a%00b", .badEscape), ("/files/my%20dir/a%zz", .badEscape),
            ("http://127.0.0.1:8081/files/my%20dir/x", .foreignOrigin), ("https://127.0.0.1:8080/files/my%20dir/x", .foreignOrigin),
            ("//evil/x", .foreignOrigin), ("http://user@127.0.0.1:8080/files/my%20dir/x", .foreignOrigin),
            ("/files/other/x", .outsideRoot), ("/files/my%20dir/x?y", .queryOrFragment), ("/files/my%20dir/x#y", .queryOrFragment),
            ("/files/my%20dir/a://127.0.0.1:8081/x", .foreignOrigin),
            ("mailto:admin@example.org", .foreignOrigin), ("JavaScript:void(0)", .foreignOrigin), ("tel:+4930123", .foreignOrigin),
        ]
        for (href, problem) in refused {
            XCTAssertThrowsError(try urls.names(ofHref: href), href) { XCTAssertEqual("\($0)", "\(problem)", href) }
        }
    }

    /// Apache's `./12:30 notes.txt` names the child `12:30 notes.txt`; `..` stays refused, and a link shaped like a
    /// child's is told from the parent, sort and elsewhere links.
    func testDotSegmentsOfRelativeHrefs() {
        let urls = SourceURL(secure: false, host: "127.0.0.1", port: 8080, path: "/files")
        let base = urls.rootNames + [Array("sub".utf8)]
        XCTAssertEqual(IndexPageParser.parseHTML(Array(#"<li><a href="./12:30%20notes.txt"> 12:30 notes.txt</a></li>"#.utf8)).map(\.href), ["./12:30%20notes.txt"])
        XCTAssertEqual(try urls.names(ofHref: "./12:30%20notes.txt", base: base), [Array("sub".utf8), Array("12:30 notes.txt".utf8)])
        XCTAssertEqual(try urls.names(ofHref: "./d/", base: base), [Array("sub".utf8), Array("d".utf8)])
        XCTAssertEqual(try urls.names(ofHref: "./", base: base), [Array("sub".utf8)], "the folder itself")
        XCTAssertThrowsError(try urls.names(ofHref: "./../x", base: base)) { XCTAssertEqual("\($0)", "\(SourceURL.HrefProblem.traversal)") }
        XCTAssertThrowsError(try urls.names(ofHref: "a//b", base: base)) { XCTAssertEqual("\($0)", "\(SourceURL.HrefProblem.traversal)") }
        XCTAssertThrowsError(try urls.names(ofHref: "/files/sub/./x")) { XCTAssertEqual("\($0)", "\(SourceURL.HrefProblem.traversal)") }
        for href in ["a%2Fb.txt", "./a%zz", "d%00/", "%2e%2e/"] { XCTAssertTrue(SourceURL.looksLikeChild(href), href) }
        for href in ["../", "./", "/files/", "http://x/y", "a/b", "?C=N;O=D", "notes.html#usage", "get.php?id=3", "mailto:x@y", "javascript:go()"] {
            XCTAssertFalse(SourceURL.looksLikeChild(href), href)
        }
        XCTAssertTrue(SourceURL.looksLikeChild("12:30 notes.txt"), "a name with a colon, written bare by a page that does not escape it")
    }

    func testPropertyTextLosesOnlyXMLWhiteSpace() {
        XCTAssertEqual(MultistatusParser.trimmingXMLSpace(" \n\t\"e 1\"\r\n"), "\"e 1\"")
        XCTAssertEqual(MultistatusParser.trimmingXMLSpace("plain"), "plain")
        XCTAssertEqual(MultistatusParser.trimmingXMLSpace(" \n "), "")
        XCTAssertEqual(MultistatusParser.trimmingXMLSpace("\u{A0}x\u{A0}"), "\u{A0}x\u{A0}", "a no-break space is text in XML, not white space")
    }

    func testStatusCodeIsTheLinesSecondWord() {
        XCTAssertEqual(MultistatusParser.code(of: "HTTP/1.1 200 OK"), "200")
        XCTAssertEqual(MultistatusParser.code(of: "  HTTP/1.1   404  Not Found"), "404")
        XCTAssertEqual(MultistatusParser.code(of: "HTTP/1.1 207"), "207")
        XCTAssertEqual(MultistatusParser.code(of: "HTTP/1.1\t200 OK"), "OK", "words are separated by spaces only")
        XCTAssertNil(MultistatusParser.code(of: "HTTP/1.1 "))
        XCTAssertNil(MultistatusParser.code(of: ""))
    }

    func testMultistatusKeepsOnlyTheOKPropstat() throws {
        let body = """
            <?xml version="1.0"?><D:multistatus xmlns:D="DAV:" xmlns:lp1="DAV:"><D:response><D:href>/d/a.txt</D:href>
            <D:propstat><D:prop><lp1:resourcetype/><lp1:getcontentlength>4</lp1:getcontentlength><lp1:getetag>W/"4-x"</lp1:getetag></D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat>
            <D:propstat><D:prop><D:getlastmodified/></D:prop><D:status>HTTP/1.1 404 Not Found</D:status></D:propstat></D:response>
            <D:response><D:href>/d/gone</D:href><D:status>HTTP/1.1 404 Not Found</D:status></D:response></D:multistatus>
            """
        let responses = try MultistatusParser.parse(Array(body.utf8))
        XCTAssertEqual(responses.map(\.href), ["/d/a.txt", "/d/gone"])
        XCTAssertEqual(responses[0].contentLength, 4)
        XCTAssertEqual(responses[0].etag, "W/\"4-x\"")
        XCTAssertNil(responses[0].lastModified)
        XCTAssertTrue(responses[0].hasProperties)
        XCTAssertFalse(responses[1].hasProperties)
    }

    private func events(_ xml: String) throws -> [XMLScanner.Event] {
        var events: [XMLScanner.Event] = []
        try XMLScanner.scan(Array(xml.utf8)) { events.append($0) }
        return events
    }

    private func failure(_ xml: String) -> String {
        do {
            _ = try events(xml)
            return "no failure"
        } catch {
            return "\(error)"
        }
    }

    func testXMLNamespacesResolveByScopeWhateverThePrefix() throws {
        let xml = """
            <?xml version="1.0" encoding="utf-8"?>
            <!-- Apache writes lp1, IIS a default namespace -->
            <D:multistatus xmlns:D="DAV:"><r xmlns="DAV:"><lp1:x xmlns:lp1="DAV:"/><D:y xmlns:D="urn:other">t</D:y></r><D:z/></D:multistatus>
            """
        XCTAssertEqual(try events(xml), [
            .start(namespace: "DAV:", name: "multistatus"),
            .start(namespace: "DAV:", name: "r"),
            .start(namespace: "DAV:", name: "x"), .end(namespace: "DAV:", name: "x"),
            .start(namespace: "urn:other", name: "y"), .text("t"), .end(namespace: "urn:other", name: "y"),
            .end(namespace: "DAV:", name: "r"),
            .start(namespace: "DAV:", name: "z"), .end(namespace: "DAV:", name: "z"),
            .end(namespace: "DAV:", name: "multistatus"),
        ])
        XCTAssertEqual(try events(#"<D:a xmlns:D="DAV:"><D:b xmlns:D="urn:x"/></D:a>"#), [
            .start(namespace: "DAV:", name: "a"), .start(namespace: "urn:x", name: "b"), .end(namespace: "urn:x", name: "b"), .end(namespace: "DAV:", name: "a"),
        ], "a prefix declared again inside is that one, at once")
        XCTAssertEqual(try events(#"<a><b xmlns="urn:x"><c/></b><d/></a>"#), [
            .start(namespace: nil, name: "a"), .start(namespace: "urn:x", name: "b"), .start(namespace: "urn:x", name: "c"), .end(namespace: "urn:x", name: "c"),
            .end(namespace: "urn:x", name: "b"), .start(namespace: nil, name: "d"), .end(namespace: nil, name: "d"), .end(namespace: nil, name: "a"),
        ], "a default namespace declared inside, and gone after its element")
        XCTAssertEqual(try events("<a><b xmlns=''/></a>"), [
            .start(namespace: nil, name: "a"), .start(namespace: nil, name: "b"), .end(namespace: nil, name: "b"), .end(namespace: nil, name: "a"),
        ], "no namespace, and an empty default namespace undeclares it")
    }

    /// A hostile server's bodies whose reading took time in the square of their size: 40,000 nested elements each
    /// declaring a namespace (100 s), and an index page of 50,000 anchors without an href (minutes). Each is read
    /// in one pass now; the page's one real link is still found.
    func testBodiesBuiltToBeReadInSquareTimeAreReadInOnePass() throws {
        let depth = 40_000
        let xml = "<D:m xmlns:D=\"DAV:\">" + String(repeating: "<D:x xmlns:z=\"u\">", count: depth) + String(repeating: "</D:x>", count: depth) + "</D:m>"
        let read = try events(xml)
        XCTAssertEqual(read.count, 2 * depth + 2)
        XCTAssertEqual(read.last, .end(namespace: "DAV:", name: "m"))
        let page = "<title>Index of /</title>" + String(repeating: "<a name=x>", count: 50_000) + "<a href=\"f.txt\">f.txt</a>"
        XCTAssertEqual(IndexPageParser.parseHTML(Array(page.utf8)).map(\.href), ["f.txt"])
    }

    func testXMLTextDecodesReferencesAndCDATAOnly() throws {
        let xml = #"<a>&lt;&amp;&gt;&quot;&apos; &#233;&#x1F600;<![CDATA[<&amp;>]]>é</a>"#
        XCTAssertEqual(try events(xml).compactMap { if case let .text(t) = $0 { t } else { nil } }.joined(), #"<&>"' é😀<&amp;>é"#)
        XCTAssertEqual(try events("\u{FEFF}<a>x</a>\n"), [.start(namespace: nil, name: "a"), .text("x"), .end(namespace: nil, name: "a")], "a byte order mark and trailing white space")
        var latin1 = Array(#"<?xml version="1.0" encoding="ISO-8859-1"?><a>"#.utf8)
        latin1 += [0xE9, 0x20, 0xFF]
        latin1 += Array("</a>".utf8)
        var texts: [XMLScanner.Event] = []
        try XMLScanner.scan(latin1) { texts.append($0) }
        XCTAssertEqual(texts[1], .text("é ÿ"), "ISO-8859-1 is transcoded")
    }

    func testXMLThatIsNotWellFormedOrDeclaresADTDIsRefused() {
        XCTAssertEqual(failure("<a><b></a>"), "is not well-formed XML (</a> closes no open element at byte 6)")
        XCTAssertEqual(failure("<a><b>"), "is not well-formed XML (the body ends inside <b> at byte 6)")
        XCTAssertEqual(failure("<a>&xxe;</a>"), "is not well-formed XML (unknown reference &xxe; at byte 3)")
        XCTAssertEqual(failure("<a>&#0;</a>"), "is not well-formed XML (unknown reference &#0; at byte 3)")
        XCTAssertEqual(failure("<p:a/>"), "is not well-formed XML (undeclared namespace prefix p at byte 0)")
        XCTAssertEqual(failure("<a/><b/>"), "is not well-formed XML (a second root element at byte 4)")
        XCTAssertEqual(failure("x<a/>"), "is not well-formed XML (text outside the root element at byte 0)")
        XCTAssertEqual(failure("<a b=c/>"), "is not well-formed XML (an unquoted attribute value at byte 0)")
        XCTAssertEqual(failure(""), "is not well-formed XML (no root element at byte 0)")
        XCTAssertEqual(failure("<!-- never closed <a/>"), "is not well-formed XML (--> missing at byte 4)")
        XCTAssertEqual(failure(#"<?xml version="1.0"?><!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><a>&x;</a>"#),
                       "declares a DTD or entity (<!DOCTYPE); refused")
        XCTAssertEqual(failure(#"<?xml version="1.0" encoding="UTF-16"?><a/>"#), "is in encoding utf-16; Folio reads UTF-8 and ISO-8859-1")
        var invalid = Array("<a>".utf8)
        invalid += [0xC3, 0x28]
        invalid += Array("</a>".utf8)
        XCTAssertThrowsError(try XMLScanner.scan(invalid) { _ in }) { XCTAssertEqual("\($0)", "is not well-formed XML (invalid UTF-8 at byte 3)") }
        // A sequence cut short becomes one U+FFFD of its own length: refused by the bytes, not the count.
        let truncated: [UInt8] = [0xF0, 0x90, 0x80]
        for body in [Array("<a>".utf8) + truncated + Array("</a>".utf8), Array("<a><![CDATA[".utf8) + truncated + Array("]]></a>".utf8),
                     Array("<a>&amp;".utf8) + truncated + Array("</a>".utf8)] {
            XCTAssertThrowsError(try XMLScanner.scan(body) { _ in }) { XCTAssertEqual("\($0)", "is not well-formed XML (invalid UTF-8 at byte 3)") }
        }
        XCTAssertThrowsError(try XMLScanner.scan(Array(#"<a xmlns=""#.utf8) + [0xFF] + Array(#""/>"#.utf8)) { _ in }) {
            XCTAssertEqual("\($0)", "is not well-formed XML (invalid UTF-8 at byte 10)")
        }
        XCTAssertEqual(try events("<a>\u{FFFD}</a>"), [.start(namespace: nil, name: "a"), .text("\u{FFFD}"), .end(namespace: nil, name: "a")], "U+FFFD itself is text")
        XCTAssertEqual(try events("<a><![CDATA[]]></a>"), [.start(namespace: nil, name: "a"), .text(""), .end(namespace: nil, name: "a")])
        XCTAssertEqual(try events("<a><?pi x?>t</a>"), [.start(namespace: nil, name: "a"), .text("t"), .end(namespace: nil, name: "a")])
        XCTAssertEqual(failure("<a>x<"), "is not well-formed XML (an element without a name at byte 4)")
        XCTAssertEqual(failure("<a/><"), "is not well-formed XML (a second root element at byte 4)")
    }
}
