import FolioCore
import Foundation
import Glibc

/// Pinning a server's host key: what `folio trust sftp://host:port` shows and writes.
///
/// Folio never connects to a host whose key is not in known_hosts; this is the one way to add it, after a person
/// compared the fingerprint (or said `--yes`).
public enum HostKeyTrust {
    /// A server's host key as people compare it and as known_hosts stores it.
    public struct HostKey: Sendable, Equatable {
        /// The SSH name of the key type, e.g. `ssh-ed25519`.
        public var keyType: String
        /// `SHA256:` and the unpadded base64 of the key's SHA-256, as `ssh-keygen -l` prints it.
        public var fingerprint: String
        /// The line to append to known_hosts: `host` (port 22) or `[host]:port`, the type and the base64 key.
        public var knownHostsLine: String
    }

    /// The known_hosts file Folio uses when a target sets none: `~/.ssh/known_hosts` of the user running it.
    public static var defaultKnownHostsPath: String { SFTPEndpoint.currentUser.home + "/.ssh/known_hosts" }

    /// What a known_hosts file says about a server's current key.
    public enum Standing: Sendable, Equatable {
        /// The key is listed for this host and port.
        case trusted
        /// The host is not listed with a key of this type.
        case unknown
        /// The host is listed with a different key of this type: refuse, and do not add a second one.
        case changed
        /// The key is marked `@revoked` in known_hosts (for any host): never accepted, never added.
        case revoked
    }

    /// Connects to `host:port` (key exchange only, no authentication) and returns the key it offers and what
    /// `knownHostsPath` says about it. Blocks. The key asked for is the one a sync would be checked against: of a
    /// type `knownHostsPath` lists for the host, else ed25519 when the server has one (see
    /// `LibSSH2.preferKnownHostKeyTypes`).
    public static func fetch(host: String, port: Int, knownHostsPath: String, timeoutSeconds: Int = 30) throws -> (key: HostKey, standing: Standing) {
        let display = "sftp://\(host):\(port)"
        let lines = knownHostsLines(knownHostsPath, host: host, port: port)
        let (session, socket) = try SSHSession.handshake(host: host, port: port, timeoutSeconds: timeoutSeconds, knownHosts: lines, display: display)
        defer { LibSSH2.end(session, socket: socket) }
        let key = try describe(session, host: host, port: port)
        if isRevoked(key.raw, lines: lines) { return (key.info, .revoked) }
        let result: LibSSH2.KnownHostResult
        do {
            result = try LibSSH2.checkKnownHosts(session, lines: lines, names: knownHostsNames(host: host, port: port),
                                                 key: key.raw, keyType: key.rawType)
        } catch {
            throw SourceError(.localIO, "cannot check \(knownHostsPath)", underlying: error.description)
        }
        let standing: Standing = switch result {
        case .match: .trusted
        case .notFound: .unknown
        case .mismatch: .changed
        }
        return (key.info, standing)
    }

