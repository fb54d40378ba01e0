import Foundation
import Glibc

/// A real nginx on 127.0.0.1 with its own config, logs and pid file in a temp folder, serving one folder as
/// WebDAV (`/dav/`, dav_ext module), HTML autoindex (`/html/`), JSON autoindex (`/json/`), a slow copy for
/// kill-mid-download tests (`/slow/`, 256 KiB/s), a Basic-auth WebDAV copy (`/private/`, user `folio`), and
/// HTML autoindex copies whose files state their size late or never: `/norange/` ignores Range and answers HEAD
/// without Content-Length (its GETs have one), `/nosize/` ignores Range and never sends Content-Length (nginx's
/// SSI filter drops both, as a server that builds each page would), and an HTML autoindex that answers PROPFIND
/// with 404, as plain servers answer methods they do not know (`/nodav/`).
/// In every location, a path that contains `error-500` answers HTTP 500, as a failing script would, and one that
/// contains `login-required/` is redirected to `/html/login.html` (a file the test writes), as a login portal does.
/// Optionally over TLS with a self-signed certificate (`certificatePath` is the CA to trust), and then optionally
/// speaking HTTP/2 (offered by ALPN, as most HTTPS hosts do).
public final class NginxServer: @unchecked Sendable {
    // Why @unchecked Sendable: a test drives one server from one method; start()/stop() run in sequence.
    public let folder: TemporaryDirectory
    /// The folder every location serves.
    public let servedRoot: String
    public let port: Int
    public let tls: Bool
    /// Whether the TLS listener offers HTTP/2.
    public let http2: Bool
    /// The self-signed certificate (PEM) when `tls`.
    public private(set) var certificatePath: String?
    /// The password of user `folio` on `/private/`.
    public let password = "s3cret-Pa55"
    public var errorLog: String { folder.path("error.log") }
    public var accessLog: String { folder.path("access.log") }
    private var pid: Int32?

    /// `certificateName`: the DNS name the TLS certificate is issued for, in place of 127.0.0.1 (a certificate
    /// for another name than the URL's). `http2` needs `tls` (nginx 1.22 speaks HTTP/2 on plain ports only to
    /// clients that know it beforehand, which no user's URL says).
    public init(tls: Bool = false, http2: Bool = false, certificateName: String? = nil) throws {
        precondition(tls || !http2, "HTTP/2 is offered over TLS only")
        folder = TemporaryDirectory("nginx")
        servedRoot = folder.path("root")
        FixtureTree.makeFolder(folder.path, "root")
        FixtureTree.makeFolder(folder.path, "tmp")
        chmod(folder.path, 0o755)
        port = try LoopbackServer.freePort()
        self.tls = tls
        self.http2 = http2
        if tls { certificatePath = try LoopbackServer.makeCertificate(in: folder.path, name: certificateName).certificate }
        let hash = try LoopbackServer.run("/usr/bin/openssl", ["passwd", "-apr1", password]).trimmingCharacters(in: .whitespacesAndNewlines)
        try "folio:\(hash)\n".write(toFile: folder.path("htpasswd"), atomically: false, encoding: .utf8)
        try writeConfig()
        try start()
    }

    /// `http(s)://127.0.0.1:port/<location>/<path below the served root>`, percent-encoded.
    public func url(_ location: String, _ relative: String = "") -> String {
        "\(tls ? "https" : "http")://127.0.0.1:\(port)/\(location)/" + LoopbackServer.encodePath(relative)
    }

    /// The URL of a local path inside `servedRoot` (what conformance's `makeSource` receives).
    public func url(_ location: String, localPath: String) -> String {
        url(location, String(localPath.dropFirst(servedRoot.count).drop(while: { $0 == "/" })))
    }

    public func start() throws {
        guard pid == nil else { return }
        try? FileManager.default.removeItem(atPath: folder.path("nginx.pid"))
        try LoopbackServer.run("/usr/sbin/nginx", ["-c", folder.path("nginx.conf"), "-p", folder.path, "-e", errorLog])
        pid = LoopbackServer.pid(from: folder.path("nginx.pid"))
        try LoopbackServer.waitForPort(port, name: "nginx", log: errorLog)
    }

    /// Stops nginx and its workers: SIGTERM is nginx's fast shutdown (open connections are dropped), SIGKILL a crash.
    public func stop(signal: Int32 = SIGTERM) {
        guard let pid else { return }
        LoopbackServer.stop(pid: pid, signal: signal)
        self.pid = nil
    }

    /// How many requests the access log holds whose request line contains `text`.
    public func requests(containing text: String) -> [String] {
        ((try? String(contentsOfFile: accessLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init).filter { $0.contains(text) }
    }

    deinit { stop() }

    private func writeConfig() throws {
        let root = servedRoot
        let listen = tls ? "listen 127.0.0.1:\(port) ssl\(http2 ? " http2" : "");\n    ssl_certificate \(folder.path("cert.pem"));\n    ssl_certificate_key \(folder.path("key.pem"));"
                         : "listen 127.0.0.1:\(port);"
        let config = """
            load_module /usr/lib/nginx/modules/ngx_http_dav_ext_module.so;
            worker_processes 2;
            pid \(folder.path("nginx.pid"));
            error_log \(errorLog);
            \(getuid() == 0 ? "user root;" : "")
            events { worker_connections 256; }
            http {
              log_format folio '$request_method $request_uri $status $body_bytes_sent range=$http_range if_range=$http_if_range depth=$http_depth protocol=$server_protocol connection=$pid:$connection';
              access_log \(accessLog) folio;
              client_body_temp_path \(folder.path("tmp/body"));
              proxy_temp_path \(folder.path("tmp/proxy"));
              fastcgi_temp_path \(folder.path("tmp/fastcgi"));
              uwsgi_temp_path \(folder.path("tmp/uwsgi"));
              scgi_temp_path \(folder.path("tmp/scgi"));
              types { text/plain txt; application/octet-stream bin; }
              default_type application/octet-stream;
              server {
                \(listen)
                location ~ error-500 { return 500; }
                location ~ login-required/ { return 302 /html/login.html; }
                location /dav/ { alias \(root)/; dav_ext_methods PROPFIND OPTIONS; }
                location /html/ { alias \(root)/; autoindex on; index index.html index.htm Default.htm; }
                location /json/ { alias \(root)/; autoindex on; autoindex_format json; }
                location /norange/ {
                  alias \(root)/; autoindex on; max_ranges 0;
                  if ($request_method = HEAD) { rewrite ^/norange/(.*)$ /nosize/$1 last; }
                }
                location /nosize/ { alias \(root)/; autoindex on; ssi on; ssi_types *; ssi_last_modified on; }
                location /nodav/ { alias \(root)/; autoindex on; if ($request_method = PROPFIND) { return 404; } }
                location /slow/ { alias \(root)/; dav_ext_methods PROPFIND OPTIONS; limit_rate 256k; }
                location /private/ {
                  alias \(root)/; dav_ext_methods PROPFIND OPTIONS;
                  auth_basic "folio"; auth_basic_user_file \(folder.path("htpasswd"));
                }
              }
            }

            """
        try config.write(toFile: folder.path("nginx.conf"), atomically: false, encoding: .utf8)
    }
}
