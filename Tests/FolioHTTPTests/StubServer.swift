import FolioTestSupport
import Foundation
import Glibc

/// A small Python (stdlib http.server) WebDAV stub on 127.0.0.1 for what real servers will not do on demand:
/// 429 with Retry-After, hostile multistatus bodies, truncated bodies, a cross-origin redirect, an ETag that
/// changes between listing and download. Each scenario lives under its own folder; requests are logged as JSON
/// lines for assertions.
final class StubServer: @unchecked Sendable {
    // Why @unchecked Sendable: one test drives one stub from one method.
    let folder: TemporaryDirectory
    let port: Int
    private var pid: Int32?
    var logPath: String { folder.path("requests.jsonl") }

    /// The size of `big.bin` in the truncated and resume scenarios.
    static let bigSize = 100_000

    init() throws {
        folder = TemporaryDirectory("stub")
        port = try LoopbackServer.freePort()
        try Self.script.write(toFile: folder.path("stub.py"), atomically: false, encoding: .utf8)
        let python = FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") ? "/usr/bin/python3" : "python3"
        let spawned = try LoopbackServer.spawn(python, [folder.path("stub.py"), String(port), logPath], output: folder.path("stub.log"))
        pid = spawned
        try LoopbackServer.waitForPort(port, name: "stub server", log: folder.path("stub.log"))
    }

    func url(_ scenario: String) -> String { "http://127.0.0.1:\(port)/\(scenario)/" }