    /// Appends the key's line to a known_hosts file, creating the file (0644, as ssh does: host keys are public,
    /// and a service user such as the daemon's must read a file root wrote) and its folder (0700) if needed.
    public static func append(_ key: HostKey, to knownHostsPath: String) throws {
        let folder = (knownHostsPath as NSString).deletingLastPathComponent
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder) {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw SourceError(.localIO, "cannot create \(folder) for \(knownHostsPath): \(error.localizedDescription)")
            }
        }
        let fd = open(knownHostsPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw SourceError(.localIO, "cannot open \(knownHostsPath) to add the host key: \(String(cString: strerror(errno)))", underlying: "errno \(errno)")
        }
        defer { close(fd) }
        var text = key.knownHostsLine + "\n"
        // Why: a file whose last line lacks a newline would otherwise get our entry glued onto it.
        var size = stat()
        if fstat(fd, &size) == 0, size.st_size > 0, let existing = FileManager.default.contents(atPath: knownHostsPath), existing.last != UInt8(ascii: "\n") {
            text = "\n" + text
        }
        let written = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, $0.count - 1) }
        guard written == text.utf8.count, fsync(fd) == 0 else {
            throw SourceError(.localIO, "cannot write \(knownHostsPath): \(String(cString: strerror(errno)))", underlying: "errno \(errno)")
        }
    }

    /// The key a session's server offered, with its raw bytes and libssh2 type for checking.
    static func describe(_ session: OpaquePointer, host: String, port: Int) throws(SourceError) -> (info: HostKey, raw: [UInt8], rawType: Int32) {
        let display = "sftp://\(host):\(port)"
        let key: (key: [UInt8], type: Int32)
        let hash: [UInt8]
        do {
            key = try LibSSH2.hostKey(session)
            hash = try LibSSH2.hostKeySHA256(session)
        } catch {
            throw SourceError(.protocolViolation, "\(display) sent no usable host key", underlying: error.description)
        }
        let typeName = sshName(ofKey: key.key) ?? "unknown"
        var fingerprint = Data(hash).base64EncodedString()
        while fingerprint.hasSuffix("=") { fingerprint.removeLast() }
        let line = "\(knownHostsName(host: host, port: port)) \(typeName) \(Data(key.key).base64EncodedString())"
        return (HostKey(keyType: typeName, fingerprint: "SHA256:" + fingerprint, knownHostsLine: line), key.key, key.type)
    }

    /// The name a server's keys are listed under in known_hosts, as OpenSSH writes and looks it up: the host in
    /// lower case, as `[host]:port` unless the port is 22. Only this exact name is checked, as OpenSSH does.
    public static func knownHostsName(host: String, port: Int) -> String {
        let host = host.lowercased()
        return port == 22 ? host : "[\(host)]:\(port)"
    }

    /// The names to look a server up under: `knownHostsName`, then, for a host typed with capitals, the name as
    /// typed, which older Folio versions wrote (so their `folio trust` lines keep working).
    static func knownHostsNames(host: String, port: Int) -> [String] {
        let typed = port == 22 ? host : "[\(host)]:\(port)"
        let name = knownHostsName(host: host, port: port)
        return typed == name ? [name] : [name, typed]
    }

    /// The key type is the first string of the SSH wire-format key.
    private static func sshName(ofKey key: [UInt8]) -> String? {
        guard key.count >= 4 else { return nil }
        let length = Int(key[0]) << 24 | Int(key[1]) << 16 | Int(key[2]) << 8 | Int(key[3])
        guard length > 0, length < 64, key.count >= 4 + length else { return nil }
        return String(decoding: key[4..<(4 + length)], as: UTF8.self)
    }

    /// Why this process cannot read `path` (errno's text: the file or a folder on its way is not readable), or nil
    /// when it can or the file does not exist. Why ask: such a file is read as empty, and its host would otherwise
    /// be called unknown, with `folio trust` for a fix that changes nothing.
    static func unreadableReason(_ path: String) -> String? {
        guard access(path, R_OK) != 0, errno != ENOENT else { return nil }
        return String(cString: strerror(errno))
    }

    /// Whether `key` (the wire-format key the server sent) is on a `@revoked` line, whatever host that line names.
    /// Why by hand: libssh2 1.10 cannot read marker lines and skips them, so a revoked key also listed plainly (a
    /// line trusting it from before its revocation) was accepted. Why for any host, where OpenSSH matches the
    /// line's host patterns: a key revoked is revoked (`@revoked *` is the usual way to write it).
    static func isRevoked(_ key: [UInt8], lines: [String]) -> Bool {
        lines.contains { line in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 4, fields[0] == "@revoked", let blob = Data(base64Encoded: String(fields[3])) else { return false }
            return blob.elementsEqual(key)
        }
    }

    /// Whether `path` is a folder (a known-hosts setting that names `~/.ssh` rather than the file in it).
    static func isFolder(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR
    }

    /// A known_hosts file's lines for checking `host` on `port`; a missing file has none (every host is then
    /// unknown). A line whose hosts are patterns (`*`, `?`, `!` negation, as OpenSSH reads them) is kept, under
    /// the server's own name, when they match it, and left out when not: libssh2 1.10 compares names only.
    static func knownHostsLines(_ path: String, host: String, port: Int) -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        let names = knownHostsNames(host: host, port: port)
        return String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
            .filter { !$0.hasPrefix("#") && !$0.trimmingCharacters(in: .whitespaces).isEmpty }
            .compactMap { resolvingPatterns($0, names: names) }
    }

    /// `line` with a host field of patterns replaced by the first of `names` it matches, or nil when it matches
    /// none; any other line as it is.
    static func resolvingPatterns(_ line: String, names: [String]) -> String? {
        guard !line.hasPrefix("@"), !line.hasPrefix("|"), let space = line.firstIndex(where: { $0 == " " || $0 == "\t" }) else { return line }
        let field = line[..<space]
        guard field.contains(where: { $0 == "*" || $0 == "?" || $0 == "!" }) else { return line }
        let patterns = field.split(separator: ",")
        guard let name = names.first(where: { name in
            let lower = name.lowercased()
            // A negated pattern that matches rules the line out, whatever else matches (OpenSSH's match_host_list).
            if patterns.contains(where: { $0.hasPrefix("!") && globMatches(Array($0.dropFirst().lowercased().utf8), Array(lower.utf8)) }) { return false }
            return patterns.contains { !$0.hasPrefix("!") && globMatches(Array($0.lowercased().utf8), Array(lower.utf8)) }
        }) else { return nil }
        return name + line[space...]
    }

    /// OpenSSH's host pattern: `*` any run of bytes, `?` any one byte, everything else itself (no brackets: a
    /// `[host]:port` name is written with them).
    static func globMatches(_ pattern: [UInt8], _ text: [UInt8]) -> Bool {
        var p = 0, t = 0, star: Int?, resume = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "?") || pattern[p] == text[t] {
                p += 1
                t += 1
            } else if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                resume = t
                p += 1
            } else if let star {
                p = star + 1
                resume += 1
                t = resume
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}
