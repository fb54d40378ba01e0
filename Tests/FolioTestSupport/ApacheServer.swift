import Foundation
import Glibc

/// A real Apache httpd on 127.0.0.1 with its own ServerRoot, config, logs and pid file in a temp folder, serving
/// one folder as WebDAV (`/dav/`, mod_dav_fs; `/davinf/` also answers `Depth: infinity`), as an autoindex (`/index/`) and as Digest-protected WebDAV
/// (`/digest/`, user `folio`, realm `folio`), and as WebDAV whose root is public and whose `locked` folder needs
/// that Digest login (`/mixed/`). Workers run as www-data (Apache refuses root), so the served folder is
/// world-readable. `authLog` has each request's `Authorization` header. Optionally over TLS with a self-signed
/// certificate (`certificatePath` is the CA to trust), offering HTTP/2 (mod_http2), as Apache hosts with h2 do.
public final class ApacheServer: @unchecked Sendable {
    // Why @unchecked Sendable: a test drives one server from one method; start()/stop() run in sequence.
    public let folder: TemporaryDirectory
    public let servedRoot: String
    public let port: Int
    /// Whether it listens over TLS, offering HTTP/2 and HTTP/1.1.
    public let tls: Bool
    /// The self-signed certificate (PEM) when `tls`.
    public private(set) var certificatePath: String?
    public var errorLog: String { folder.path("error.log") }
    public var accessLog: String { folder.path("access.log") }
    /// One line per request: method, path, status and the `Authorization` header (`-` when none).
    public var authLog: String { folder.path("auth.log") }
    /// The Digest password of user `folio` on `/digest/`.
    public let password = "d1gest-Pa55"
    private var pid: Int32?

    public init(tls: Bool = false) throws {
        folder = TemporaryDirectory("apache")
        servedRoot = folder.path("root")
        FixtureTree.makeFolder(folder.path, "root")
        FixtureTree.makeFolder(folder.path, "lock")
        chmod(folder.path, 0o755)
        chmod(folder.path("lock"), 0o777)  // the DAV lock database is written by the www-data workers
        port = try LoopbackServer.freePort()
        self.tls = tls
        if tls {
            certificatePath = try LoopbackServer.makeCertificate(in: folder.path).certificate
            chmod(folder.path("key.pem"), 0o644)  // read by the www-data workers too
        }
        let hash = try LoopbackServer.run("python3", ["-c", "import hashlib; print(hashlib.md5(b'folio:folio:\(password)').hexdigest())"])
        try "folio:folio:\(hash.trimmingCharacters(in: .whitespacesAndNewlines))\n".write(toFile: folder.path("htdigest"), atomically: false, encoding: .utf8)
        try writeConfig()
        try start()
    }

    /// `http(s)://127.0.0.1:port/<location>/<path below the served root>`, percent-encoded.
    public func url(_ location: String, _ relative: String = "") -> String {
        "\(tls ? "https" : "http")://127.0.0.1:\(port)/\(location)/" + LoopbackServer.encodePath(relative)
    }

    /// The URL of a local path inside `servedRoot`.
    public func url(_ location: String, localPath: String) -> String {
        url(location, String(localPath.dropFirst(servedRoot.count).drop(while: { $0 == "/" })))
    }

    public func start() throws {
        guard pid == nil else { return }
        try? FileManager.default.removeItem(atPath: folder.path("httpd.pid"))
        try LoopbackServer.run("/usr/sbin/apache2", ["-f", folder.path("httpd.conf"), "-k", "start"])
        pid = LoopbackServer.pid(from: folder.path("httpd.pid"))
        try LoopbackServer.waitForPort(port, name: "apache2", log: errorLog)
    }

    public func stop(signal: Int32 = SIGTERM) {
        guard let pid else { return }
        LoopbackServer.stop(pid: pid, signal: signal)
        self.pid = nil
    }

    /// The access log lines (method, path, status, bytes, Depth header) that contain `text`.
    public func requests(containing text: String) -> [String] {
        ((try? String(contentsOfFile: accessLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init).filter { $0.contains(text) }
    }

    deinit { stop() }

    private func writeConfig() throws {
        let modules = "/usr/lib/apache2/modules"
        let loads = (["mpm_event", "authz_core", "authz_user", "authn_core", "authn_file", "auth_digest", "alias", "autoindex", "dav", "dav_fs", "mime"]
                     + (tls ? ["socache_shmcb", "ssl", "http2"] : []))
            .map { "LoadModule \($0)_module \(modules)/mod_\($0).so" }.joined(separator: "\n")
        let digestAuth = """
              AuthType Digest
              AuthName "folio"
              AuthDigestProvider file
              AuthUserFile \(folder.path("htdigest"))
              Require valid-user
            """
        let config = """
            ServerRoot "\(folder.path)"
            ServerName 127.0.0.1
            Listen 127.0.0.1:\(port)
            \(tls ? "SSLEngine on\nSSLCertificateFile \(folder.path("cert.pem"))\nSSLCertificateKeyFile \(folder.path("key.pem"))\nProtocols h2 http/1.1" : "")
            PidFile \(folder.path("httpd.pid"))
            ErrorLog \(errorLog)
            LogFormat "%m %U %>s %B %H depth=%{Depth}i" folio
            CustomLog \(accessLog) folio
            LogFormat "%m %U %>s %{Authorization}i" auth
            CustomLog \(authLog) auth
            \(loads)
            User www-data
            Group www-data
            TypesConfig /etc/mime.types
            DavLockDB \(folder.path("lock/DavLock"))
            Alias /dav \(servedRoot)
            Alias /index \(servedRoot)
            Alias /digest \(servedRoot)
            Alias /davinf \(servedRoot)
            Alias /mixed \(servedRoot)
            <Directory \(servedRoot)>
              Require all granted
              Options +Indexes
            </Directory>
            <Location /dav>
              Dav On
            </Location>
            <Location /davinf>
              Dav On
              DavDepthInfinity On
            </Location>
            <Location /mixed>
              Dav On
            </Location>
            <Location /mixed/locked>
            \(digestAuth)
            </Location>
            <Location /digest>
              Dav On
            \(digestAuth)
            </Location>

            """
        try config.write(toFile: folder.path("httpd.conf"), atomically: false, encoding: .utf8)
    }
}