    /// The requests received so far, as logged: method, path, range, if_range, time.
    var requests: [[String: Any]] {
        ((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
    }

    deinit {
        if let pid {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
    }

    static let script = #"""
import json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT = int(sys.argv[1]); LOG = sys.argv[2]
BIG = bytes(i % 251 for i in range(100000))
lock = threading.Lock()
counts = {}

def multistatus(folder, children, prolog=""):
    parts = [prolog or '<?xml version="1.0" encoding="utf-8"?>', '<D:multistatus xmlns:D="DAV:">']
    parts.append('<D:response><D:href>%s</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>'
                 '<D:getlastmodified>Sun, 22 Nov 2026 04:00:00 GMT</D:getlastmodified></D:prop>'
                 '<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>' % folder)
    for href, size, etag in children:
        parts.append('<D:response><D:href>%s</D:href><D:propstat><D:prop><D:resourcetype/>'
                     '<D:getcontentlength>%d</D:getcontentlength><D:getetag>%s</D:getetag>'
                     '<D:getlastmodified>Sun, 22 Nov 2026 04:00:00 GMT</D:getlastmodified></D:prop>'
                     '<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>' % (href, size, etag))
    parts.append('</D:multistatus>')
    return "\n".join(parts).encode()

LISTINGS = {
    "ratelimit": [("/ratelimit/f.txt", 5, '"r1"')],
    "wait-long": [("/wait-long/f.txt", 5, '"w1"')],
    "bare-etag": [("/bare-etag/f.txt", 5, '4358590-1795800900-6')],
    "torn": [("/torn/f.bin", 300000, '"t1"')],
    "changing": [("/changing/f.txt", 5, '"v1"')],
    "truncated": [("/truncated/big.bin", 100000, '"t1"')],
    "resume": [("/resume/big.bin", 100000, '"r1"')],
    "hostile-dotdot": [("/hostile-dotdot/../escape.txt", 5, '"x"')],
    "hostile-encoded": [("/hostile-encoded/%2e%2e/%2E%2E/escape.txt", 5, '"x"')],
    "hostile-slash": [("/hostile-slash/a%2fb.txt", 5, '"x"')],
    "hostile-foreign": [("http://evil.example/hostile-foreign/x.txt", 5, '"x"')],
    "hostile-outside": [("/elsewhere/x.txt", 5, '"x"')],
    "hostile-dup": [("/hostile-dup/f.txt", 5, '"a"'), ("/hostile-dup/f%2Etxt", 5, '"b"')],
    "ratelimit-header": [("/ratelimit-header/f.txt", 5, '"h1"')],
    "bearer": [("/bearer/f.txt", 5, '"b1"')],
    "trickle": [("/trickle/t.bin", 100, '"t"')],
    "batch": [("/batch/%s.txt" % name, 6, '"%s1"' % name) for name in "abcdef"],
}
TOKEN = "Bearer tok-123"

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *args): pass

    def record(self):
        with lock:
            with open(LOG, "a") as f:
                f.write(json.dumps({"method": self.command, "path": self.path, "range": self.headers.get("Range"),
                                    "if_range": self.headers.get("If-Range"), "depth": self.headers.get("Depth"),
                                    "authorized": self.headers.get("Authorization") == TOKEN,
                                    "time": time.time()}) + "\n")
            key = (self.command, self.path)
            counts[key] = counts.get(key, 0) + 1
            return counts[key]

    def send(self, status, body=b"", headers=()):
        self.send_response(status)
        for k, v in headers: self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD": self.wfile.write(body)

    def do_OPTIONS(self):
        self.record()
        self.send(200, headers=[("DAV", "1")])

    def do_PROPFIND(self):
        n = self.record()
        length = int(self.headers.get("Content-Length", "0"))
        if length: self.rfile.read(length)
        scenario = self.path.strip("/").split("/")[0]
        if scenario == "bearer" and self.headers.get("Authorization") != TOKEN:
            return self.send(401, b"who?", [("WWW-Authenticate", 'Bearer realm="stub"')])
        if scenario == "hangup":
            # Closes the connection without a word, as a TLS server does when given plain HTTP.
            self.close_connection = True
            return
        if scenario == "silent":
            # Reads the request and answers nothing, for longer than any test's timeout.
            time.sleep(8)
            self.close_connection = True
            return
        if scenario == "ratelimit" and n == 1:
            return self.send(429, b"slow down", [("Retry-After", "1")])
        if scenario == "endless-error": return self.endless_error()
        if self.headers.get("Depth") == "infinity":
            return self.send(403, b"no infinity")
        if scenario == "redirect":
            return self.send(301, b"", [("Location", "http://localhost:%d/elsewhere/" % PORT)])
        if scenario in ("forbidden-sub", "forbidden-root") and (scenario == "forbidden-root" or self.path.endswith("/private/")):
            # lighttpd's answer for a folder it may not read: 207, the folder's own 403, no children.
            body = ('<?xml version="1.0" encoding="utf-8"?>\n<D:multistatus xmlns:D="DAV:">\n<D:response>\n<D:href>%s</D:href>\n'
                    '<D:propstat>\n<D:status>HTTP/1.1 403 Forbidden</D:status>\n</D:propstat>\n</D:response>\n</D:multistatus>\n' % self.path)
            return self.send(207, body.encode(), [("Content-Type", "application/xml")])
        if scenario == "forbidden-sub":
            body = multistatus("/forbidden-sub/", [("/forbidden-sub/a.txt", 5, '"a"')]).replace(b"</D:multistatus>",
                b'<D:response><D:href>/forbidden-sub/private/</D:href><D:propstat><D:prop><D:resourcetype><D:collection/></D:resourcetype>'
                b'</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>')
            return self.send(207, body, [("Content-Type", "application/xml")])
        if scenario == "hostile-entity":
            body = ('<?xml version="1.0"?>\n<!DOCTYPE m [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>\n'
                    '<D:multistatus xmlns:D="DAV:"><D:response><D:href>/hostile-entity/&xxe;</D:href>'
                    '<D:propstat><D:prop><D:resourcetype/><D:getcontentlength>5</D:getcontentlength></D:prop>'
                    '<D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response></D:multistatus>').encode()
            return self.send(207, body, [("Content-Type", "application/xml")])
        if scenario in ("index-badlink", "range-overrun", "go-listing", "welcome-sub", "login-redirect", "busy-file", "no-head", "unversioned", "bad-request"):
            return self.send(405, b"no WebDAV here")
        if scenario == "weak-etag":
            # Apache's way: a file less than a second old has its tag marked weak, the same tag strong later.
            tag = 'W/"k1"' if n == 1 else '"k1"'
            return self.send(207, multistatus("/weak-etag/", [("/weak-etag/f.txt", 5, tag)]), [("Content-Type", "application/xml")])
        if scenario == "far-future":
            body = multistatus("/far-future/", [("/far-future/far.txt", 5, '"f1"')]).replace(b"Sun, 22 Nov 2026 04:00:00 GMT", b"Sat, 01 Jan 2400 00:00:00 GMT")
            return self.send(207, body, [("Content-Type", "application/xml")])
        if scenario not in LISTINGS:
            return self.send(404, b"not found")
        limits = [("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "1")] if scenario == "ratelimit-header" else []
        self.send(207, multistatus("/%s/" % scenario, LISTINGS[scenario]), [("Content-Type", "application/xml")] + limits)

    def do_HEAD(self): self.do_GET()

    def endless_error(self):
        # An error page without end: no length, the connection never closed by the server.
        self.send_response(500)
        self.end_headers()
        try:
            while True: self.wfile.write(b"<p>error</p>" * 1000)
        except (BrokenPipeError, ConnectionResetError):
            return

    def batch(self, n):
        # Six small files fetched as one batch: b refuses once (429), c has moved (302 within the origin),
        # d drops the connection once mid-body; the rest answer at once.
        name = self.path.rsplit("/", 1)[1][0]
        headers = [("ETag", '"%s1"' % name), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")]
        if name == "b" and n == 1:
            return self.send(429, b"slow down", [("Retry-After", "1")])
        if name == "c" and not self.path.startswith("/batch/moved/"):
            return self.send(302, b"", [("Location", "/batch/moved/c.txt")])
        if name == "d" and n == 1:
            self.send_response(200)
            for k, v in headers: self.send_header(k, v)
            self.send_header("Content-Length", "6")
            self.end_headers()
            self.wfile.write(b"dd")
            self.wfile.flush()
            self.close_connection = True
            return
        self.send(200, (name * 5 + "\n").encode(), headers)

    def do_GET(self):
        n = self.record()
        scenario = self.path.strip("/").split("/")[0]
        if scenario == "endless-error": return self.endless_error()
        if scenario == "ratelimit":
            return self.send(200, b"hello", [("ETag", '"r1"'), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "far-future":
            return self.send(200, b"hello", [("ETag", '"f1"'), ("Last-Modified", "Sat, 01 Jan 2400 00:00:00 GMT")])
        if scenario == "torn":
            # The file is rewritten in place while its body streams: the GET's headers are the old version's,
            # a HEAD after it the new one's.
            self.send_response(200)
            self.send_header("ETag", '"t2"' if self.command == "HEAD" else '"t1"')
            self.send_header("Content-Length", "300000")
            self.end_headers()
            if self.command == "HEAD": return
            for _ in range(3):
                self.wfile.write(bytes(100000))
                self.wfile.flush()
                time.sleep(0.6)
            return
        if scenario == "bare-etag":
            # wsgidav's way: the tag bare in getetag, quoted in the ETag header.
            return self.send(200, b"hello", [("ETag", '"4358590-1795800900-6"'), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "weak-etag":
            return self.send(200, b"hello", [("ETag", 'W/"k1"' if n == 1 else '"k1"'), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "wait-long":
            # The file's first GET is asked to wait 6 s: long enough for the run to say so.
            if n == 1: return self.send(429, b"slow down", [("Retry-After", "6")])
            return self.send(200, b"hello", [("ETag", '"w1"'), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "bearer" and self.headers.get("Authorization") != TOKEN:
            return self.send(401, b"who?", [("WWW-Authenticate", 'Bearer realm="stub"')])
        if scenario in ("ratelimit-header", "bearer"):
            etag = LISTINGS[scenario][0][2]
            return self.send(200, b"hello", [("ETag", etag), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "trickle":
            # One byte every two seconds: slower than any stall timeout Folio accepts.
            self.send_response(200)
            self.send_header("ETag", '"t"')
            self.send_header("Content-Length", "100")
            self.end_headers()
            try:
                for _ in range(100):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(2)
            except OSError:
                pass
            self.close_connection = True
            return
        if scenario == "batch":
            return self.batch(n)
        if scenario == "index-badlink":
            # A plain index page (no WebDAV) with a child's link Folio cannot read, an encoded /, beside a plain one.
            if self.path == "/index-badlink/":
                page = b'<pre><a href="../">../</a>\n<a href="ok.txt">ok.txt</a>\n<a href="a%2Fb.txt">a/b.txt</a>\n</pre>'
                return self.send(200, page, [("Content-Type", "text/html")])
            return self.send(200, b"hello", [("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "go-listing":
            # A listing with no title, as Go's http.FileServer writes it, which redirects .../index.html to its folder.
            if self.path == "/go-listing/":
                return self.send(200, b'<pre>\n<a href="a.txt">a.txt</a>\n</pre>\n', [("Content-Type", "text/html")])
            if self.path == "/go-listing/index.html":
                return self.send(301, b"", [("Location", "./")])
            return self.send(200, b"hello", [("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "no-head":
            # An index page without sizes, from a server that answers HEAD with 405 and GET (Range too) as usual.
            if self.path == "/no-head/":
                page = b'<html><head><title>Index of /no-head/</title></head><body><a href="a.txt">a.txt</a></body></html>'
                return self.send(200, page, [("Content-Type", "text/html")])
            if self.command == "HEAD":
                return self.send(405, b"", [("Allow", "GET")])
            modified = ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")
            if self.headers.get("Range") == "bytes=0-0":
                return self.send(206, b"h", [("Content-Range", "bytes 0-0/5"), modified])
            return self.send(200, b"hello", [modified])
        if scenario == "busy-file":
            # An index page without sizes (HEAD asks), whose b.txt answers 503 every time, at once.
            if self.path == "/busy-file/":
                page = b'<html><head><title>Index of /busy-file/</title></head><body><a href="a.txt">a.txt</a> <a href="b.txt">b.txt</a></body></html>'
                return self.send(200, page, [("Content-Type", "text/html")])
            if self.path == "/busy-file/b.txt":
                return self.send(503, b"busy", [("Retry-After", "0")])
            return self.send(200, b"hello", [("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario == "login-redirect":
            # An index page whose b.txt (no size or time on the page: HEAD asks) redirects to a login page.
            if self.path == "/login-redirect/":
                page = b'<html><head><title>Index of /login-redirect/</title></head><body><a href="b.txt">b.txt</a></body></html>'
                return self.send(200, page, [("Content-Type", "text/html")])
            if self.path == "/login-redirect/b.txt":
                return self.send(302, b"", [("Location", "/login-redirect/login.html")])
            return self.send(200, b'<html><title>Sign in</title><input type="password"></html>', [("Content-Type", "text/html")])
        if scenario == "bad-request":
            # lighttpd's answer for a name it lists but cannot serve (not UTF-8).
            if self.path == "/bad-request/":
                return self.send(200, b'<html><head><title>Index of /bad-request/</title></head><body><a href="caf%E9.txt">caf\xe9.txt</a></body></html>',
                                 [("Content-Type", "text/html")])
            return self.send(400, b"bad request")
        if scenario == "unversioned":
            # lighttpd without mimetype.assign: files come with neither Last-Modified nor ETag.
            if self.path == "/unversioned/":
                return self.send(200, b'<html><head><title>Index of /unversioned/</title></head><body><a href="doc.txt">doc.txt</a></body></html>',
                                 [("Content-Type", "text/html")])
            return self.send(200, b"version-1\n")
        if scenario == "welcome-sub":
            # A listing whose folder "sub" answers with an application's welcome page (no index title, no link
            # into the folder), and whose folder "empty" is an empty folder as Go's http.FileServer lists it.
            if self.path == "/welcome-sub/":
                page = (b'<html><head><title>Index of /welcome-sub/</title></head><body><a href="sub/">sub/</a> <a href="empty/">empty/</a>'
                        b' <a href="was-a-file/">was-a-file/</a> <a href="untyped/">untyped/</a></body></html>')
                return self.send(200, page, [("Content-Type", "text/html")])
            if self.path == "/welcome-sub/was-a-file/":
                # lighttpd, a moment after a file was replaced by a folder of its name: the file's old bytes.
                return self.send(200, b"old file bytes\n", [("Content-Type", "application/octet-stream")])
            if self.path == "/welcome-sub/untyped/":
                # A listing sent without a content type is still read as one.
                return self.send(200, b'<pre><a href="../">../</a>\n<a href="x.txt">x.txt</a> 5\n</pre>\n')
            if self.path == "/welcome-sub/sub/":
                page = b'<html><head><title>Welcome to our site</title></head><body><a href="https://example.org/">home</a></body></html>'
                return self.send(200, page, [("Content-Type", "text/html")])
            if self.path == "/welcome-sub/empty/":
                return self.send(200, b'<pre>\n</pre>\n', [("Content-Type", "text/html")])
            if self.path == "/welcome-sub/untyped/x.txt":
                return self.send(200, b"hello", [("ETag", '"x"'), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
            return self.send(404, b"not found")
        if scenario == "range-overrun":
            # A plain index page whose file gives HEAD no size, and answers the one-byte GET with two bytes.
            if self.path == "/range-overrun/":
                return self.send(200, b'<pre><a href="f.txt">f.txt</a>\n</pre>', [("Content-Type", "text/html")])
            if self.command == "HEAD":
                self.send_response(200)
                self.end_headers()
                return
            return self.send(206, b"he", [("Content-Range", "bytes 0-1/5")])
        if scenario == "changing":
            return self.send(200, b"hello", [("ETag", '"v2"'), ("Last-Modified", "Sun, 22 Nov 2026 04:00:00 GMT")])
        if scenario in ("truncated", "resume"):
            etag = '"t1"' if scenario == "truncated" else '"r1"'
            rng = self.headers.get("Range")
            if scenario == "resume" and rng and self.headers.get("If-Range") == etag:
                start = int(rng.split("=")[1].rstrip("-"))
                body = BIG[start:]
                self.send_response(206)
                self.send_header("ETag", etag)
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(BIG) - 1, len(BIG)))
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            # The whole file is announced; 40,000 bytes come, then the connection drops.
            self.send_response(200)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(BIG)))
            self.end_headers()
            self.wfile.write(BIG[:40000])
            self.wfile.flush()
            self.close_connection = True
            return
        self.send(404, b"not found")

ThreadingHTTPServer(("127.0.0.1", PORT), Handler).serve_forever()
"""#
}
